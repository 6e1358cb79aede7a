// Lifecycle of the language server: resolve the interpreter, check the server is installed, start the
// client, push settings changes, restart when the interpreter or languages change, keep the status bar
// current. Everything VS Code-specific is passed in, so this logic is unit-tested with fakes.

import { FILE_INFO_REQUEST, INFO_REQUEST } from './constants';
import type { InstallCheck, Interpreter } from './python';
import { installCommand, MIN_PYTHON, SERVER_MODULES, venvInstall } from './python';
import {
    didChangeConfigurationParams,
    ExtensionSettings,
    needsRestart,
    serverSettingsChanged,
    settingsForLog,
} from './settings';
import type { ServerState } from './status';

/** What the manager needs from a language client (see server.ts for the real one). */
export interface ClientLike {
    start(): Promise<void>;
    stop(): Promise<void>;
    sendNotification(method: string, params: unknown): Promise<void>;
    sendRequest<R>(method: string, params?: unknown): Promise<R>;
}

export interface ClientHooks {
    python: string;
    getSettings(): ExtensionSettings;
    onLatency(ms: number): void;
    /** The client reports it (re)started or stopped on its own, e.g. after a server crash; `failed`: stopped for
     *  good (it stopped too often, or a restart failed), with `reason`, the one message the user gets about it. */
    onStateChange(state: 'running' | 'stopped' | 'failed', reason?: string): void;
}

export interface StatusLike {
    setEnabled(enabled: boolean): void;
    setState(state: ServerState, problem?: string): void;
    setModel(model: string | undefined): void;
    setRemote(endpoint: string | undefined): void;
    setLanguages(languages: readonly string[] | undefined): void;
    setExcluded(pattern: string | undefined): void;
    setLatency(ms: number): void;
}

export interface Logger {
    info(message: string): void;
    warn(message: string): void;
    error(message: string): void;
}

export interface ManagerDeps {
    readSettings(): ExtensionSettings;
    resolveInterpreter(settings: ExtensionSettings): Promise<Interpreter>;
    checkInstalled(python: string): Promise<InstallCheck>;
    createClient(hooks: ClientHooks): ClientLike;
    status: StatusLike;
    log: Logger;
    showError(message: string, ...actions: string[]): Thenable<string | undefined>;
    /** Persist `completer.enabled`; the resulting configuration change reaches onConfigurationChanged. */
    writeEnabled(enabled: boolean): Promise<void>;
    copyToClipboard(text: string): Thenable<void>;
    showLogs(): void;
    openSettings(): void;
    /** The active editor's document URI, for the status bar's word on completer.excludeFiles. */
    activeFileUri?(): string | undefined;
    /** The completer repository, when the extension runs from a checkout (for the install command). */
    repoDir?: string;
    platform?: NodeJS.Platform;
    /** Waits before asking completer/info again while the server is still loading its model. */
    infoRetryDelaysMs?: readonly number[];
    /** The wait before asking completer/info again while the server converts a model. */
    conversionInfoIntervalMs?: number;
    /** How long an operation of the queue waits for the server's answer to completer/info or completer/fileInfo. */
    infoWaitMs?: number;
}

export const ACTIONS = {
    copyInstall: 'Copy Install Command',
    openSettings: 'Open Settings',
    showLogs: 'Show Logs',
    restart: 'Restart Server',
} as const;

/** The name shown in the status bar: the last path component of the info's model. */
export function modelLabel(info: unknown): string | undefined {
    if (!info || typeof info !== 'object') {
        return undefined;
    }
    const model = (info as { model?: unknown }).model;
    if (typeof model !== 'string' || model.trim() === '') {
        return undefined;
    }
    const parts = model.trim().split(/[\\/]+/).filter((part) => part !== '');
    return parts.length ? parts[parts.length - 1] : model.trim();
}

/** The model modelPath names while the server converts it (lsp/model_sources.py): its source, else undefined
 *  (also when its conversion failed: the server said why, and the model it had answers). */
export function conversionOf(info: unknown): string | undefined {
    const conversion = (info as { model_conversion?: unknown } | null)?.model_conversion;
    if (!conversion || typeof conversion !== 'object') {
        return undefined;
    }
    const { source, state } = conversion as { source?: unknown; state?: unknown };
    return typeof source === 'string' && source !== '' && state === 'converting' ? source : undefined;
}

/** The language ids the server answers in (`server.enabled_languages`: enabledLanguages, or the model's), or
 *  undefined while the server does not know them (its model is loading). */
