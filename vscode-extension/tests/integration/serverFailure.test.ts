// A server that exits as it starts, or stops and then fails to start again: the bundled extension in the fake VS
// Code host (fakeHost.ts) with the real vscode-languageclient. The user gets one message that says why (the
// server's own last line on stderr), not the client's popup per restart and per broken pipe.
//
// The interpreter is a shell script in front of $COMPLETER_PYTHON (else python3): it passes the install check
// (`-c ...`) as that Python, and runs `-m lsp` as the test says.

import { mock } from './fakeHost';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';

const extensionDir = path.resolve(__dirname, '..', '..', '..');
const repoDir = path.dirname(extensionDir);
const bundle = path.join(extensionDir, 'dist', 'extension.js');
const python = process.env.COMPLETER_PYTHON || 'python3';
const REASON = "ModuleNotFoundError: No module named 'lsprotocol'";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(what: string, probe: () => T | undefined, ms = 120_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
        const value = probe();
        if (value) {
            return value;
        }
        if (Date.now() > deadline) {
            assert.fail(`timed out waiting for ${what}; status bar: ${mock.statusItems[0]?.text}; errors: ` +
                `${JSON.stringify(mock.errors)}`);
        }
        await sleep(100);
    }
}

/** The server's process: the child of this process that runs `-m lsp`. */
function serverPid(): number | undefined {
    for (const entry of fs.readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) {
            continue;
        }
        try {
            const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
            const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
            const args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
            if (ppid === process.pid && args.includes('lsp')) {
                return Number(entry);
            }
        } catch {
            // gone meanwhile
        }
    }
    return undefined;
}

describe('a server that fails (fake VS Code host)', { timeout: 600_000, skip: process.platform !== 'linux' }, () => {
    let extension: { activate(context: unknown): Promise<unknown>; deactivate(): Promise<void> };
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'completer-ext-failure-'));
    const flag = path.join(dir, 'started-once');
    const script = path.join(dir, 'python');
    const context = { subscriptions: [] as { dispose(): unknown }[], extensionPath: extensionDir };

    before(async () => {
        assert.ok(fs.existsSync(bundle), `${bundle} is missing: run npm run build first`);
        // The first `-m lsp` is the real server once $flag exists; every other one dies as the server does
        // where a dependency is missing.
        fs.writeFileSync(script, [
            '#!/bin/sh',
            `if [ "$1" = "-c" ]; then exec ${JSON.stringify(python)} "$@"; fi`,
            `if [ -e ${JSON.stringify(flag + '.real')} ] && [ ! -e ${JSON.stringify(flag)} ]; then`,
            `  touch ${JSON.stringify(flag)}; exec ${JSON.stringify(python)} "$@"`,
            'fi',
            'echo "Traceback (most recent call last):" >&2',
            `echo ${JSON.stringify(REASON)} >&2`,
            'exit 1',
            '',
        ].join('\n'), { mode: 0o755 });
        process.env.COMPLETER_LOG_DIR = dir;
        process.env.PYTHONPATH = [repoDir, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter);
        mock.settings.set('completer.pythonPath', script);
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        extension = require(bundle);
        await extension.activate(context);
    });

    after(async () => {
        await extension?.deactivate();
        for (const subscription of context.subscriptions) {
            try {
                subscription.dispose();
            } catch {
                // best effort
            }
        }
        fs.rmSync(dir, { recursive: true, force: true });
    });

    test('a server that exits as it starts: one message, with its last line', async () => {
        await until('the error in the status bar', () => mock.statusItems[0]?.text.startsWith('$(error)') || undefined);
        await sleep(2000); // what the client would still have shown, one popup per restart
        assert.equal(mock.errors.length, 1, JSON.stringify(mock.errors));
        assert.equal(mock.errors[0].message, `Completer: the language server failed to start: ${REASON}`);
        assert.deepEqual(mock.errors[0].items, ['Show Logs', 'Restart Server']);
        assert.match(String(mock.statusItems[0].tooltip), new RegExp(REASON.replace(/[()']/g, '.')));
    });

    test('a server that stops and does not start again: one message, and Restart Server brings it back', async () => {
        mock.errors.length = 0;
        fs.writeFileSync(flag + '.real', '');
        await mock.commands.get('completer.restartServer')!();
        await until('the model', () => mock.statusItems[0].text.startsWith('$(sparkle) python-small') || undefined);
        assert.equal(mock.errors.length, 0, JSON.stringify(mock.errors));

        process.kill(await until('the server process', serverPid), 'SIGKILL'); // the restart that follows fails
        await until('the error in the status bar', () => mock.statusItems[0].text.startsWith('$(error)') || undefined);
        await sleep(2000);
        assert.equal(mock.errors.length, 1, JSON.stringify(mock.errors));
        assert.equal(mock.errors[0].message, `Completer: the server stopped and did not start again: ${REASON}.`);
        assert.deepEqual(mock.errors[0].items, ['Show Logs', 'Restart Server']);

        fs.rmSync(flag);
        await mock.commands.get('completer.restartServer')!();
        await until('the model again', () =>
            mock.statusItems[0].text.startsWith('$(sparkle) python-small') || undefined);
    });
});
