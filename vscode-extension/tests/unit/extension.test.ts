// activate() end to end with the mocked vscode module and a fake vscode-languageclient.
import { mock, mockModule } from './mocks/install';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, beforeEach, describe, test } from 'node:test';

const created: FakeLanguageClient[] = [];

class FakeLanguageClient {
    state = 1; // Stopped
    notifications: { method: string; params: any }[] = [];
    private stateListeners: ((e: { oldState: number; newState: number }) => void)[] = [];
    constructor(
        public id: string,
        public name: string,
        public serverOptions: any,
        public clientOptions: any,
    ) {
        created.push(this);
    }
    onDidChangeState(listener: (e: { oldState: number; newState: number }) => void) {
        this.stateListeners.push(listener);
        return { dispose() {} };
    }
    async start() {
        this.state = 2;
        this.stateListeners.forEach((l) => l({ oldState: 1, newState: 2 }));
    }
    async stop() {
        this.state = 1;
    }
    async dispose() {}
    async sendNotification(method: string, params: unknown) {
        this.notifications.push({ method, params });
    }
    async sendRequest(method: string) {
        assert.equal(method, 'completer/info');
        return { model: 'py-small-v1', device: 'cpu', server: { enabled_languages: ['python'] } };
    }
}

mockModule('vscode-languageclient/node', {
    LanguageClient: FakeLanguageClient,
    State: { Stopped: 1, Running: 2, Starting: 3 },
    TransportKind: { stdio: 0 },
    RevealOutputChannelOn: { Never: 4 },
});

