// Integration: start the real language server (`<python> -m lsp`) and talk to it over stdio the way the
// extension's language client does, with the initializationOptions built by the extension's own code.
//
// Interpreter: $COMPLETER_PYTHON, else python3. The server runs from the repository root (so `-m lsp`
// finds the checkout even without an install) and loads its default model (repo models/, or
// $COMPLETER_MODEL). Its log files go to a temporary $COMPLETER_LOG_DIR.

import assert from 'node:assert/strict';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';
import {
    ClientCapabilities,
    CompletionItem,
    CompletionList,
    CompletionRequest,
    ConfigurationRequest,
    createProtocolConnection,
    DidChangeConfigurationNotification,
    DidChangeTextDocumentNotification,
    DidCloseTextDocumentNotification,
    DidOpenTextDocumentNotification,
    ExitNotification,
    InitializedNotification,
    InitializeRequest,
    InitializeResult,
    InlineCompletionItem,
    InlineCompletionList,
    InlineCompletionRequest,
    InlineCompletionTriggerKind,
    LogMessageNotification,
    LogMessageParams,
    ProtocolConnection,
    ShutdownRequest,
    StreamMessageReader,
    StreamMessageWriter,
} from 'vscode-languageserver-protocol/node';
import { INFO_REQUEST } from '../../src/common/constants';
import { modelLabel } from '../../src/common/manager';
import { sectionValue } from '../../src/common/middleware';
import { SERVER_MODULES, serverCommand } from '../../src/common/python';
import {
    didChangeConfigurationParams,
    ExtensionSettings,
    initializationOptions,
    readSettings,
} from '../../src/common/settings';

const extensionDir = path.resolve(__dirname, '..', '..', '..');
const repoDir = path.dirname(extensionDir);
const python = process.env.COMPLETER_PYTHON || 'python3';
const REQUEST_TIMEOUT_MS = 120_000;

/** The settings a user who changed nothing has: package.json's defaults read by the extension's code. */
function defaultSettings(): ExtensionSettings {
    const manifest = JSON.parse(fs.readFileSync(path.join(extensionDir, 'package.json'), 'utf8'));
    const properties: Record<string, { default: unknown }> = manifest.contributes.configuration.properties;
    const values = new Map(Object.entries(properties).map(([key, schema]) => [key.replace(/^completer\./, ''), schema.default]));
    return readSettings({ get: <T>(key: string) => values.get(key) as T | undefined }, { home: os.homedir() });
}

function withTimeout<T>(promise: Thenable<T>, what: string, ms = REQUEST_TIMEOUT_MS): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
        Promise.resolve(promise).finally(() => clearTimeout(timer)),
        new Promise<T>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
        }),
    ]);
}

const clientCapabilities: ClientCapabilities = {
    general: { positionEncodings: ['utf-16'] },
    workspace: {
        configuration: true,
        didChangeConfiguration: { dynamicRegistration: true },
        workspaceFolders: true,
    },
    textDocument: {
        synchronization: { dynamicRegistration: true, didSave: true, willSave: false, willSaveWaitUntil: false },
        completion: {
            dynamicRegistration: true,
            contextSupport: true,
            completionItem: { snippetSupport: true, insertReplaceSupport: true, labelDetailsSupport: true },
        },
        inlineCompletion: { dynamicRegistration: true },
    },
    window: { workDoneProgress: true, showMessage: {} },
};

/** Python source whose last line is being typed; the cursor is at its end. */
const DOCUMENT_LINES = [
    'import os',
    'import sys',
    '',
    '',
    'def list_python_files(root):',
    '    """Return the paths of the .py files under root."""',
    '    result = []',
    '    for dirpath, dirnames, filenames in os.walk(root):',
    '        for name in filenames:',
    '            if name.endswith(".py"):',
    '                result.append(os.path.join(dirpath, name))',
    '    return result',
    '',
    '',
    'def main():',
    '    for path in list_python_files(sys.argv[1]):',
    '        print(',
];
const TYPED_LINE = DOCUMENT_LINES.length - 1;
const TYPED = DOCUMENT_LINES[TYPED_LINE];

function lineAfterEdit(item: { range?: { start: { line: number; character: number }; end: { line: number; character: number } } }, text: string): string {
    const cursor = TYPED.length;
    const range = item.range ?? { start: { line: TYPED_LINE, character: cursor }, end: { line: TYPED_LINE, character: cursor } };
    assert.equal(range.start.line, TYPED_LINE, 'edit starts on the cursor line');
    assert.equal(range.end.line, TYPED_LINE, 'edit ends on the cursor line');
    return TYPED.slice(0, range.start.character) + text + TYPED.slice(range.end.character);
}

function assertWholeLine(resulting: string, what: string): void {
    assert.ok(!/[\r\n]/.test(resulting), `${what}: one line, got ${JSON.stringify(resulting)}`);
    assert.ok(resulting.startsWith(TYPED), `${what}: ${JSON.stringify(resulting)} does not start with ${JSON.stringify(TYPED)}`);
    assert.ok(resulting.trim().length > TYPED.trim().length, `${what}: adds nothing to ${JSON.stringify(TYPED)}`);
}

