// The "Use a Model Already on This Machine" flow with fake processes and a fake UI.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import {
    bundleFolder,
    ChooseDeps,
    chooseModel,
    listLocalModels,
    LongRunner,
    PickItem,
    pickItems,
} from '../../src/common/models';
import type { RunResult } from '../../src/common/python';

const ROWS = {
    places: {},
    models: [
        { id: 'acme/tiny-coder', store: 'Hugging Face cache', model_type: 'qwen2', convertible: true, why_not: null,
          parameters: 98304, size: '98K' },
        { id: 'ollama:qwen2.5-coder:1.5b', store: 'Ollama', model_type: 'qwen2', convertible: true, why_not: null,
          parameters: 1543714304, size: '1.5B' },
        { id: 'ollama:phi:latest', store: 'Ollama', model_type: 'phi3', convertible: false,
          why_not: "GGUF architecture 'phi3' is not supported", parameters: null, size: null },
    ],
};

function ran(stdout: string, code: number | null = 0, stderr = '', spawnError?: string): () => Promise<RunResult> {
    return async () => ({ code, stdout, stderr, spawnError });
}

describe('listing the models other tools downloaded', () => {
    test('reads completer models --json', async () => {
        const calls: string[][] = [];
        const listed = await listLocalModels('/py', async (command, args) => {
            calls.push([command, ...args]);
            return { code: 0, stdout: JSON.stringify(ROWS), stderr: '' };
        });
        assert.deepEqual(calls, [['/py', '-m', 'completer', 'models', '--json']]);
        assert.ok(listed.ok);
        assert.deepEqual(listed.models.map((m) => [m.id, m.convertible]), [
            ['acme/tiny-coder', true], ['ollama:qwen2.5-coder:1.5b', true], ['ollama:phi:latest', false]]);
        assert.equal(listed.models[2].whyNot, "GGUF architecture 'phi3' is not supported");
        assert.deepEqual(listed.models.map((m) => m.size), ['98K', '1.5B', null]);
    });

    test("a failure is the CLI's one line", async () => {
        const missing = "completer models: needs the convert extra (onnx is missing): pip install 'completer[convert]'";
        assert.deepEqual(await listLocalModels('/py', ran('', 2, `${missing}\n`)), { ok: false, detail: missing });
        assert.deepEqual(await listLocalModels('/nope', ran('', null, '', 'ENOENT')), { ok: false, detail: 'ENOENT' });
        const garbled = await listLocalModels('/py', ran('not json'));
        assert.ok(!garbled.ok && garbled.detail.startsWith('completer models printed no JSON'));
    });
});

describe('where a model is converted to', () => {
    test('one folder per model, named after it, never outside the storage folder', () => {
        const storage = path.join(os.tmpdir(), 'storage');
        const models = path.join(storage, 'models');
        assert.equal(bundleFolder(storage, 'ollama:qwen2.5-coder:1.5b'), path.join(models, 'ollama-qwen2.5-coder-1.5b'));
        assert.equal(bundleFolder(storage, 'acme/Tiny-GGUF:Q8_0'), path.join(models, 'acme-Tiny-GGUF-Q8_0'));
        for (const hostile of ['../..', '/', '..\\..', '.hidden']) {
            const folder = bundleFolder(storage, hostile);
            assert.equal(path.dirname(folder), path.join(storage, 'models'), hostile);
            assert.ok(!path.basename(folder).startsWith('.'), hostile);
        }
    });

    test('the embedded models first, then what converts, saying which are converted already', () => {
        const storage = '/storage';
        const converted = bundleFolder(storage, 'acme/tiny-coder');
        const items = pickItems(
            [
                { id: 'acme/tiny-coder', store: 'Hugging Face cache', kind: 'qwen2', convertible: true, whyNot: null,
                  size: '1.5B' },
                { id: 'ollama:x', store: 'Ollama', kind: 'qwen2', convertible: true, whyNot: null, size: null },
                { id: 'ollama:phi', store: 'Ollama', kind: 'phi3', convertible: false, whyNot: 'no', size: null },
            ],
            storage,
            (folder) => folder === converted,
        );
        assert.deepEqual(items.map((i) => [i.label, i.modelPath, i.convert]), [
            ['python-small', null, undefined],
            ['python-base', 'python-base', undefined],
            ['acme/tiny-coder', converted, undefined],
            ['ollama:x', bundleFolder(storage, 'ollama:x'), 'ollama:x'],
        ]);
        assert.equal(items[2].description, 'Hugging Face cache · qwen2 · 1.5B');
        assert.equal(items[3].description, 'Ollama · qwen2');
        assert.ok(items[2].detail?.startsWith('converted: '));
    });
});

interface Recorded {
    picked: PickItem[][];
    placeholders: string[];
    modelPaths: (string | null)[];
    errors: string[];
    infos: string[];
    converts: string[][];
    progress: string[];
    copied: string[];
}