// eslint-disable-next-line @typescript-eslint/no-require-imports
const extension = require('../../src/extension') as typeof import('../../src/extension');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'completer-ext-'));
/** A stand-in interpreter whose install check succeeds. */
const goodPython = path.join(tmp, 'python-ok');
fs.writeFileSync(goodPython, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
/** One that lacks the server. */
const badPython = path.join(tmp, 'python-bare');
fs.writeFileSync(badPython, "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'lsp'\" >&2\nexit 1\n", { mode: 0o755 });

function context() {
    return { subscriptions: [] as { dispose(): unknown }[], extensionPath: path.join(tmp, 'vscode-extension') } as any;
}

async function until(condition: () => boolean, what: string): Promise<void> {
    for (let i = 0; i < 200; i++) {
        if (condition()) {
            return;
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.fail(`timed out waiting for ${what}`);
}

/** The Python extension, whose active interpreter is `goodPython`; `subscribe` answers its interpreter-change event,
 * and its activation waits for `activated`. */
function pythonExtension(subscribe: (listener: () => void) => { dispose(): unknown }, activated = Promise.resolve()) {
    mock.extensions.set('ms-python.python', {
        isActive: false,
        exports: {
            environments: {
                getActiveEnvironmentPath: () => ({ id: 'venv', path: '/venv' }),
                resolveEnvironment: async () => ({ executable: { uri: { fsPath: goodPython } } }),
                onDidChangeActiveEnvironmentPath: subscribe,
            },
        },
        async activate() {
            await activated;
            this.isActive = true;
            return this.exports;
        },
    });
}

describe('extension activation (mocked VS Code)', { skip: process.platform === 'win32' }, () => {
    beforeEach(async () => {
        await extension.deactivate();
        mock.reset();
        created.length = 0;
    });
    after(async () => {
        await extension.deactivate();
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    test('the status bar follows the active file and says when its language gets no suggestions', async () => {
        mock.settings.set('completer.pythonPath', goodPython);
        mock.activateEditor('javascript'); // open before the extension starts
        await extension.activate(context());
        await until(() => mock.statusItems[0]?.text === '$(eye-closed) py-small-v1 · javascript', 'javascript unanswered');
        mock.activateEditor('python');
        assert.equal(mock.statusItems[0].text, '$(sparkle) py-small-v1');
        mock.changeLanguageMode('shellscript'); // the user picks another language mode for the file
        assert.equal(mock.statusItems[0].text, '$(eye-closed) py-small-v1 · shellscript');
        mock.activateEditor('Log', 'output'); // an output channel: not a file
        assert.equal(mock.statusItems[0].text, '$(sparkle) py-small-v1');
        mock.activateEditor('markdown', 'untitled');
        assert.equal(mock.statusItems[0].text, '$(eye-closed) py-small-v1 · markdown');
        mock.activateEditor(undefined);
        assert.equal(mock.statusItems[0].text, '$(sparkle) py-small-v1');
    });

    test("the status bar says when VS Code's settings hide every suggestion, and the log says why once", async () => {
        mock.settings.set('completer.pythonPath', goodPython);
        mock.settings.set('editor.inlineSuggest.enabled', false);
        mock.activateEditor('python');
        await extension.activate(context());
        await until(() => mock.statusItems[0]?.text === '$(warning) py-small-v1 · hidden', 'hidden suggestions');
        assert.match(String(mock.statusItems[0].tooltip), /editor\.inlineSuggest\.enabled is off/);
        const warned = () => mock.outputChannels[0].lines.filter((line) => line.includes('cannot show')).length;
        assert.equal(warned(), 1);
        mock.activateEditor('python'); // the same reason again: no second log line
        assert.equal(warned(), 1);
        mock.changeSettings({ 'completer.completionItems': true }); // the suggest widget shows them
        assert.equal(mock.statusItems[0].text, '$(sparkle) py-small-v1');
        mock.changeSettings({ 'completer.completionItems': false, 'editor.inlineSuggest.enabled': true });
        assert.equal(mock.statusItems[0].text, '$(sparkle) py-small-v1');
        // one language's own setting: hidden in its editors only
        mock.changeSettings({ '[python].editor.inlineSuggest.enabled': false });
        assert.equal(mock.statusItems[0].text, '$(warning) py-small-v1 · hidden');
        mock.activateEditor('Log', 'output'); // no file's editor
        assert.equal(mock.statusItems[0].text, '$(sparkle) py-small-v1');
        mock.activateEditor('javascript'); // a language the model does not write says that first
        assert.equal(mock.statusItems[0].text, '$(eye-closed) py-small-v1 · javascript');
        mock.changeSettings({ '[python].editor.inlineSuggest.enabled': undefined });
        mock.activateEditor('python');
        assert.equal(mock.statusItems[0].text, '$(sparkle) py-small-v1');
        mock.changeSettings({ 'completer.inlineCompletions': false }); // and no suggest widget either
        assert.equal(mock.statusItems[0].text, '$(warning) py-small-v1 · hidden');
        assert.match(String(mock.statusItems[0].tooltip),
            /inlineCompletions and completer\.completionItems are both off/);
        mock.changeSettings({ 'completer.enabled': false }); // turned off on purpose: says so, not "hidden"
        await until(() => mock.statusItems[0].text === '$(circle-slash) py-small-v1', 'suggestions off');
    });

    test('registers the commands, starts the server and shows the model', async () => {
        mock.settings.set('completer.pythonPath', goodPython);
        mock.settings.set('completer.beams', 2);
        const ctx = context();
        await extension.activate(ctx);
        assert.deepEqual([...mock.commands.keys()].sort(), ['completer.chooseModel', 'completer.restartServer', 'completer.showLogs', 'completer.toggle']);
        await until(() => mock.statusItems[0]?.text === '$(sparkle) py-small-v1', 'the model in the status bar');
        const client = created[0];
        assert.equal(client.id, 'completer');
        assert.equal(client.serverOptions.command, goodPython);
        assert.deepEqual(client.serverOptions.args, ['-m', 'lsp']);
        // never from the workspace folder, whose own `lsp/` package `python -m lsp` would import
        assert.ok(path.isAbsolute(client.serverOptions.options.cwd));
        assert.ok(!fs.existsSync(path.join(client.serverOptions.options.cwd, 'lsp')));
        assert.equal(client.serverOptions.options.env.PYTHONSAFEPATH, '1');
        // enabledLanguages unset: every document is synced, and the server answers for the model's languages
        assert.deepEqual(client.clientOptions.documentSelector, [
            { scheme: 'file' },
            { scheme: 'untitled' },
            { notebook: '*' },
        ]);
        const init = client.clientOptions.initializationOptions();
        assert.equal(init.completer.beams, 2);
        assert.equal(init.completer.modelPath, null);

        // Latency measured by the middleware shows in the status bar.
        const mw = client.clientOptions.middleware;
        const token = { isCancellationRequested: false };
        await mw.provideInlineCompletionItems({}, {}, {}, token, async () => [{ insertText: 'x' }]);
        assert.match(mock.statusItems[0].text, /^\$\(sparkle\) py-small-v1 · \d+ ms$/);

        // Live settings.
        mock.changeSettings({ 'completer.maxSuggestions': 5 });
        await until(() => client.notifications.length === 1, 'didChangeConfiguration');
        assert.equal(client.notifications[0].method, 'workspace/didChangeConfiguration');
        assert.equal(client.notifications[0].params.settings.completer.maxSuggestions, 5);

        // The toggle command writes completer.enabled, which turns suggestions off everywhere.
        await mock.commands.get('completer.toggle')!();
        assert.equal(mock.settings.get('completer.enabled'), false);
        await until(() => client.notifications.length === 2, 'settings after toggle');
        assert.equal(client.notifications[1].params.settings.completer.inlineCompletions, false);
        assert.equal(mock.statusItems[0].text, '$(circle-slash) py-small-v1');
        assert.equal(await mw.provideInlineCompletionItems({}, {}, {}, token, async () => [{ insertText: 'x' }]), null);

        // Languages change: a new client with the new selector.
        mock.changeSettings({ 'completer.enabledLanguages': ['python', 'javascript'] });
        await until(() => created.length === 2, 'a restarted client');
        assert.equal(created[1].clientOptions.documentSelector.length, 6);

        // Show logs and restart commands.
        await mock.commands.get('completer.showLogs')!();
        assert.equal(mock.outputChannels[0].shown, 1);
        await mock.commands.get('completer.restartServer')!();
        assert.equal(created.length, 3);
        assert.equal(created[1].state, 1);
    });

    test('gives the client a trace channel that follows completer.trace.server', async () => {
        mock.settings.set('completer.pythonPath', goodPython);
        mock.settings.set('completer.trace.server', 'messages');
        await extension.activate(context());
        await until(() => created.length === 1, 'a client');
        const traceChannel = created[0].clientOptions.traceOutputChannel;
        assert.equal(traceChannel.logLevel, 1); // LogLevel.Trace: the client traces
        traceChannel.trace("Received response 'completer/info - (1)' in 3ms.");
        assert.ok(mock.outputChannels[0].lines.includes("[LSP] Received response 'completer/info - (1)' in 3ms."));
        const levels: number[] = [];
        traceChannel.onDidChangeLogLevel((level: number) => levels.push(level));
        mock.changeSettings({ 'completer.trace.server': 'off' });
        assert.deepEqual(levels, [0]);
    });

    test('shows the install command when the interpreter lacks the server', async () => {
        mock.settings.set('completer.pythonPath', badPython);
        await extension.activate(context());
        await until(() => mock.errors.length === 1, 'an error message');
        // the test's extension folder is no checkout: a placeholder
        const install = `${badPython} -m pip install -e /path/to/completer`;
        assert.ok(mock.errors[0].message.includes(install), mock.errors[0].message);
        assert.match(mock.errors[0].message, /No module named 'lsp'/);
        assert.equal(created.length, 0);
        assert.match(mock.statusItems[0].text, /\$\(error\)/);
    });

    test("uses the Python extension's interpreter when completer.pythonPath is unset", async () => {
        const changeListeners: (() => void)[] = [];
        pythonExtension((listener) => {
            changeListeners.push(listener);
            return { dispose() {} };
        });
        await extension.activate(context());
        await until(() => created.length === 1 && changeListeners.length === 1, 'start with the Python extension');
        assert.equal(created[0].serverOptions.command, goodPython);
        changeListeners[0]();
        await until(() => created.length === 2, 'restart on interpreter change');
    });

    test("follows no interpreter change once deactivated while the server was starting", async () => {
        const listening: { disposed: boolean }[] = [];
        let letActivate = () => {};
        const activated = new Promise<void>((resolve) => (letActivate = resolve));
        pythonExtension(() => {
            const subscription = { disposed: false, dispose: () => (subscription.disposed = true) };
            listening.push(subscription);
            return subscription;
        }, activated); // the start waits on the Python extension, as on a slow machine
        const ctx = context();
        await extension.activate(ctx);
        const deactivated = extension.deactivate(); // VS Code deactivates it, then disposes its subscriptions
        ctx.subscriptions.forEach((subscription: { dispose(): unknown }) => subscription.dispose());
        letActivate();
        await deactivated;
        await new Promise((resolve) => setImmediate(resolve)); // what follows the start is promise callbacks only
        assert.deepEqual(listening.filter((subscription) => !subscription.disposed), []);
    });
});
