// The bundled extension (dist/extension.js, with the real vscode-languageclient inside) activated in a
// fake VS Code host (fakeHost.ts) against the real server: the providers the client registers are
// called the way the editor calls them, through the extension's middleware.
//
// Interpreter: $COMPLETER_PYTHON, else python3, given to the extension as completer.pythonPath.

import {
    CancellationTokenSource, closeWindow, FakeTextDocument, host, InlineCompletionList, InlineCompletionTriggerKind,
    mock, Position, Uri,
} from './fakeHost';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';

const extensionDir = path.resolve(__dirname, '..', '..', '..');
const repoDir = path.dirname(extensionDir);
const bundle = path.join(extensionDir, 'dist', 'extension.js');
const python = process.env.COMPLETER_PYTHON || 'python3';

const LINES = ['import os', '', '', 'def main():', '    for name in os.listdir("."):', '        print('];
const LINE = LINES.length - 1;
const TYPED = LINES[LINE];

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, ms = 120_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
        const value = await probe();
        if (value) {
            return value;
        }
        if (Date.now() > deadline || mock.errors.length) {
            assert.fail(`timed out waiting for ${what}; status bar: ${mock.statusItems[0]?.text}; errors: ${JSON.stringify(mock.errors)}; log:\n${logTail()}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
    }
}

function logTail(): string {
    return (mock.outputChannels[0]?.lines ?? []).slice(-40).join('\n');
}

function inlineItems(result: unknown): { insertText: unknown; range?: { start: Position; end: Position } }[] {
    if (!result) {
        return [];
    }
    return Array.isArray(result) ? result : (result as InlineCompletionList).items;
}

describe('bundled extension in a fake VS Code host (real server)', { timeout: 600_000 }, () => {
    let extension: { activate(context: unknown): Promise<unknown>; deactivate(): Promise<void> };
    const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'completer-ext-host-'));
    const document = new FakeTextDocument(Uri.file(path.join(repoDir, 'host_example.py')), 'python', LINES.join('\n'));
    const context = { subscriptions: [] as { dispose(): unknown }[], extensionPath: extensionDir };

    before(async () => {
        assert.ok(fs.existsSync(bundle), `${bundle} is missing: run npm run build first`);
        process.env.COMPLETER_LOG_DIR = logDir;
        process.env.PYTHONPATH = [repoDir, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter);
        mock.settings.set('completer.pythonPath', python);
        mock.settings.set('completer.completionItems', true); // off by default in VS Code: these tests check both kinds
        mock.workspaceFolders = [{ uri: Uri.file(repoDir) as any, name: 'repo', index: 0 }];
        host.documents.push(document);
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        extension = require(bundle);
        await extension.activate(context);
    });

    after(async () => {
        await closeWindow(extension, context);
        fs.rmSync(logDir, { recursive: true, force: true });
    });

    test('starts the server and shows the model in the status bar', async () => {
        const text = await until('the model name in the status bar', () => {
            const current = mock.statusItems[0]?.text;
            return current?.startsWith('$(sparkle) python-small') ? current : undefined;
        });
        assert.match(text, /^\$\(sparkle\) python-small/);
        assert.equal(mock.errors.length, 0, JSON.stringify(mock.errors));
        assert.deepEqual([...mock.commands.keys()].filter((c) => c.startsWith('completer.')).sort(), [
            'completer.chooseModel',
            'completer.restartServer',
            'completer.showLogs',
            'completer.toggle',
        ]);
    });

    test('inline completion through the client: a whole line, and the latency in the status bar', async () => {
        const inline = await until('an inline completion provider', () => host.inlineProviders[0]);
        const cursor = new Position(LINE, TYPED.length);
        const items = await until('inline suggestions', async () => {
            const source = new CancellationTokenSource();
            const result = await inline.provider.provideInlineCompletionItems(
                document,
                cursor,
                { triggerKind: InlineCompletionTriggerKind.Automatic, selectedCompletionInfo: undefined },
                source.token,
            );
            const list = inlineItems(result);
            return list.length ? list : undefined;
        });
        for (const item of items) {
            assert.equal(typeof item.insertText, 'string');
            const range = item.range!;
            assert.equal(range.start.line, LINE);
            const line = TYPED.slice(0, range.start.character) + (item.insertText as string) + TYPED.slice(range.end.character);
            assert.ok(line.startsWith(TYPED) && line.length > TYPED.length, `whole line ${JSON.stringify(line)}`);
        }
        await until('latency in the status bar', () => /· \d+ ms$/.test(mock.statusItems[0].text) || undefined);
    });

    test('completion items through the client', async () => {
        const completion = await until('a completion provider', () => host.completionProviders[0]);
        const source = new CancellationTokenSource();
        const result = await completion.provider.provideCompletionItems(document, new Position(LINE, TYPED.length), source.token, {
            triggerKind: 0,
            triggerCharacter: undefined,
        });
        const items = Array.isArray(result) ? result : result?.items ?? [];
        assert.ok(items.length > 0, 'completion items');
        assert.ok(items.some((item: { insertText?: unknown }) => typeof item.insertText === 'string' && item.insertText.startsWith(TYPED)));
    });

    test('the toggle turns suggestions off and on', async () => {
        const inline = host.inlineProviders[0];
        const ask = async () =>
            inlineItems(
                await inline.provider.provideInlineCompletionItems(
                    document,
                    new Position(LINE, TYPED.length),
                    { triggerKind: InlineCompletionTriggerKind.Invoke, selectedCompletionInfo: undefined },
                    new CancellationTokenSource().token,
                ),
            );
        await mock.commands.get('completer.toggle')!();
        assert.equal(mock.settings.get('completer.enabled'), false);
        assert.match(mock.statusItems[0].text, /^\$\(circle-slash\)/);
        assert.deepEqual(await ask(), []);
        await mock.commands.get('completer.toggle')!();
        assert.equal(mock.settings.get('completer.enabled'), true);
        await until('suggestions after turning them back on', async () => ((await ask()).length > 0 ? true : undefined));
    });

    test('restart command starts a new server', async () => {
        await mock.commands.get('completer.restartServer')!();
        await until('the model after the restart', () => mock.statusItems[0].text.startsWith('$(sparkle) python-small') || undefined);
        assert.ok(host.inlineProviders.length >= 1);
    });
});
