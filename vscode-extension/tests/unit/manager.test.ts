import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
    ACTIONS,
    ClientHooks,
    ClientLike,
    ManagerDeps,
    conversionOf,
    languagesOf,
    modelLabel,
    remoteOf,
    REMOTE_INFO_INTERVAL_MS,
    ServerManager,
} from '../../src/common/manager';
import type { InstallCheck, Interpreter } from '../../src/common/python';
import { DEFAULT_SETTINGS, ExtensionSettings } from '../../src/common/settings';

class FakeClient implements ClientLike {
    started = false;
    stopped = false;
    notifications: { method: string; params: any }[] = [];
    /** Answers to completer/info before `info` (e.g. while the model loads). */
    infoSequence: unknown[] = [];
    requests: { method: string; params: unknown }[] = [];
    /** The answer to completer/fileInfo. */
    fileInfo: (params: unknown) => unknown = () => ({ excluded: null });
    constructor(
        public hooks: ClientHooks,
        private failStart = false,
        public info: unknown = { model: '/models/py-small-v1' },
    ) {}
    async start() {
        if (this.failStart) {
            throw new Error('server exited with code 1');
        }
        this.started = true;
    }
    async stop() {
        this.stopped = true;
    }
    async sendNotification(method: string, params: unknown) {
        this.notifications.push({ method, params });
    }
    async sendRequest<R>(method: string, params?: unknown): Promise<R> {
        this.requests.push({ method, params });
        if (method === 'completer/fileInfo') {
            return this.fileInfo(params) as R;
        }
        return (this.infoSequence.length ? this.infoSequence.shift() : this.info) as R;
    }
}

interface SetupOptions {
    check?: InstallCheck;
    failStart?: boolean;
    settings?: Partial<ExtensionSettings>;
    choice?: string;
    /** completer/info answers of every client before its final one. */
    loading?: unknown[];
    /** The final completer/info answer (default: a local model). */
    info?: unknown;
    conversionInfoIntervalMs?: number;
    infoWaitMs?: number;
    /** The active editor's document, when the test has one. */
    active?: { uri: string | undefined };
}