export function languagesOf(info: unknown): string[] | undefined {
    const server = (info as { server?: unknown } | null)?.server;
    const languages = server && typeof server === 'object' ? (server as { enabled_languages?: unknown }).enabled_languages : undefined;
    if (!Array.isArray(languages) || !languages.every((language) => typeof language === 'string')) {
        return undefined;
    }
    return languages as string[];
}

/** The endpoint and its state when the lines come from an OpenAI-compatible server (backend "openai"). */
export function remoteOf(info: unknown): { endpoint: string; state: string; lastError: string | undefined } | undefined {
    const remote = (info as { remote?: unknown } | null)?.remote;
    if (!remote || typeof remote !== 'object') {
        return undefined;
    }
    const { endpoint, state, last_error: lastError } = remote as Record<string, unknown>;
    if (typeof endpoint !== 'string' || endpoint === '') {
        return undefined;
    }
    return {
        endpoint,
        state: typeof state === 'string' ? state : 'ready',
        lastError: typeof lastError === 'string' ? lastError : undefined,
    };
}

/** How often the status bar asks a remote backend's state again while suggestions are being answered. */
export const REMOTE_INFO_INTERVAL_MS = 2000;
/** How often it asks again while the server converts a model: the new one may write other languages, and a file
 *  in one the old model does not write asks for no suggestion that would bring the news. */
export const CONVERSION_INFO_INTERVAL_MS = 3000;
/** How long a start or a settings change waits for the server's answer to completer/info before it lets the next
 *  operation (a restart, another change) go. */
export const INFO_WAIT_MS = 5000;

export class ServerManager {
    private client: ClientLike | undefined;
    private settings: ExtensionSettings;
    private queue: Promise<unknown> = Promise.resolve();
    private toggling: Promise<unknown> = Promise.resolve();
    private restartWaiting: Promise<void> | undefined;
    private interpreter: Interpreter | undefined;
    private disposed = false;
    private modelKnown = false;
    private infoPending = false;
    private remote = false;
    private lastInfoAt = 0;
    private readonly infoRetryDelays: readonly number[];
    private readonly conversionInfoInterval: number;
    private readonly infoWait: number;
    private conversionPoll: ReturnType<typeof setTimeout> | undefined;

    constructor(private readonly deps: ManagerDeps) {
        this.settings = deps.readSettings();
        this.infoRetryDelays = deps.infoRetryDelaysMs ?? [250, 500, 1000, 2000, 4000, 8000, 15000];
        this.conversionInfoInterval = deps.conversionInfoIntervalMs ?? CONVERSION_INFO_INTERVAL_MS;
        this.infoWait = deps.infoWaitMs ?? INFO_WAIT_MS;
        deps.status.setEnabled(this.settings.enabled);
    }

    get currentSettings(): ExtensionSettings {
        return this.settings;
    }

    get currentInterpreter(): Interpreter | undefined {
        return this.interpreter;
    }

    get isRunning(): boolean {
        return this.client !== undefined;
    }

    /** Disposed, or being disposed: it starts no server again, and whatever still follows it should let go. */
    get isDisposed(): boolean {
        return this.disposed;
    }

    start(): Promise<void> {
        return this.enqueue(() => this.startSafely());
    }

    /** doStart, with any unexpected failure logged and shown instead of rejected. */
    private async startSafely(): Promise<void> {
        try {
            await this.doStart();
        } catch (err) {
            const text = errorText(err);
            this.deps.log.error(`Starting the server failed: ${err instanceof Error && err.stack ? err.stack : text}`);
            this.deps.status.setState('error', 'the server failed to start');
            void this.deps
                .showError(`Completer: the language server failed to start: ${text}`, ACTIONS.showLogs, ACTIONS.restart)
                .then((choice) => this.onAction(choice));
        }
    }

    stop(): Promise<void> {
        return this.enqueue(() => this.doStop());
    }

    /** Restarts asked for while one waits its turn are that one: Restart Server run twice quickly, or the Python
     *  extension's interpreter changes in a row (an event per resource), start one new server, not one after
     *  another. One asked for once it began is its own (the settings may have changed). */
    restart(): Promise<void> {
        if (this.restartWaiting === undefined) {
            this.restartWaiting = this.enqueue(async () => {
                this.restartWaiting = undefined;
                await this.doStop();
                await this.startSafely();
            });
        }
        return this.restartWaiting;
    }

    /**
     * Flip `completer.enabled`; the configuration change then updates the server and the status bar. Toggles
     * run one after another and read the configuration itself: `this.settings` lags behind it while a start
     * or restart holds the queue, and two quick clicks would both have turned suggestions off.
     */
    toggle(): Promise<void> {
        const next = this.toggling.then(() => this.doToggle());
        this.toggling = next.catch(() => undefined);
        return next;
    }