describe('language server over stdio (real server)', { timeout: 600_000 }, () => {
    let server: ChildProcess | undefined;
    let connection: ProtocolConnection | undefined;
    let logDir = '';
    let stderr = '';
    let exited: Promise<number | null> = Promise.resolve(null);
    const logMessages: string[] = [];
    let settings = { ...defaultSettings(), completionItems: true }; // items too, though VS Code users get ghost text only by default
    const uri = pathToFileURL(path.join(repoDir, 'integration_example.py')).toString();
    let version = 1;

    const conn = () => {
        assert.ok(connection, 'the server connection is open');
        return connection;
    };
    const diagnostics = () =>
        `\n--- server stderr (tail) ---\n${stderr.slice(-4000)}\n--- window/logMessage ---\n${logMessages.slice(-30).join('\n')}`;

    async function inline(kind: InlineCompletionTriggerKind): Promise<InlineCompletionItem[]> {
        const result = await withTimeout(
            conn().sendRequest(InlineCompletionRequest.type, {
                textDocument: { uri },
                position: { line: TYPED_LINE, character: TYPED.length },
                context: { triggerKind: kind },
            }),
            'textDocument/inlineCompletion',
        );
        if (!result) {
            return [];
        }
        return Array.isArray(result) ? result : (result as InlineCompletionList).items;
    }

    before(async () => {
        try {
            execFileSync(python, ['-c', `import ${SERVER_MODULES}`], { cwd: repoDir, stdio: 'pipe', timeout: 120_000 });
        } catch (err) {
            const detail = (err as { stderr?: Buffer }).stderr?.toString().trim() || String(err);
            assert.fail(
                `The completer server cannot be imported by ${python} (set COMPLETER_PYTHON to choose another ` +
                    `interpreter; install with: ${python} -m pip install -e ${repoDir}):\n${detail}`,
            );
        }
        logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'completer-ext-it-'));
        const { command, args } = serverCommand(python);
        const child = spawn(command, args, {
            cwd: repoDir,
            env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONIOENCODING: 'utf-8', COMPLETER_LOG_DIR: logDir },
            stdio: ['pipe', 'pipe', 'pipe'],
        });
        server = child;
        child.stderr!.setEncoding('utf8');
        child.stderr!.on('data', (chunk: string) => {
            stderr += chunk;
        });
        exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));

        const c = createProtocolConnection(new StreamMessageReader(child.stdout!), new StreamMessageWriter(child.stdin!));
        connection = c;
        // Requests the server may send, answered as vscode-languageclient would (with the same middleware code).
        c.onRequest(ConfigurationRequest.type, (params) => params.items.map((item) => sectionValue(item.section, settings) ?? null));
        for (const method of ['client/registerCapability', 'client/unregisterCapability', 'window/workDoneProgress/create']) {
            c.onRequest(method, () => null);
        }
        c.onNotification(LogMessageNotification.type, (params: LogMessageParams) => {
            logMessages.push(params.message);
        });
        c.listen();

        const result: InitializeResult = await withTimeout(
            c.sendRequest(InitializeRequest.type, {
                processId: process.pid,
                clientInfo: { name: 'completer-vscode-extension-integration-test', version: '0.1.0' },
                rootUri: pathToFileURL(repoDir).toString(),
                workspaceFolders: [{ uri: pathToFileURL(repoDir).toString(), name: 'repo' }],
                capabilities: clientCapabilities,
                initializationOptions: initializationOptions(settings),
            }),
            'initialize',
        );
        const caps = result.capabilities;
        assert.ok(caps.inlineCompletionProvider, `server announces inline completion: ${JSON.stringify(caps)}`);
        assert.ok(caps.completionProvider, 'server announces completion');
        await c.sendNotification(InitializedNotification.type, {});
        await c.sendNotification(DidOpenTextDocumentNotification.type, {
            textDocument: { uri, languageId: 'python', version, text: DOCUMENT_LINES.join('\n') },
        });
    });

    after(async () => {
        if (connection) {
            try {
                await withTimeout(connection.sendRequest(ShutdownRequest.type), 'shutdown', 15_000);
                await connection.sendNotification(ExitNotification.type);
            } catch {
                // the exit code check below reports a dead server
            }
        }
        if (server && server.exitCode === null) {
            const timer = setTimeout(() => server?.kill(), 15_000);
            await exited;
            clearTimeout(timer);
        }
        connection?.dispose();
        if (logDir) {
            fs.rmSync(logDir, { recursive: true, force: true });
        }
    });

    test('completer/info names the model', async (t) => {
        // The server loads the model in a worker after `initialize`; until then its info may lack "model"
        // (the extension asks again, as here).
        type Info = { model?: unknown; model_error?: unknown } | null;
        let info: Info = null as Info;
        const deadline = Date.now() + REQUEST_TIMEOUT_MS;
        while (Date.now() < deadline) {
            info = await withTimeout(conn().sendRequest<Info>(INFO_REQUEST, {}), INFO_REQUEST);
            if ((info && typeof info.model === 'string') || info?.model_error) {
                break;
            }
            await new Promise((resolve) => setTimeout(resolve, 250));
        }
        assert.ok(info && typeof info.model === 'string' && info.model.length > 0, `info: ${JSON.stringify(info)}${diagnostics()}`);
        assert.equal(modelLabel(info), path.basename(info.model as string));
        t.diagnostic(`model: ${info.model}`);
    });

    test('inline completion returns a whole line that starts with the typed text', async (t) => {
        let items: InlineCompletionItem[] = [];
        // The first request may come while the worker is still loading the model; an editor asks again on
        // the next keystroke, so allow a few automatic requests before an explicit one.
        const deadline = Date.now() + REQUEST_TIMEOUT_MS;
        for (let attempt = 0; items.length === 0 && Date.now() < deadline; attempt++) {
            items = await inline(attempt < 5 ? InlineCompletionTriggerKind.Automatic : InlineCompletionTriggerKind.Invoked);
            if (items.length === 0) {
                await new Promise((resolve) => setTimeout(resolve, 1000));
            }
        }
        assert.ok(items.length > 0, `no inline completion for ${JSON.stringify(TYPED)}${diagnostics()}`);
        t.diagnostic(`typed ${JSON.stringify(TYPED)} -> ${items.map((item) => JSON.stringify(item.insertText)).join(', ')}`);
        assert.ok(items.length <= settings.maxSuggestions, `at most maxSuggestions (${settings.maxSuggestions}) items`);
        for (const item of items) {
            assert.equal(typeof item.insertText, 'string', 'plain-text insertText');
            const text = item.insertText as string;
            assert.ok(text.length > 0);
            assertWholeLine(lineAfterEdit(item, text), 'inline item');
            if (item.range && item.range.start.character === 0) {
                assert.ok(text.startsWith(TYPED), `insertText ${JSON.stringify(text)} starts with the typed text`);
            }
        }
    });

    test('completion items carry whole lines', async () => {
        const result = await withTimeout(
            conn().sendRequest(CompletionRequest.type, {
                textDocument: { uri },
                position: { line: TYPED_LINE, character: TYPED.length },
                context: { triggerKind: 1 },
            }),
            'textDocument/completion',
        );
        const items: CompletionItem[] = !result ? [] : Array.isArray(result) ? result : (result as CompletionList).items;
        assert.ok(items.length > 0, `no completion items${diagnostics()}`);
        for (const item of items) {
            const edit = item.textEdit;
            assert.ok(edit && 'range' in edit, 'a TextEdit with a range');
            assertWholeLine(lineAfterEdit(edit, edit.newText), 'completion item');
        }
    });

    test('live settings: maxSuggestions and turning inline completions off and on', async () => {
        // The server applies a didChangeConfiguration asynchronously (a changed engine setting reconfigures
        // its worker), so a request sent right after may still see the old settings: ask until it doesn't.
        async function eventually(what: string, check: (items: InlineCompletionItem[]) => boolean) {
            const deadline = Date.now() + 30_000;
            let items: InlineCompletionItem[] = [];
            while (Date.now() < deadline) {
                items = await inline(InlineCompletionTriggerKind.Invoked);
                if (check(items)) {
                    return items;
                }
                await new Promise((resolve) => setTimeout(resolve, 200));
            }
            assert.fail(`${what}: last answer ${JSON.stringify(items)}${diagnostics()}`);
        }

        settings = { ...settings, maxSuggestions: 1 };
        await conn().sendNotification(DidChangeConfigurationNotification.type, didChangeConfigurationParams(settings));
        await eventually('maxSuggestions 1 gives one item', (items) => items.length === 1);

        // What the extension's toggle sends: suggestions off.
        settings = { ...settings, enabled: false };
        await conn().sendNotification(DidChangeConfigurationNotification.type, didChangeConfigurationParams(settings));
        await eventually('no inline items while turned off', (items) => items.length === 0);

        settings = { ...settings, enabled: true };
        await conn().sendNotification(DidChangeConfigurationNotification.type, didChangeConfigurationParams(settings));
        // Typing goes on: the document changes and suggestions come back.
        version++;
        await conn().sendNotification(DidChangeTextDocumentNotification.type, {
            textDocument: { uri, version },
            contentChanges: [{ text: DOCUMENT_LINES.join('\n') }],
        });
        const back = await eventually('suggestions are back after turning them on', (items) => items.length > 0);
        for (const item of back) {
            assertWholeLine(lineAfterEdit(item, item.insertText as string), 'inline item after the toggle');
        }
        await conn().sendNotification(DidCloseTextDocumentNotification.type, { textDocument: { uri } });
    });

    test('the server is still alive and shuts down cleanly', async () => {
        assert.equal(server?.exitCode, null, `server exited early${diagnostics()}`);
        await withTimeout(conn().sendRequest(ShutdownRequest.type), 'shutdown', 30_000);
        await conn().sendNotification(ExitNotification.type);
        const code = await withTimeout(exited, 'server exit', 30_000);
        assert.equal(code, 0, `exit code${diagnostics()}`);
        connection?.dispose();
        connection = undefined;
    });
});
