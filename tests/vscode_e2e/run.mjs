#!/usr/bin/env node
// End-to-end run of the Completer extension in VS Code (code-server) in headless chromium.
//
//   node tests/vscode_e2e/run.mjs --tools DIR --python PY --artifacts DIR                 the checks
//   node tests/vscode_e2e/run.mjs --tools DIR --python PY --artifacts DIR --bench 20 --out FILE
//                                                     ghost-text latency after a keystroke, as JSON
//
// --tools is the folder scripts/install_vscode_e2e.sh prints (code-server and playwright-core); --python an
// interpreter with the completer package. Exits 0 when every check passed; prints one line per check.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { log, Session, sleep } from './harness.mjs';
import { runChecks } from './checks.mjs';
import { runBench } from './bench.mjs';

/** The whole run's limit: the checks take ~20 s, the bench ~1 min. */
const DEADLINE_S = 240;
const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');

export const SAMPLE = [
    'import os',
    '',
    '',
    'def read_lines(path):',
    '    with open(path) as f:',
    '        return f.read().splitlines()',
    '',
    '',
    'def count_words(path):',
    '    total = 0',
    '    for line in read_lines(path):',
    '        total += len(line.split())',
    '    return total',
    '',
    '',
    'def main():',
    '    ',
].join('\n');

/** A notebook whose last cell uses a function that only its first cell defines. */
export const NOTEBOOK = {
    cells: [
        { cell_type: 'code', execution_count: null, metadata: {}, outputs: [],
            source: ['import math\n', '\n', '\n', 'def frobnicate_the_widgets(count):\n',
                '    return math.sqrt(count) * 2\n'] },
        { cell_type: 'markdown', metadata: {}, source: ['Notes'] },
        { cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source: ['total = '] },
    ],
    metadata: { language_info: { name: 'python' } },
    nbformat: 4,
    nbformat_minor: 5,
};

function settings() {
    return {
        'security.workspace.trust.enabled': false,
        'telemetry.telemetryLevel': 'off',
        'update.mode': 'none',
        'extensions.autoCheckUpdates': false,
        'extensions.autoUpdate': false,
        'extensions.ignoreRecommendations': true,
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'workbench.enableExperiments': false,
        'files.autoSave': 'off',
        // Only ghost text: the suggest widget (word-based items) would otherwise open while typing and take Tab.
        'editor.quickSuggestions': { other: 'off', comments: 'off', strings: 'off' },
        'editor.suggestOnTriggerCharacters': false,
        'editor.wordBasedSuggestions': 'off',
        'editor.inlineSuggest.enabled': true,
        // The checks retype settings.json in its editor: no auto-closed quotes or brackets there.
        '[jsonc]': { 'editor.autoClosingBrackets': 'never', 'editor.autoClosingQuotes': 'never', 'editor.autoSurround': 'never',
            'editor.autoIndent': 'none', 'editor.formatOnType': false },
        '[json]': { 'editor.autoClosingBrackets': 'never', 'editor.autoClosingQuotes': 'never', 'editor.autoSurround': 'never',
            'editor.autoIndent': 'none', 'editor.formatOnType': false },
        'completer.trace.server': 'messages',
    };
}

async function main() {
    const { values } = parseArgs({
        options: {
            tools: { type: 'string' },
            python: { type: 'string' },
            artifacts: { type: 'string' },
            bench: { type: 'string' },
            out: { type: 'string' },
        },
    });
    if (!values.tools || !values.python || !values.artifacts) {
        throw new Error('usage: run.mjs --tools DIR --python PY --artifacts DIR [--bench N --out FILE]');
    }
    fs.mkdirSync(values.artifacts, { recursive: true });
    const root = fs.mkdtempSync(path.join(values.artifacts, 'session-'));
    const workspace = path.join(root, 'workspace');
    fs.mkdirSync(workspace, { recursive: true });
    fs.writeFileSync(path.join(workspace, 'sample.py'), SAMPLE);
    fs.writeFileSync(path.join(workspace, 'notes.js'), 'const notes = [];\n');
    fs.mkdirSync(path.join(workspace, 'vault'));
    fs.writeFileSync(path.join(workspace, 'vault', 'vault_keys.py'), 'STRIPE_KEY = "sk-test"\n');
    fs.writeFileSync(path.join(workspace, 'analysis.ipynb'), JSON.stringify(NOTEBOOK, null, 1));
    const session = new Session({
        toolsDir: values.tools,
        extensionSource: path.join(REPO, 'vscode-extension'),
        workspace,
        // The bench times what a user has by default: no LSP trace.
        settings: values.bench ? { ...settings(), 'completer.trace.server': 'off' } : settings(),
        machineSettings: { 'completer.pythonPath': values.python },
        root,
    });
    let failed = false;
    const started = Date.now();
    // Stop on our own well before the pytest wrapper's timeout, so code-server and chromium are always closed.
    const deadline = setTimeout(async () => {
        console.error(`FAIL: still running after ${DEADLINE_S} s; screenshot in ${values.artifacts}`);
        await session.screenshot(path.join(values.artifacts, 'failure.png')).catch(() => undefined);
        await session.close();
        process.exit(1);
    }, DEADLINE_S * 1000);
    deadline.unref();
    try {
        await session.start();
        if (values.bench) {
            const result = await runBench(session, { keystrokes: Number(values.bench), python: values.python });
            if (values.out) {
                fs.writeFileSync(values.out, JSON.stringify(result, null, 2) + '\n');
                log(`wrote ${values.out}`);
            }
            console.log(JSON.stringify(result.summary));
        } else {
            await runChecks(session, { python: values.python, artifacts: values.artifacts, workspace });
        }
    } catch (err) {
        failed = true;
        console.error(`FAIL: ${err instanceof Error ? err.stack : err}`);
        await session.screenshot(path.join(values.artifacts, 'failure.png')).catch(() => undefined);
        try {
            fs.writeFileSync(path.join(values.artifacts, 'completer-output.log'), session.completerLog());
        } catch {
            // no log yet
        }
        console.error(`code-server log: ${session.serverLog}`);
    } finally {
        await session.close();
        await sleep(100);
        log(`done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    process.exit(failed ? 1 : 0);
}

await main();
