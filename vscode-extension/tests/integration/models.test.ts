// Integration: "Use a Model Already on This Machine" with the real `completer models` and `completer convert`
// of $COMPLETER_PYTHON (else python3), on a tiny checkpoint that the repository's test helpers build into a
// Hugging Face cache laid out in a temporary folder; only the VS Code UI is faked.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { bundleFolder, chooseModel, PickItem } from '../../src/common/models';

const extensionDir = path.resolve(__dirname, '..', '..', '..');
const repoDir = path.dirname(extensionDir);
const python = process.env.COMPLETER_PYTHON || 'python3';
const COMMIT = '0123456789abcdef0123456789abcdef01234567';

/** The tiny Qwen2 checkpoint of tests/hf_models.py as snapshot COMMIT of acme/tiny-coder in the cache `hub`. */
const BUILD = `
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from hf_models import checkpoint
hub = Path(sys.argv[2])
entry = hub / "models--acme--tiny-coder"
checkpoint(entry / "snapshots" / sys.argv[3], "qwen2", tied=True)
(entry / "refs").mkdir()
(entry / "refs" / "main").write_text(sys.argv[3])
`;

describe('choosing a model with the real completer CLI', () => {
    const saved = { ...process.env };
    let root: string;

    before(() => {
        root = fs.mkdtempSync(path.join(os.tmpdir(), 'completer-choose-'));
        execFileSync(python, ['-c', BUILD, path.join(repoDir, 'tests'), path.join(root, 'hub'), COMMIT], { stdio: 'pipe' });
        // every store the CLI looks in lies under root: none of this machine's own models are listed
        Object.assign(process.env, {
            HOME: path.join(root, 'home'), HF_HUB_CACHE: path.join(root, 'hub'), OLLAMA_MODELS: path.join(root, 'ollama'),
            TABBY_ROOT: path.join(root, 'tabby'), LLAMA_CACHE: path.join(root, 'llama-cache'),
        });
        delete process.env.XDG_CACHE_HOME;
        delete process.env.TABBY_MODEL_CACHE_ROOT;
    });

    after(() => {
        process.env = saved;
        fs.rmSync(root, { recursive: true, force: true });
    });

    test('a cached model is listed, converted into the storage folder and set as modelPath; it completes', async () => {
        const storageDir = path.join(root, 'storage');
        const offered: string[] = [];
        const described: (string | undefined)[] = [];
        const steps: string[] = [];
        const modelPaths: (string | null)[] = [];
        const errors: string[] = [];
        const chosen = await chooseModel({
            python: async () => python,
            storageDir,
            pick: async (items: PickItem[]) => {
                offered.push(...items.map((item) => item.label));
                described.push(...items.map((item) => item.description));
                return items.find((item) => item.label === 'acme/tiny-coder');
            },
            withProgress: (_title, task) => task((message) => steps.push(message), new AbortController().signal),
            setModelPath: async (value) => void modelPaths.push(value),
            showError: async (message) => void errors.push(message) as undefined,
            showInfo: async () => undefined,
            copyToClipboard: async () => undefined,
            log: { info: () => undefined, warn: () => undefined, error: (m) => errors.push(m) },
        });
        assert.deepEqual(errors, []);
        assert.deepEqual(offered, ['python-small', 'python-base', 'acme/tiny-coder']);
        assert.match(described[2] ?? '', /^Hugging Face cache · \w+ · \d+(\.\d)?[KMB]$/); // its size, from its header
        const folder = bundleFolder(storageDir, 'acme/tiny-coder');
        assert.equal(chosen, folder);
        assert.deepEqual(modelPaths, [folder]);
        // what the notification said along the way: completer convert --progress, one step a line
        for (const step of ['reading acme/tiny-coder', 'reading the weights', 'building the graph, its weights in INT8',
                            'layers [', 'optimizing the graph']) {
            assert.ok(steps.some((line) => line.startsWith(step)), `no "${step}" in ${JSON.stringify(steps)}`);
        }
        const manifest = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'));
        assert.equal(manifest.source.folder, 'acme/tiny-coder');
        assert.equal(manifest.source.revision, COMMIT);
        // the command that made it names the folder it lies in, not the work folder it was made in
        assert.ok(manifest.conversion.command.includes(`--out ${folder} `), manifest.conversion.command);
        assert.deepEqual(fs.readdirSync(path.dirname(folder)), [path.basename(folder)]); // no work folder, no lock
        const sample = path.join(root, 'sample.py');
        fs.writeFileSync(sample, 'def total(items):\n    return sum(items)\n');
        const answer = JSON.parse(execFileSync(python, ['-m', 'completer', 'complete', `${sample}:2:5`, '--model', folder,
                                                        '--json'], { encoding: 'utf8' }));
        assert.ok(Array.isArray(answer.suggestions));
    });
});