    private async doToggle(): Promise<void> {
        const enabled = !this.deps.readSettings().enabled;
        try {
            await this.deps.writeEnabled(enabled);
        } catch (err) {
            this.deps.log.error(`Could not change completer.enabled: ${errorText(err)}`);
            void this.deps.showError(`Completer: could not turn suggestions ${enabled ? 'on' : 'off'}: ${errorText(err)}`);
        }
    }

    /** Call on any change of the `completer` configuration section. */
    onConfigurationChanged(): Promise<void> {
        return this.enqueue(async () => {
            const before = this.settings;
            const after = this.deps.readSettings();
            this.settings = after;
            this.deps.status.setEnabled(after.enabled);
            if (needsRestart(before, after)) {
                this.deps.log.info('Python path or languages changed: restarting the server');
                await this.doStop();
                await this.startSafely();
                return;
            }
            if (this.client && serverSettingsChanged(before, after)) {
                const params = didChangeConfigurationParams(after);
                this.deps.log.info(`Sending settings: ${JSON.stringify(settingsForLog(params.settings.completer))}`);
                try {
                    await this.client.sendNotification('workspace/didChangeConfiguration', params);
                } catch (err) {
                    this.deps.log.error(`Could not send settings: ${errorText(err)}`);
                }
                if (
                    before.modelPath !== after.modelPath ||
                    before.device !== after.device ||
                    before.backend !== after.backend ||
                    before.endpoint !== after.endpoint ||
                    before.model !== after.model
                ) {
                    this.modelKnown = false;
                    await this.awhile(this.refreshInfo());
                }
                await this.awhile(this.refreshActiveFile());
            }
        });
    }

    /** Ask the server whether completer.excludeFiles leaves the active file alone, and say so in the status bar.
     *  Asked when another file becomes active, once the server runs, and after the settings change. */
    async refreshActiveFile(client: ClientLike | undefined = this.client): Promise<void> {
        const uri = this.deps.activeFileUri?.();
        if (!client || this.client !== client || uri === undefined) {
            this.deps.status.setExcluded(undefined);
            return;
        }
        let answer: unknown;
        try {
            answer = await client.sendRequest<unknown>(FILE_INFO_REQUEST, { uri });
        } catch (err) {
            this.deps.log.warn(`${FILE_INFO_REQUEST} failed: ${errorText(err)}`);
            answer = undefined; // not the previous file's word on this one
        }
        if (this.client !== client || this.deps.activeFileUri?.() !== uri) {
            return; // another file or server since: its own answer decides
        }
        const excluded = (answer as { excluded?: unknown } | null)?.excluded;
        this.deps.status.setExcluded(typeof excluded === 'string' ? excluded : undefined);
    }

    /** The Python extension's active interpreter changed; matters only when completer.pythonPath is unset. */
    onInterpreterChanged(): Promise<void> {
        if (this.settings.pythonPath) {
            return Promise.resolve();
        }
        this.deps.log.info('The Python extension changed the active interpreter: restarting the server');
        return this.restart();
    }

    /** Marked disposed at once, so a start queued before the stop, or a listener asking while it runs, finds it so. */
    async dispose(): Promise<void> {
        this.disposed = true;
        await this.stop();
    }

    private enqueue<T>(operation: () => Promise<T>): Promise<T> {
        const next = this.queue.then(operation, operation);
        this.queue = next.catch(() => undefined);
        return next;
    }

    private async doStart(): Promise<void> {
        if (this.disposed || this.client) {
            return;
        }
        const { status, log } = this.deps;
        status.setState('starting');
        status.setModel(undefined);
        status.setLanguages(undefined);
        this.modelKnown = false;
        const interpreter = await this.deps.resolveInterpreter(this.settings);
        this.interpreter = interpreter;
        log.info(`Python interpreter: ${interpreter.command} (from ${describeSource(interpreter.source)})`);

        const check = await this.deps.checkInstalled(interpreter.command);
        if (!check.ok) {
            this.reportInstallProblem(interpreter.command, check);
            return;
        }

        const client = this.deps.createClient({
            python: interpreter.command,
            getSettings: () => this.settings,
            onLatency: (ms) => {
                status.setLatency(ms);
                const remoteDue = this.remote && Date.now() - this.lastInfoAt > REMOTE_INFO_INTERVAL_MS;
                if ((!this.modelKnown || remoteDue) && !this.infoPending) {
                    void this.refreshInfo(client, this.infoRetryDelays.length, remoteDue);
                }
            },
            onStateChange: (state, reason) => {
                if (this.client !== client) {
                    return;
                }
                if (state === 'running') {
                    status.setState('running');
                    this.modelKnown = false;
                    void this.refreshInfo();
                } else if (state === 'failed') {
                    this.reportStopped(reason ?? 'the server stopped');
                } else {
                    status.setState('error', 'the server stopped');
                }
            },
        });
        this.client = client;
        try {
            log.info(`Starting: ${interpreter.command} -m lsp`);
            await client.start();
        } catch (err) {
            this.client = undefined;
            const text = errorText(err);
            log.error(`The server failed to start: ${text}`);
            status.setState('error', `the server failed to start: ${text}`);
            try {
                await client.stop();
            } catch {
                // already dead
            }
            void this.deps
                .showError(`Completer: the language server failed to start: ${text}`, ACTIONS.showLogs, ACTIONS.restart)
                .then((choice) => this.onAction(choice));
            return;
        }
        status.setState('running');
        await this.awhile(this.refreshInfo());
    }