function deps(storageDir: string, choose: (items: PickItem[]) => PickItem | undefined, convert: LongRunner,
              cancel = false): { deps: ChooseDeps; seen: Recorded } {
    const seen: Recorded = { picked: [], placeholders: [], modelPaths: [], errors: [], infos: [], converts: [], progress: [], copied: [] };
    const log = { info: () => undefined, warn: () => undefined, error: () => undefined };
    return {
        seen,
        deps: {
            python: async () => '/py',
            storageDir,
            pick: async (items, placeholder) => {
                seen.picked.push(items);
                seen.placeholders.push(placeholder);
                return choose(items);
            },
            withProgress: async (title, task) => {
                seen.progress.push(title);
                const abort = new AbortController();
                if (cancel) {
                    setTimeout(() => abort.abort(), 10);
                }
                return task((message) => seen.progress.push(message), abort.signal);
            },
            setModelPath: async (value) => void seen.modelPaths.push(value),
            showError: async (message) => void seen.errors.push(message) as undefined,
            showInfo: async (message) => void seen.infos.push(message),
            copyToClipboard: async (text) => void seen.copied.push(text),
            log,
            run: async () => ({ code: 0, stdout: JSON.stringify(ROWS), stderr: '' }),
            convert: async (command, args, onLine, signal) => {
                seen.converts.push([command, ...args]);
                return convert(command, args, onLine, signal);
            },
        },
    };
}

function storage(): string {
    return fs.mkdtempSync(path.join(os.tmpdir(), 'completer-models-'));
}

const byLabel = (label: string) => (items: PickItem[]) => items.find((i) => i.label === label);