function setup(options: SetupOptions = {}) {
    let settings: ExtensionSettings = { ...DEFAULT_SETTINGS, ...options.settings };
    const clients: FakeClient[] = [];
    const status = {
        enabled: true,
        state: 'stopped',
        problem: undefined as string | undefined,
        model: undefined as string | undefined,
        latency: undefined as number | undefined,
        endpoint: undefined as string | undefined,
        languages: undefined as readonly string[] | undefined,
        languagesShown: [] as (readonly string[] | undefined)[],
        setLanguages(languages: readonly string[] | undefined) {
            this.languages = languages;
            this.languagesShown.push(languages);
        },
        setEnabled(v: boolean) {
            this.enabled = v;
        },
        setState(s: string, p?: string) {
            this.state = s;
            this.problem = p;
        },
        setModel(m: string | undefined) {
            this.model = m;
        },
        setLatency(ms: number) {
            this.latency = ms;
        },
        setRemote(endpoint: string | undefined) {
            this.endpoint = endpoint;
        },
        excluded: undefined as string | undefined,
        setExcluded(pattern: string | undefined) {
            this.excluded = pattern;
        },
    };
    const errors: { message: string; actions: string[] }[] = [];
    const logs: string[] = [];
    const calls = { clipboard: '', showLogs: 0, openSettings: 0, writes: [] as boolean[] };
    const deps: ManagerDeps = {
        readSettings: () => settings,
        resolveInterpreter: async (s): Promise<Interpreter> =>
            s.pythonPath ? { command: s.pythonPath, source: 'setting' } : { command: 'python3', source: 'default' },
        checkInstalled: async () => options.check ?? { ok: true },
        createClient: (hooks) => {
            const client = new FakeClient(hooks, options.failStart);
            client.infoSequence = [...(options.loading ?? [])];
            if (options.info !== undefined) {
                client.info = options.info;
            }
            clients.push(client);
            return client;
        },
        status,
        log: { info: (m) => logs.push(m), warn: (m) => logs.push(m), error: (m) => logs.push(m) },
        showError: async (message, ...actions) => {
            errors.push({ message, actions });
            return options.choice;
        },
        writeEnabled: async (enabled) => {
            calls.writes.push(enabled);
            settings = { ...settings, enabled }; // VS Code's configuration reads the new value once update resolves
        },
        copyToClipboard: async (text) => {
            calls.clipboard = text;
        },
        showLogs: () => calls.showLogs++,
        openSettings: () => calls.openSettings++,
        repoDir: '/src/completer',
        platform: 'linux',
        infoRetryDelaysMs: [1, 1, 1],
        conversionInfoIntervalMs: options.conversionInfoIntervalMs,
        infoWaitMs: options.infoWaitMs,
        activeFileUri: options.active ? () => options.active?.uri : undefined,
    };
    const manager = new ServerManager(deps);
    return {
        manager,
        clients,
        status,
        errors,
        logs,
        calls,
        change(values: Partial<ExtensionSettings>) {
            settings = { ...settings, ...values };
            return manager.onConfigurationChanged();
        },
    };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** completer/info while acme/tiny converts, and once its converted model answers in every language. */
const acmeConverting = {
    model: 'python-small',
    model_conversion: { source: 'acme/tiny', state: 'converting' },
    server: { enabled_languages: ['python'] },
};
const acmeDone = { model: 'acme-tiny-0123', server: { enabled_languages: ['*'] } };

async function until(condition: () => boolean, what: string): Promise<void> {
    for (let i = 0; i < 200 && !condition(); i++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.ok(condition(), `timed out waiting for ${what}`);
}

describe('server manager', () => {
    test('starts the client and shows the model', async () => {
        const { manager, clients, status } = setup();
        await manager.start();
        assert.equal(clients.length, 1);
        assert.equal(clients[0].started, true);
        assert.equal(clients[0].hooks.python, 'python3');
        assert.equal(status.state, 'running');
        assert.equal(status.model, 'py-small-v1');
        assert.deepEqual(clients[0].requests, [{ method: 'completer/info', params: {} }]);
        clients[0].hooks.onLatency(25);
        assert.equal(status.latency, 25);
        assert.equal(manager.isRunning, true);
    });

    test('does not start and shows the install command when the server is missing', async () => {
        const { manager, clients, status, errors, calls } = setup({
            check: { ok: false, reason: 'not-installed', detail: "No module named 'lsp'" },
            settings: { pythonPath: '/venv/bin/python' },
            choice: ACTIONS.copyInstall,
        });
        await manager.start();
        await tick();
        assert.equal(clients.length, 0);
        assert.equal(status.state, 'error');
        assert.equal(errors.length, 1);
        assert.match(errors[0].message, /not installed for \/venv\/bin\/python/);
        assert.ok(errors[0].message.includes('/venv/bin/python -m pip install -e /src/completer'));
        assert.ok(errors[0].actions.includes(ACTIONS.copyInstall));
        assert.equal(calls.clipboard, '/venv/bin/python -m pip install -e /src/completer');
    });

    test("a system Python pip refuses gets the venv to make and the pythonPath to set, not pip's refusal", async () => {
        // Debian 12 / Ubuntu 24.04: the quick start installed into the checkout's .venv, and python3 is the system's
        const { manager, clients, status, errors, calls } = setup({
            check: { ok: false, reason: 'externally-managed', detail: "No module named 'lsp'" },
            choice: ACTIONS.copyInstall,
        });
        await manager.start();
        await tick();
        assert.equal(clients.length, 0);
        assert.equal(status.state, 'error');
        assert.equal(errors.length, 1);
        const venv = 'python3 -m venv /src/completer/.venv && /src/completer/.venv/bin/python -m pip install -e ' +
            '/src/completer';
        assert.match(errors[0].message, /not installed for python3 \(No module named 'lsp'\), and pip does not/);
        assert.ok(errors[0].message.includes(venv), errors[0].message);
        assert.ok(errors[0].message.includes('"completer.pythonPath" to /src/completer/.venv/bin/python'));
        assert.ok(!errors[0].message.includes('python3 -m pip install'), errors[0].message);
        assert.deepEqual(errors[0].actions, [ACTIONS.copyInstall, ACTIONS.openSettings, ACTIONS.showLogs]);
        assert.equal(calls.clipboard, venv);
    });

    test('a check that crashed or hung says so and how to see why, with no install command', async () => {
        const { manager, clients, errors, status, calls } = setup({
            check: { ok: false, reason: 'check-failed', detail: 'was ended by SIGILL' },
            settings: { pythonPath: '/venv/bin/python' },
            choice: ACTIONS.showLogs,
        });
        await manager.start();
        await tick();
        assert.equal(clients.length, 0);
        assert.equal(status.state, 'error');
        assert.match(errors[0].message, /importing the language server in \/venv\/bin\/python was ended by SIGILL/);
        assert.ok(errors[0].message.includes('/venv/bin/python -c "import lsp.server'), errors[0].message);
        assert.ok(!errors[0].actions.includes(ACTIONS.copyInstall));
        assert.doesNotMatch(errors[0].message, /not installed|pip install/);
        assert.equal(calls.showLogs, 1);
    });

    test('names the interpreter when it cannot be run', async () => {
        const { manager, errors, status, calls } = setup({
            check: { ok: false, reason: 'interpreter-missing', detail: 'ENOENT' },
            settings: { pythonPath: '/nope/python' },
            choice: ACTIONS.openSettings,
        });
        await manager.start();
        await tick();
        assert.equal(status.state, 'error');
        assert.match(errors[0].message, /cannot run the Python interpreter "\/nope\/python" \(ENOENT\)/);
        assert.match(errors[0].message, /completer\.pythonPath/);
        assert.equal(calls.openSettings, 1);
    });

    test('names a Python too old for the server instead of an install command that cannot work there', async () => {
        const { manager, clients, errors, status, calls } = setup({
            check: { ok: false, reason: 'python-too-old', detail: '3.10.12' },
            settings: { pythonPath: '/usr/bin/python3' },
            choice: ACTIONS.openSettings,
        });
        await manager.start();
        await tick();
        assert.equal(clients.length, 0);
        assert.equal(status.state, 'error');
        assert.equal(errors.length, 1);
        assert.match(errors[0].message,
            /"\/usr\/bin\/python3" is Python 3\.10\.12, and the language server needs Python 3\.11 or later/);
        assert.match(errors[0].message, /completer\.pythonPath/);
        assert.ok(!errors[0].message.includes('pip install'));
        assert.ok(!errors[0].actions.includes(ACTIONS.copyInstall));
        assert.equal(calls.openSettings, 1);
    });

    test('reports a server that fails to start', async () => {
        const { manager, errors, status, clients } = setup({ failStart: true, choice: ACTIONS.showLogs });
        await manager.start();
        await tick();
        assert.equal(status.state, 'error');
        assert.match(errors[0].message, /failed to start: server exited with code 1/);
        assert.equal(clients[0].stopped, true);
        assert.equal(manager.isRunning, false);
    });

    test('an unexpected failure while starting is shown, not thrown', async () => {
        const { manager, errors, status } = setup();
        (manager as any).deps.createClient = () => {
            throw new Error('vscode API missing');
        };
        await manager.start();
        await tick();
        assert.equal(status.state, 'error');
        assert.match(errors[0].message, /failed to start: vscode API missing/);
        assert.equal(manager.isRunning, false);
    });

    test('pushes changed settings with workspace/didChangeConfiguration', async () => {
        const { manager, clients, change } = setup();
        await manager.start();
        await change({ beams: 8, maxTokens: 40 });
        assert.equal(clients.length, 1);
        assert.equal(clients[0].notifications.length, 1);
        const { method, params } = clients[0].notifications[0];
        assert.equal(method, 'workspace/didChangeConfiguration');
        assert.equal(params.settings.completer.beams, 8);
        assert.equal(params.settings.completer.maxTokens, 40);
        assert.ok(!('pythonPath' in params.settings.completer));
        // Nothing the server sees changed: no notification.
        await change({});
        assert.equal(clients[0].notifications.length, 1);
    });

    test('a key pasted into apiKeyEnv, or credentials in the endpoint, reach the server, not the log', async () => {
        const { manager, clients, change, logs } = setup();
        await manager.start();
        const key = 'SKPROJ4F9A8B7C6D5E4F3A2B1C0D9E8F';
        const endpoint = 'https://bob:hunter2@gpu.example.com/v1';
        await change({ backend: 'openai', endpoint, apiKeyEnv: key });
        const sent = clients[0].notifications[0].params.settings.completer;
        assert.equal(sent.apiKeyEnv, key, 'the server says what is wrong with it');
        const logged = logs.filter((line) => line.startsWith('Sending settings'));
        assert.equal(logged.length, 1);
        for (const secret of [key, 'hunter2', 'bob']) {
            assert.ok(!logged[0].includes(secret), `${secret} in ${logged[0]}`);
        }
        assert.match(logged[0], /"https:\/\/gpu\.example\.com\/v1 \(its credentials hidden\)"/);
        await change({ apiKeyEnv: 'TEAM_COMPLETIONS_KEY', endpoint: 'https://gpu.example.com/v1' });
        const last = logs.filter((line) => line.startsWith('Sending settings')).pop();
        assert.match(String(last), /"endpoint":"https:\/\/gpu\.example\.com\/v1","model":"","apiKeyEnv":"TEAM_/);
    });

    test('refreshes the model name when modelPath changes', async () => {
        const { manager, clients, change, status } = setup();
        await manager.start();
        clients[0].info = { model: 'other-model' };
        await change({ modelPath: '/models/other-model' });
        assert.equal(clients[0].notifications[0].params.settings.completer.modelPath, '/models/other-model');
        assert.equal(status.model, 'other-model');
    });

    test('switching to a remote backend shows its endpoint at once, and switching back forgets it', async () => {
        const { manager, clients, change, status } = setup();
        await manager.start();
        assert.equal(status.endpoint, undefined);
        const remote = { model: 'qwen2.5-coder-1.5b', remote: { endpoint: 'https://gpu.example.com/v1', state: 'ready' } };
        clients[0].info = remote;
        await change({ backend: 'openai', endpoint: 'https://gpu.example.com/v1', model: 'qwen2.5-coder-1.5b' });
        assert.equal(status.endpoint, 'https://gpu.example.com/v1', 'the cloud shows before any suggestion is asked');
        assert.equal(status.model, 'qwen2.5-coder-1.5b');
        clients[0].info = { model: '/models/py-small-v1' };
        await change({ backend: 'local' });
        assert.equal(status.endpoint, undefined);
        assert.equal(status.model, 'py-small-v1');
    });

    test('restarts when pythonPath or the languages change', async () => {
        const { manager, clients, change } = setup();
        await manager.start();
        await change({ pythonPath: '/venv/bin/python' });
        assert.equal(clients.length, 2);
        assert.equal(clients[0].stopped, true);
        assert.equal(clients[1].hooks.python, '/venv/bin/python');
        assert.equal(clients[1].started, true);
        await change({ enabledLanguages: ['python', 'javascript'] });
        assert.equal(clients.length, 3);
        assert.deepEqual(clients[2].hooks.getSettings().enabledLanguages, ['python', 'javascript']);
        assert.equal(clients[1].notifications.length, 0);
    });

    test('toggle writes completer.enabled; the change turns both kinds off on the server', async () => {
        const { manager, clients, calls, change, status } = setup();
        await manager.start();
        await manager.toggle();
        assert.deepEqual(calls.writes, [false]);
        await change({ enabled: false });
        assert.equal(status.enabled, false);
        const sent = clients[0].notifications[0].params.settings.completer;
        assert.equal(sent.inlineCompletions, false);
        assert.equal(sent.completionItems, false);
        await manager.toggle();
        assert.deepEqual(calls.writes, [false, true]);
    });

    test('two quick toggles while a restart holds the queue turn suggestions off and back on', async () => {
        const { manager, calls, status } = setup();
        await manager.start();
        const restarting = manager.restart(); // the configuration events wait behind it
        await Promise.all([manager.toggle(), manager.toggle()]);
        assert.deepEqual(calls.writes, [false, true]);
        await restarting;
        await manager.onConfigurationChanged();
        assert.equal(status.enabled, true);
    });

    test('restart command and interpreter changes', async () => {
        const { manager, clients } = setup();
        await manager.start();
        await manager.restart();
        assert.equal(clients.length, 2);
        await manager.onInterpreterChanged();
        assert.equal(clients.length, 3);
        const pinned = setup({ settings: { pythonPath: '/p' } });
        await pinned.manager.start();
        await pinned.manager.onInterpreterChanged();
        assert.equal(pinned.clients.length, 1);
    });

    test('restarts asked for while one waits are that one; one asked for once it began is its own', async () => {
        const { manager, clients } = setup({ settings: { pythonPath: null } });
        const starting = manager.start();
        const asked = [manager.restart(), manager.onInterpreterChanged(), manager.onInterpreterChanged()];
        asked.push(manager.restart());
        await Promise.all([starting, ...asked]);
        assert.equal(clients.length, 2, 'the first server, and one restart');
        let again: Promise<void> | undefined;
        const first = manager.restart();
        clients[1].stop = async () => {
            again = manager.restart(); // asked while the restart stops the old server
            clients[1].stopped = true;
        };
        await first;
        await again;
        assert.equal(clients.length, 4);
        assert.equal(clients.filter((client) => !client.stopped).length, 1);
    });

    test('a server that answers nothing holds back no restart, settings change or deactivation', async () => {
        const never = new Promise<never>(() => undefined);
        const { manager, clients, change, status } = setup({ infoWaitMs: 20 });
        const original = FakeClient.prototype.sendRequest;
        FakeClient.prototype.sendRequest = function () {
            return never; // hung, or its connection broke without closing: no answer, no error
        };
        try {
            await manager.start();
            assert.equal(status.state, 'running');
            await change({ modelPath: '/models/other', beams: 2 });
            assert.equal(clients[0].notifications.length, 1);
            await manager.restart();
            assert.equal(clients.length, 2);
            assert.equal(clients[0].stopped, true);
            await manager.dispose();
            assert.equal(clients[1].stopped, true);
        } finally {
            FakeClient.prototype.sendRequest = original;
        }
    });

    test('client state changes after start reach the status bar', async () => {
        const { manager, clients, status } = setup();
        await manager.start();
        clients[0].hooks.onStateChange('stopped');
        assert.equal(status.state, 'error');
        clients[0].hooks.onStateChange('running');
        assert.equal(status.state, 'running');
        await manager.dispose();
        assert.equal(clients[0].stopped, true);
        await manager.start();
        assert.equal(clients.length, 1, 'no start after dispose');
    });

    test('a server stopped for good says why once, and Restart Server starts a new one', async () => {
        const { manager, clients, status, errors, logs } = setup({ choice: ACTIONS.restart });
        await manager.start();
        clients[0].hooks.onStateChange('failed', "the server stopped and did not start again: ImportError: boom");
        assert.equal(status.state, 'error');
        assert.equal(status.problem, 'the server stopped and did not start again: ImportError: boom');
        assert.deepEqual(errors, [{
            message: 'Completer: the server stopped and did not start again: ImportError: boom.',
            actions: [ACTIONS.showLogs, ACTIONS.restart],
        }]);
        assert.ok(logs.some((line) => line.includes('ImportError: boom')));
        await until(() => clients.length === 2 && status.state === 'running', 'the restart the message offered');
        assert.equal(clients[0].stopped, true);
    });

    test('concurrent operations are serialised', async () => {
        const { manager, clients } = setup();
        await Promise.all([manager.start(), manager.start(), manager.restart()]);
        assert.equal(clients.length, 2);
        assert.equal(clients.filter((c) => !c.stopped).length, 1);
    });

    test('asks completer/info again while the server is still loading its model', async () => {
        const loading = { model_runs: 0, model_error: null };
        const { manager, clients, status } = setup({ loading: [loading, loading] });
        await manager.start();
        assert.equal(status.model, undefined);
        await new Promise((resolve) => setTimeout(resolve, 50));
        assert.equal(status.model, 'py-small-v1');
        assert.equal(clients[0].requests.length, 3);
    });

    test('gives up after the retries and asks again after an answered completion', async () => {
        const loading = { model_error: null };
        const { manager, clients, status } = setup({ loading: [loading, loading, loading, loading, loading] });
        await manager.start();
        await new Promise((resolve) => setTimeout(resolve, 50));
        assert.equal(clients[0].requests.length, 4, 'first try plus three retries');
        assert.equal(status.model, undefined);
        clients[0].hooks.onLatency(30);
        await tick();
        assert.equal(clients[0].requests.length, 5);
        clients[0].hooks.onLatency(30);
        await tick();
        assert.equal(status.model, 'py-small-v1');
        clients[0].hooks.onLatency(30);
        await tick();
        assert.equal(clients[0].requests.length, 6, 'no more info requests once the model is known');
    });

    test('a model being converted is shown beside the one answering, and asked after until it takes over', async () => {
        const converting = { model: 'python-small', model_conversion: { source: 'ollama:qwen2.5-coder:1.5b', state: 'converting' } };
        const { manager, clients, status } = setup({ loading: [converting], info: { model: 'ollama-qwen2.5-coder-1.5b-0123' } });
        await manager.start();
        assert.equal(status.model, 'python-small, converting ollama:qwen2.5-coder:1.5b');
        clients[0].hooks.onLatency(30);
        await tick();
        assert.equal(status.model, 'ollama-qwen2.5-coder-1.5b-0123');
        const asked = clients[0].requests.length;
        clients[0].hooks.onLatency(30);
        await tick();
        assert.equal(clients[0].requests.length, asked, 'no more info requests once the conversion is over');
    });

    test('the status bar says when completer.excludeFiles leaves the active file alone', async () => {
        const active = { uri: 'file:///ws/.env' as string | undefined };
        const { manager, clients, status, change } = setup({ active });
        await manager.refreshActiveFile(); // no server yet: nothing to ask
        assert.equal(status.excluded, undefined);
        await manager.start();
        const envOnly = (params: unknown) => ((params as { uri: string }).uri.endsWith('.env') ? '.env' : null);
        clients[0].fileInfo = (params) => ({ excluded: envOnly(params) });
        await manager.refreshActiveFile();
        assert.equal(status.excluded, '.env');
        const asked = { method: 'completer/fileInfo', params: { uri: 'file:///ws/.env' } };
        assert.deepEqual(clients[0].requests.at(-1), asked);
        active.uri = 'file:///ws/app.py';
        await manager.refreshActiveFile();
        assert.equal(status.excluded, undefined);
        clients[0].fileInfo = () => ({ excluded: '*.py' });
        await change({ excludeFiles: ['*.py'] }); // the settings change asks again, after sending them
        assert.equal(status.excluded, '*.py');
        clients[0].fileInfo = () => {
            active.uri = 'file:///ws/notes.md'; // another editor became active while the server answered
            return { excluded: 'stale' };
        };
        await manager.refreshActiveFile();
        assert.equal(status.excluded, '*.py', "the other file's own answer decides, not this stale one");
        clients[0].fileInfo = () => {
            throw new Error('the server went away');
        };
        await manager.refreshActiveFile();
        assert.equal(status.excluded, undefined, "a failed answer keeps no other file's word");
        active.uri = undefined; // the output panel
        await manager.refreshActiveFile();
        assert.equal(status.excluded, undefined);
    });

    test('the languages the server answers in reach the status bar, and are forgotten while it restarts', async () => {
        const info = { model: 'python-small', server: { enabled_languages: ['python'] } };
        const { manager, status } = setup({ loading: [{ model: null, server: { enabled_languages: null } }], info });
        await manager.start();
        await until(() => status.model === 'python-small', 'the model');
        assert.deepEqual(status.languages, ['python']);
        await manager.restart();
        await until(() => status.languagesShown.length === 6, 'the restarted server\'s languages');
        // each start: none while it starts, none while its model loads, then the model's
        assert.deepEqual(status.languagesShown, [undefined, undefined, ['python'], undefined, undefined, ['python']]);
    });

    test('while a model converts, the server is asked again without waiting for a suggestion', async () => {
        // A file in a language the old model does not write asks for no suggestion, so none would bring the news.
        const { manager, clients, status } = setup({ loading: [acmeConverting, acmeConverting], info: acmeDone, conversionInfoIntervalMs: 5 });
        await manager.start();
        assert.deepEqual(status.languages, ['python']);
        await until(() => status.model === 'acme-tiny-0123', 'the converted model, with no completion answered');
        assert.deepEqual(status.languages, ['*']);
        const asked = clients[0].requests.length;
        assert.equal(asked, 3, 'one poll at a time');
        await new Promise((resolve) => setTimeout(resolve, 30));
        assert.equal(clients[0].requests.length, asked, 'no more polls once the conversion is over');
    });

    test('a failed conversion is not shown as converting, and is not asked after', async () => {
        const failed = {
            model: 'python-small',
            model_conversion: { source: 'ollama:nothere:1b', state: 'failed', error: 'Ollama has no model nothere:1b' },
        };
        const { manager, clients, status } = setup({ info: failed, conversionInfoIntervalMs: 2 });
        await manager.start();
        assert.equal(status.model, 'python-small');
        await new Promise((resolve) => setTimeout(resolve, 30));
        assert.equal(clients[0].requests.length, 1, 'no poll for a conversion that is over');
    });

    test('a restart while a model converts keeps the new server asked after', async () => {
        const { manager, clients, status } = setup({ info: acmeConverting, conversionInfoIntervalMs: 20 });
        await manager.start();
        await manager.restart(); // before the first client's poll is due
        clients[1].info = acmeDone;
        await until(() => status.model === 'acme-tiny-0123', "the new server's converted model, with no completion");
        assert.deepEqual(status.languages, ['*']);
    });

    test('languagesOf', () => {
        assert.deepEqual(languagesOf({ server: { enabled_languages: ['python'] } }), ['python']);
        assert.equal(languagesOf({ server: { enabled_languages: null } }), undefined);
        assert.equal(languagesOf({ server: { enabled_languages: ['python', 3] } }), undefined);
        assert.equal(languagesOf({ model: 'x' }), undefined);
        assert.equal(languagesOf(null), undefined);
    });

    test('conversionOf', () => {
        assert.equal(conversionOf({ model_conversion: { source: 'acme/tiny', state: 'converting' } }), 'acme/tiny');
        assert.equal(conversionOf({ model_conversion: null }), undefined);
        assert.equal(conversionOf({ model_conversion: { source: 'ollama:x', state: 'failed', error: 'no x' } }), undefined);
        assert.equal(conversionOf({ model: 'python-small' }), undefined);
        assert.equal(conversionOf(null), undefined);
    });

    test('shows why the server has no model', async () => {
        const { manager, status, logs } = setup({ loading: [{ model_error: 'model.onnx: sha256 mismatch' }] });
        await manager.start();
        assert.equal(status.state, 'error');
        assert.match(String(status.problem), /sha256 mismatch/);
        assert.ok(logs.some((line) => line.includes('sha256 mismatch')));
    });

    test('a remote backend shows its endpoint, and its failures as an error until it answers again', async (t) => {
        const remote = (state: string, lastError: string | null = null) => ({
            model: 'qwen2.5-coder-1.5b',
            backend: 'openai',
            remote: { endpoint: 'https://gpu.example.com/v1', state, last_error: lastError },
        });
        // Date.now alone, by hand: mock.timers' { apis: ['Date'] } needs Node 20.11, and Debian 12's is 18
        let now = 1_000_000;
        t.mock.method(Date, 'now', () => now);
        const { manager, clients, status } = setup({ info: remote('ready') });
        await manager.start();
        assert.equal(status.endpoint, 'https://gpu.example.com/v1');
        assert.equal(status.model, 'qwen2.5-coder-1.5b');
        assert.equal(status.state, 'running');
        clients[0].info = remote('error', 'cannot connect to https://gpu.example.com/v1/completions');
        clients[0].hooks.onLatency(12);
        await tick();
        assert.equal(status.state, 'running', 'asked again only every few seconds');
        now += REMOTE_INFO_INTERVAL_MS + 1;
        clients[0].hooks.onLatency(12);
        await tick();
        assert.equal(status.state, 'error');
        assert.match(String(status.problem), /cannot connect/);
        clients[0].info = remote('ready');
        now += REMOTE_INFO_INTERVAL_MS + 1;
        clients[0].hooks.onLatency(12);
        await tick();
        assert.equal(status.state, 'running');
    });

    test('backend "openai" without a usable endpoint is an error, not a model that answers', async () => {
        const why = 'backend "openai" needs completer.endpoint, the API\'s base URL';
        const { manager, clients, change, status } = setup();
        await manager.start();
        clients[0].info = { // what the server answers then: a label, no endpoint, and why
            model: "(the endpoint's default model)",
            backend: 'openai',
            remote: { endpoint: null, state: 'error', last_error: why },
            model_error: why,
        };
        await change({ backend: 'openai', endpoint: 'http://gpu.example.com/v1' }); // plain http: the server refuses it
        assert.equal(status.state, 'error');
        assert.equal(status.problem, why);
        assert.equal(status.endpoint, undefined, 'nothing is sent anywhere');
        clients[0].info = {
            model: 'qwen2.5-coder',
            remote: { endpoint: 'https://gpu.example.com/v1', state: 'ready' },
        };
        await change({ endpoint: 'https://gpu.example.com/v1' });
        assert.equal(status.state, 'running');
        assert.equal(status.endpoint, 'https://gpu.example.com/v1');
    });

    test('remoteOf', () => {
        assert.deepEqual(remoteOf({ remote: { endpoint: 'http://127.0.0.1:8080/v1', state: 'ready' } }), {
            endpoint: 'http://127.0.0.1:8080/v1',
            state: 'ready',
            lastError: undefined,
        });
        assert.equal(remoteOf({ model: 'python-small' }), undefined);
        assert.equal(remoteOf({ remote: { endpoint: '' } }), undefined);
        assert.equal(remoteOf(null), undefined);
    });

    test('modelLabel', () => {
        assert.equal(modelLabel({ model: '/home/u/models/py-small/' }), 'py-small');
        assert.equal(modelLabel({ model: 'C:\\models\\tiny' }), 'tiny');
        assert.equal(modelLabel({ model: 'builtin' }), 'builtin');
        assert.equal(modelLabel({ model: '' }), undefined);
        assert.equal(modelLabel(null), undefined);
        assert.equal(modelLabel({}), undefined);
    });
});