    /** Wait for a request to the server, for INFO_WAIT_MS at most, in an operation of the queue: a server that does
     *  not answer (hung, or one whose connection broke without closing) must not hold Restart Server, the settings
     *  and deactivation back forever. The request goes on, and its answer still reaches the status bar. */
    private async awhile(request: Promise<void>): Promise<void> {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const waited = new Promise<void>((resolve) => {
            timer = setTimeout(resolve, this.infoWait);
        });
        await Promise.race([request, waited]);
        clearTimeout(timer);
    }

    private async doStop(): Promise<void> {
        const client = this.client;
        this.client = undefined;
        clearTimeout(this.conversionPoll); // the next client's first answer starts its own
        this.conversionPoll = undefined;
        if (client) {
            try {
                await client.stop();
            } catch (err) {
                this.deps.log.warn(`Stopping the server: ${errorText(err)}`);
            }
        }
        this.deps.status.setState('stopped');
    }

    /**
     * Ask the server for completer/info and show the model. The server loads its model in the background,
     * so right after start the answer may not name one yet: then ask again later (and after the next
     * answered inline completion), unless the server reports why no model could be loaded.
     */
    private async refreshInfo(client: ClientLike | undefined = this.client, retry = 0, again = false): Promise<void> {
        if (!client || this.client !== client || (retry > 0 && this.modelKnown && !again)) {
            return;
        }
        this.lastInfoAt = Date.now();
        let info: unknown;
        this.infoPending = true;
        try {
            info = await client.sendRequest<unknown>(INFO_REQUEST, {});
        } catch (err) {
            this.deps.log.warn(`${INFO_REQUEST} failed: ${errorText(err)}`);
            return;
        } finally {
            this.infoPending = false;
        }
        if (this.client !== client) {
            return;
        }
        const label = modelLabel(info);
        const modelError = (info as { model_error?: unknown } | null)?.model_error;
        const remote = remoteOf(info);
        this.remote = remote !== undefined;
        this.deps.status.setRemote(remote?.endpoint);
        this.deps.status.setLanguages(languagesOf(info));
        const problem = typeof modelError === 'string' && modelError !== '' ? modelError : undefined;
        if (label && remote?.state === 'error') {
            this.modelKnown = true;
            this.deps.status.setModel(label);
            this.deps.status.setState('error', `the endpoint ${remote.endpoint} failed: ${remote.lastError ?? 'no reply'}`);
        } else if (label && problem !== undefined) {
            // A backend named but unusable: "openai" without an endpoint (or one the server refused) answers nothing.
            this.modelKnown = true;
            this.deps.log.error(`The server gives no suggestions: ${problem}`);
            this.deps.status.setModel(label);
            this.deps.status.setState('error', problem);
        } else if (label) {
            if (!this.modelKnown) {
                this.deps.log.info(`Server info: ${JSON.stringify(info)}`);
            }
            const converting = conversionOf(info);
            this.modelKnown = converting === undefined; // else asked again: by the poll below, and after a completion
            this.deps.status.setState('running');
            void this.refreshActiveFile(client);
            this.deps.status.setModel(converting ? `${label}, converting ${converting}` : label);
            if (converting !== undefined && this.conversionPoll === undefined) {
                this.conversionPoll = setTimeout(() => {
                    this.conversionPoll = undefined;
                    if (!this.modelKnown) {
                        void this.refreshInfo(client);
                    }
                }, this.conversionInfoInterval);
                this.conversionPoll.unref?.();
            }
        } else if (problem !== undefined) {
            this.deps.log.error(`The server has no model: ${problem}`);
            this.deps.status.setState('error', `no model loaded: ${problem}`);
        } else if (retry < this.infoRetryDelays.length) {
            const timer = setTimeout(() => void this.refreshInfo(client, retry + 1), this.infoRetryDelays[retry]);
            timer.unref?.();
        }
    }