describe('choosing a model', () => {
    test('a model not converted yet is converted once, then modelPath names its bundle', async () => {
        const dir = storage();
        const folder = bundleFolder(dir, 'ollama:qwen2.5-coder:1.5b');
        const { deps: d, seen } = deps(dir, byLabel('ollama:qwen2.5-coder:1.5b'), async (_c, args, onLine) => {
            onLine("reading Ollama's qwen2.5-coder:1.5b: checking its digest");
            const out = args[args.indexOf('--out') + 1];
            fs.mkdirSync(out, { recursive: true });
            fs.writeFileSync(path.join(out, 'manifest.json'), '{}');
            return { code: 0, stdout: 'wrote it', stderr: '' };
        });
        assert.equal(await chooseModel(d), folder);
        const made = path.join(path.dirname(folder), '.ollama-qwen2.5-coder-1.5b.work', 'ollama-qwen2.5-coder-1.5b');
        assert.deepEqual(seen.converts,
                         [['/py', '-m', 'completer', 'convert', 'ollama:qwen2.5-coder:1.5b', '--out', made, '--progress']]);
        assert.deepEqual(fs.readdirSync(path.dirname(folder)), ['ollama-qwen2.5-coder-1.5b']); // no work folder or lock
        assert.deepEqual(seen.modelPaths, [folder]);
        assert.deepEqual(seen.progress, ['Completer: converting ollama:qwen2.5-coder:1.5b',
                                         "reading Ollama's qwen2.5-coder:1.5b: checking its digest"]);
        assert.ok(seen.placeholders[0].includes('1 more cannot be converted'));
        assert.equal(seen.infos.length, 1);
        // chosen again: it is converted already, and is used as it is
        assert.equal(await chooseModel(d), folder);
        assert.equal(seen.converts.length, 1);
    });

    test('the embedded default sets modelPath back to unset', async () => {
        const { deps: d, seen } = deps(storage(), byLabel('python-small'), async () => assert.fail('no conversion'));
        assert.equal(await chooseModel(d), null);
        assert.deepEqual(seen.modelPaths, [null]);
    });

    test("a failed conversion is the converter's line, and modelPath is left as it was", async () => {
        const why = 'completer convert: ollama:qwen2.5-coder:1.5b: pre-tokenizer \'x\' is not supported';
        const { deps: d, seen } = deps(storage(), byLabel('ollama:qwen2.5-coder:1.5b'),
                                       async () => ({ code: 2, stdout: '', stderr: `${why}\n` }));
        assert.equal(await chooseModel(d), undefined);
        assert.deepEqual(seen.modelPaths, []);
        assert.deepEqual(seen.errors, ['Completer: could not convert ollama:qwen2.5-coder:1.5b: ' +
                                       "ollama:qwen2.5-coder:1.5b: pre-tokenizer 'x' is not supported"]);
    });

    test('cancelling stops the conversion, removes what it left, and changes nothing', async () => {
        const dir = storage();
        const models = path.join(dir, 'models');
        fs.mkdirSync(path.join(models, 'other-bundle'), { recursive: true });
        const { deps: d, seen } = deps(dir, byLabel('acme/tiny-coder'), (_c, args, _l, signal) =>
            new Promise((resolve) => {
                const beside = path.dirname(args[args.indexOf('--out') + 1]); // where completer convert stages
                fs.mkdirSync(path.join(beside, '.acme-tiny-coder.converting-x1'));  // what a killed convert leaves
                fs.mkdirSync(path.join(beside, '.gguf-y2'));
                signal.addEventListener('abort', () => resolve({ code: null, stdout: '', stderr: 'interrupted' }));
            }), true);
        assert.equal(await chooseModel(d), undefined);
        assert.deepEqual(seen.modelPaths, []);
        assert.deepEqual(seen.errors, []);
        assert.deepEqual(fs.readdirSync(models), ['other-bundle']);
    });

    test('a conversion killed halfway (out of memory) removes what it left, and says it was killed', async () => {
        const dir = storage();
        const models = path.join(dir, 'models');
        const { deps: d, seen } = deps(dir, byLabel('acme/tiny-coder'), async (_c, args) => {
            const beside = path.dirname(args[args.indexOf('--out') + 1]); // where completer convert stages
            fs.mkdirSync(path.join(beside, '.acme-tiny-coder.converting-k9')); // the OOM killer gives no chance to clean
            return { code: null, stdout: '', stderr: '' };
        });
        assert.equal(await chooseModel(d), undefined);
        assert.deepEqual(seen.modelPaths, []);
        assert.deepEqual(fs.readdirSync(models), []);
        assert.equal(seen.errors.length, 1);
        assert.doesNotMatch(seen.errors[0], /exit code null/);
    });

    test('two conversions at once: one killed halfway removes only what it made, and the other ends well', async () => {
        const dir = storage();
        let killedRuns = () => {};
        const killedRunning = new Promise<void>((resolve) => (killedRuns = resolve));
        let otherStages = () => {};
        const otherStaged = new Promise<void>((resolve) => (otherStages = resolve));
        const killed = deps(dir, byLabel('acme/tiny-coder'), async (_c, args) => {
            const out = args[args.indexOf('--out') + 1];
            fs.mkdirSync(path.join(path.dirname(out), '.gguf-k9'));
            fs.mkdirSync(path.join(path.dirname(out), '.acme-tiny-coder.converting-k9'));
            killedRuns();
            await otherStaged;
            return { code: null, stdout: '', stderr: '' }; // the OOM killer: it removed nothing
        });
        const other = deps(dir, byLabel('ollama:qwen2.5-coder:1.5b'), async (_c, args) => {
            const out = args[args.indexOf('--out') + 1];
            const unpacked = path.join(path.dirname(out), '.gguf-q4');
            const staging = path.join(path.dirname(out), '.ollama-qwen2.5-coder-1.5b.converting-q4');
            fs.mkdirSync(unpacked);
            fs.mkdirSync(staging);
            fs.writeFileSync(path.join(staging, 'manifest.json'), '{}');
            otherStages();
            await killedConversion;
            try {
                fs.renameSync(staging, out); // as completer convert puts its staging folder in place
            } catch (err) {
                return { code: 2, stdout: '', stderr: `completer convert: ${String(err)}\n` };
            } finally {
                fs.rmSync(unpacked, { recursive: true, force: true });
            }
            return { code: 0, stdout: 'wrote it', stderr: '' };
        });
        const killedConversion = chooseModel(killed.deps);
        await killedRunning;
        const folder = bundleFolder(dir, 'ollama:qwen2.5-coder:1.5b');
        assert.equal(await chooseModel(other.deps), folder);
        assert.equal(await killedConversion, undefined);
        assert.deepEqual(other.seen.errors, []);
        assert.deepEqual(fs.readdirSync(path.join(dir, 'models')), [path.basename(folder)]);
    });

    test('a model picked again while it converts is converted once; the second pick says it is under way', async () => {
        const dir = storage();
        let mayEnd = () => {};
        const ending = new Promise<void>((resolve) => (mayEnd = resolve));
        const writing = async (_c: string, args: string[]) => {
            const out = args[args.indexOf('--out') + 1];
            fs.mkdirSync(out, { recursive: true });
            await ending;
            fs.writeFileSync(path.join(out, 'manifest.json'), '{}');
            return { code: 0, stdout: 'wrote it', stderr: '' };
        };
        const first = deps(dir, byLabel('acme/tiny-coder'), writing);
        const second = deps(dir, byLabel('acme/tiny-coder'), async () => assert.fail('converted twice at once'));
        const converting = chooseModel(first.deps);
        await new Promise((resolve) => setImmediate(resolve)); // the first's converter runs
        assert.equal(first.seen.converts.length, 1);
        assert.equal(await chooseModel(second.deps), undefined);
        assert.deepEqual(second.seen.converts, []);
        assert.deepEqual(second.seen.modelPaths, []);
        assert.match(second.seen.infos.join('\n'), /acme\/tiny-coder is being converted already/);
        mayEnd();
        const folder = bundleFolder(dir, 'acme/tiny-coder');
        assert.equal(await converting, folder);
        assert.deepEqual(fs.readdirSync(path.join(dir, 'models')), [path.basename(folder)]);
        // picked again once it ended: it is converted, and used as it is
        assert.equal(await chooseModel(second.deps), folder);
        assert.deepEqual(second.seen.converts, []);
    });

    test("a lock left by a window that ended mid-conversion is taken over, its work folder cleared", async () => {
        const dir = storage();
        const models = path.join(dir, 'models');
        const gone = spawnSync(process.execPath, ['-e', '']).pid; // a process that ran, and is no more
        fs.mkdirSync(path.join(models, '.acme-tiny-coder.work', '.gguf-left'), { recursive: true });
        fs.writeFileSync(path.join(models, '.acme-tiny-coder.lock'), String(gone));
        const { deps: d, seen } = deps(dir, byLabel('acme/tiny-coder'), async (_c, args) => {
            const out = args[args.indexOf('--out') + 1];
            assert.deepEqual(fs.readdirSync(path.dirname(out)), []);
            fs.mkdirSync(out);
            const manifest = { conversion: { command: `completer convert acme/tiny-coder --out ${out}` } };
            fs.writeFileSync(path.join(out, 'manifest.json'), JSON.stringify(manifest));
            const card = `- Command: \`completer convert acme/tiny-coder --out ${out}\`\n`;
            fs.writeFileSync(path.join(out, 'MODEL.md'), card);
            return { code: 0, stdout: 'wrote it', stderr: '' };
        });
        const folder = bundleFolder(dir, 'acme/tiny-coder');
        assert.equal(await chooseModel(d), folder);
        assert.equal(seen.converts.length, 1);
        assert.deepEqual(fs.readdirSync(models), ['acme-tiny-coder']);
        // what the bundle says made it names the folder it lies in, not the work folder
        const manifest = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'));
        assert.equal(manifest.conversion.command, `completer convert acme/tiny-coder --out ${folder}`);
        assert.equal(fs.readFileSync(path.join(folder, 'MODEL.md'), 'utf8'),
                     `- Command: \`completer convert acme/tiny-coder --out ${folder}\`\n`);
    });

    test('a store that cannot be read is named in the log and the picker, not shown as having no models', async () => {
        const { deps: d, seen } = deps(storage(), () => undefined, async () => assert.fail('no conversion'));
        const warned: string[] = [];
        d.log = { ...d.log, warn: (message) => void warned.push(message) };
        const unreadable = ['/usr/share/ollama/.ollama/models (Permission denied)'];
        d.run = async () => ({ code: 0, stdout: JSON.stringify({ places: {}, models: [], unreadable }), stderr: '' });
        assert.equal(await chooseModel(d), undefined);
        assert.match(seen.placeholders[0], /1 folder\(s\) could not be read/);
        assert.deepEqual(warned, ['Cannot read /usr/share/ollama/.ollama/models (Permission denied); its models are not listed']);
    });

    test('without the convert extra, the install command is offered instead of a conversion', async () => {
        const { deps: d, seen } = deps(storage(), byLabel('ollama:qwen2.5-coder:1.5b'), async () => assert.fail('no conversion'));
        d.run = async () => ({ code: 0, stdout: JSON.stringify({ ...ROWS, convert_extra: false }), stderr: '' });
        d.repoDir = '/src/completer';
        d.showError = async (message) => {
            seen.errors.push(message);
            return 'Copy Install Command';
        };
        assert.equal(await chooseModel(d), undefined);
        assert.deepEqual(seen.modelPaths, []);
        assert.match(seen.errors[0], /needs the convert extra in \/py\. Install it with: \/py -m pip install -e '\/src\/completer\[convert\]'$/);
        assert.deepEqual(seen.copied, ["/py -m pip install -e '/src/completer[convert]'"]);
        // a model converted already, or an embedded one, needs no extra
        assert.equal(await chooseModel({ ...d, pick: async (items) => items[0] }), null);
    });

    test('nothing picked changes nothing; a listing that fails is shown', async () => {
        const { deps: d, seen } = deps(storage(), () => undefined, async () => assert.fail('no conversion'));
        assert.equal(await chooseModel(d), undefined);
        assert.deepEqual(seen.modelPaths, []);
        d.run = async () => ({ code: 2, stdout: '', stderr: 'completer models: needs the convert extra\n' });
        assert.equal(await chooseModel(d), undefined);
        assert.deepEqual(seen.errors,
                         ['Completer: could not list the models on this machine: completer models: needs the convert extra']);
    });
});
