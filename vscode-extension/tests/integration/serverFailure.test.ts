// A server that exits as it starts, or stops and then fails to start again: the bundled extension in the fake VS
// Code host (fakeHost.ts) with the real vscode-languageclient. The user gets one message that says why (the
// server's own last line on stderr), not the client's popup per restart and per broken pipe.
//
// The interpreter is a shell script in front of $COMPLETER_PYTHON (else python3): it passes the install check
// (`-c ...`) as that Python, and runs `-m lsp` as the test says.

import { closeWindow, mock } from './fakeHost';
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

/** The server's process: the child of this process that runs `-m lsp`, or the relay it becomes where a session host
 *  serves it (lsp/relay.py execs a shell named `completer-relay`). */
function serverPid(): number | undefined {
    for (const entry of fs.readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) {
            continue;
        }
        try {
            const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
            const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
            const args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
            if (ppid === process.pid && (args.includes('lsp') || args[0] === 'completer-relay')) {
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
        await closeWindow(extension, context);
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

    test('a server whose output the client cannot read: stopped, and said once', async () => {
        // Answers initialize, then writes what is no LSP message, again and again.
        const garbling = path.join(dir, 'garbling.py');
        fs.writeFileSync(garbling, [
            'import json, sys, time',
            'headers = {}',
            'while (line := sys.stdin.buffer.readline().strip()):',
            '    key, value = line.decode().split(":", 1)',
            '    headers[key.lower()] = value.strip()',
            'request = json.loads(sys.stdin.buffer.read(int(headers["content-length"])))',
            'body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"capabilities": {}}}).encode()',
            'sys.stdout.buffer.write(b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body)',
            'sys.stdout.buffer.flush()',
            'time.sleep(1)',
            'for _ in range(8):',
            '    sys.stdout.buffer.write(b"Garbage: x\\r\\n\\r\\n")',
            '    sys.stdout.buffer.flush()',
            '    time.sleep(0.1)',
            'time.sleep(60)',
            '',
        ].join('\n'));
        const script2 = path.join(dir, 'python-garbling');
        fs.writeFileSync(script2, [
            '#!/bin/sh',
            `if [ "$1" = "-c" ]; then exec ${JSON.stringify(python)} "$@"; fi`,
            `exec ${JSON.stringify(python)} ${JSON.stringify(garbling)}`,
            '',
        ].join('\n'), { mode: 0o755 });
        mock.errors.length = 0;
        mock.changeSettings({ 'completer.pythonPath': script2 }); // a new interpreter: the server restarts
        await until('the message', () => mock.errors.length > 0 || undefined);
        await sleep(2000);
        assert.match(String(mock.statusItems[0].tooltip), /connection to the server failed/);
        assert.equal(mock.errors.length, 1, JSON.stringify(mock.errors));
        assert.equal(mock.errors[0].message,
            'Completer: the connection to the server failed: Header must provide a Content-Length property.');
    });
});