    /** The server stopped for good on its own: the status bar and one message say why, with a restart at hand. */
    private reportStopped(reason: string): void {
        this.deps.log.error(`The server is not running: ${reason}`);
        this.deps.status.setState('error', reason);
        void this.deps
            .showError(`Completer: ${reason.replace(/\.?$/, '.')}`, ACTIONS.showLogs, ACTIONS.restart)
            .then((choice) => this.onAction(choice));
    }

    private reportInstallProblem(python: string, check: Extract<InstallCheck, { ok: false }>): void {
        const { status, log } = this.deps;
        const minimum = MIN_PYTHON.join('.');
        const pickAnother =
            `Set "completer.pythonPath" to a Python ${minimum}+ interpreter, or select one with the Python extension.`;
        if (check.reason === 'interpreter-missing' || check.reason === 'python-too-old') {
            const [message, state] =
                check.reason === 'interpreter-missing'
                    ? [`Completer: cannot run the Python interpreter "${python}" (${check.detail}). ${pickAnother}`,
                        `cannot run ${python}`]
                    : [`Completer: "${python}" is Python ${check.detail}, and the language server needs Python ` +
                        `${minimum} or later. ${pickAnother}`, `Python ${check.detail} is older than ${minimum}`];
            log.error(message);
            status.setState('error', state);
            void this.deps.showError(message, ACTIONS.openSettings, ACTIONS.showLogs).then((choice) => this.onAction(choice));
            return;
        }
        if (check.reason === 'check-failed') {
            // Installing again would not help an import that hangs or crashes: the log and the settings might.
            const message =
                `Completer: importing the language server in ${python} ${check.detail}. Its packages may be broken ` +
                `or built for another machine: run \`${python} -c "import ${SERVER_MODULES}"\` in a terminal ` +
                `to see why, or pick another interpreter.`;
            log.error(message);
            status.setState('error', 'the server check failed');
            void this.deps.showError(message, ACTIONS.openSettings, ACTIONS.showLogs)
                .then((choice) => this.onAction(choice));
            return;
        }
        const { command, message } = check.reason === 'externally-managed'
            ? this.venvInstructions(python, check.detail)
            : this.pipInstructions(python, check.detail);
        log.error(message);
        status.setState('error', 'the server is not installed');
        void this.deps
            .showError(message, ACTIONS.copyInstall, ACTIONS.openSettings, ACTIONS.showLogs)
            .then((choice) => this.onAction(choice, command));
    }

    /** The pip command that installs the server into `python`. */
    private pipInstructions(python: string, detail: string): { command: string; message: string } {
        const command = installCommand(python, this.deps.repoDir, this.deps.platform);
        return {
            command,
            message: `Completer: the language server is not installed for ${python} (${detail}). ` +
                `Install it with: ${command}`,
        };
    }

    /** For a system Python that pip refuses (PEP 668): the venv to make and install into, and the setting to point
     *  at it, since `<python> -m pip install` would only print pip's externally-managed-environment error. */
    private venvInstructions(python: string, detail: string): { command: string; message: string } {
        const venv = venvInstall(python, this.deps.repoDir, this.deps.platform);
        const message =
            `Completer: the language server is not installed for ${python} (${detail}), and pip does not install ` +
            `into that Python: the system manages it. Install the server into a virtual environment with: ` +
            `${venv.command} (the README's quick start, bash scripts/demo.sh, makes the same one), then set ` +
            `"completer.pythonPath" to ${venv.python}.`;
        return { command: venv.command, message };
    }

    private onAction(choice: string | undefined, command?: string): void {
        switch (choice) {
            case ACTIONS.copyInstall:
                if (command) {
                    void this.deps.copyToClipboard(command);
                }
                break;
            case ACTIONS.openSettings:
                this.deps.openSettings();
                break;
            case ACTIONS.showLogs:
                this.deps.showLogs();
                break;
            case ACTIONS.restart:
                void this.restart();
                break;
        }
    }
}

function describeSource(source: Interpreter['source']): string {
    switch (source) {
        case 'setting':
            return 'completer.pythonPath';
        case 'python-extension':
            return 'the Python extension';
        default:
            return 'PATH';
    }
}

export function errorText(err: unknown): string {
    if (err instanceof Error) {
        return err.message;
    }
    return String(err);
}
