// A small in-memory stand-in for the `vscode` module: enough of the API for the extension's own code.
// `mock` exposes the state the tests inspect and drive (settings, messages, status items, commands).

type Listener<T> = (event: T) => unknown;

export class EventEmitter<T> {
    private listeners: Listener<T>[] = [];
    event = (listener: Listener<T>) => {
        this.listeners.push(listener);
        return { dispose: () => (this.listeners = this.listeners.filter((l) => l !== listener)) };
    };
    fire(event: T): void {
        for (const listener of [...this.listeners]) {
            listener(event);
        }
    }
    dispose(): void {
        this.listeners = [];
    }
}

export class Disposable {
    constructor(private readonly callOnDispose: () => unknown) {}
    static from(...disposables: { dispose(): unknown }[]): Disposable {
        return new Disposable(() => disposables.forEach((d) => d.dispose()));
    }
    dispose(): void {
        this.callOnDispose();
    }
}

export enum StatusBarAlignment {
    Left = 1,
    Right = 2,
}

export enum ConfigurationTarget {
    Global = 1,
    Workspace = 2,
    WorkspaceFolder = 3,
}

export class ThemeColor {
    constructor(public readonly id: string) {}
}

export class Uri {
    private constructor(
        public readonly scheme: string,
        public readonly fsPath: string,
    ) {}
    get path(): string {
        return this.fsPath;
    }
    static file(fsPath: string): Uri {
        return new Uri('file', fsPath);
    }
    toString(): string {
        return `${this.scheme}://${this.fsPath}`;
    }
}

export class FakeStatusBarItem {
    text = '';
    tooltip: string | undefined;
    command: string | undefined;
    name: string | undefined;
    backgroundColor: ThemeColor | undefined;
    visible = false;
    disposed = false;
    constructor(
        public readonly id: string,
        public readonly alignment: StatusBarAlignment,
        public readonly priority: number,
    ) {}
    show(): void {
        this.visible = true;
    }
    hide(): void {
        this.visible = false;
    }
    dispose(): void {
        this.disposed = true;
    }
}

export class FakeLogOutputChannel {
    lines: string[] = [];
    shown = 0;
    logLevel = 3; // LogLevel.Info
    private readonly logLevelChange = new EventEmitter<number>();
    onDidChangeLogLevel = this.logLevelChange.event;
    constructor(public readonly name: string) {}
    info(message: string): void {
        this.lines.push(`[info] ${message}`);
    }
    warn(message: string): void {
        this.lines.push(`[warn] ${message}`);
    }
    error(message: string): void {
        this.lines.push(`[error] ${message}`);
    }
    debug(message: string): void {
        this.lines.push(`[debug] ${message}`);
    }
    trace(message: string): void {
        this.lines.push(`[trace] ${message}`);
    }
    append(value: string): void {
        this.lines.push(value);
    }
    appendLine(value: string): void {
        this.lines.push(value);
    }
    show(): void {
        this.shown++;
    }
    clear(): void {
        this.lines = [];
    }
    replace(value: string): void {
        this.lines = [value];
    }
    hide(): void {}
    dispose(): void {}
}

interface ExtensionEntry {
    isActive: boolean;
    exports: unknown;
    activate(): Promise<unknown>;
}

const configChange = new EventEmitter<{ affectsConfiguration(section: string): boolean }>();
type FakeEditor = { document: { languageId: string; uri: { scheme: string } } };
const activeEditorChange = new EventEmitter<FakeEditor | undefined>();
const documentOpen = new EventEmitter<FakeEditor['document']>();

/** State the tests read and drive. */
export const mock = {
    /** Effective settings, by full key, e.g. "completer.beams". */
    settings: new Map<string, unknown>(),
    /** Where `update` wrote each key. */
    settingTargets: new Map<string, ConfigurationTarget>(),
    statusItems: [] as FakeStatusBarItem[],
    outputChannels: [] as FakeLogOutputChannel[],
    errors: [] as { message: string; items: string[] }[],
    warnings: [] as { message: string; items: string[] }[],
    /** What showErrorMessage resolves to (a button label, or undefined for dismissed). */
    errorResponse: undefined as string | undefined,
    commands: new Map<string, (...args: any[]) => any>(),
    executed: [] as { command: string; args: unknown[] }[],
    clipboard: '',
    extensions: new Map<string, ExtensionEntry>(),
    workspaceFolders: [] as { uri: Uri; name: string; index: number }[],
    activeTextEditor: undefined as FakeEditor | undefined,

    /** Make an editor of a document in `languageId` (or none) the active one, as a user's click would. */
    activateEditor(languageId: string | undefined, scheme = 'file'): void {
        this.activeTextEditor = languageId === undefined ? undefined : { document: { languageId, uri: { scheme } } };
        activeEditorChange.fire(this.activeTextEditor);
    },

    /** Change the active document's language mode: VS Code opens it again under the new id. */
    changeLanguageMode(languageId: string): void {
        const editor = this.activeTextEditor;
        if (editor) {
            editor.document = { ...editor.document, languageId };
            documentOpen.fire(editor.document);
        }
    },

    reset(): void {
        this.settings.clear();
        this.settingTargets.clear();
        this.statusItems.length = 0;
        this.outputChannels.length = 0;
        this.errors.length = 0;
        this.warnings.length = 0;
        this.errorResponse = undefined;
        this.commands.clear();
        this.executed.length = 0;
        this.clipboard = '';
        this.extensions.clear();
        this.workspaceFolders = [];
        this.activeTextEditor = undefined;
    },

    /** Change settings as a user would and fire onDidChangeConfiguration. */
    changeSettings(values: Record<string, unknown>): void {
        for (const [key, value] of Object.entries(values)) {
            if (value === undefined) {
                this.settings.delete(key);
            } else {
                this.settings.set(key, value);
            }
        }
        const keys = Object.keys(values);
        configChange.fire({
            affectsConfiguration: (section: string) =>
                keys.some((key) => key === section || key.startsWith(section + '.')),
        });
    },
};

/** A section's settings; with a `languageId` scope, a setting that language overrides (stored by the tests as
 *  "[markdown].editor.inlineSuggest.enabled") wins over the plain key, as in VS Code. */
function configuration(section?: string, scope?: unknown) {
    const language = (scope as { languageId?: string } | undefined)?.languageId;
    const plain = (key: string) => (section ? `${section}.${key}` : key);
    const overridden = (key: string) => `[${language}].${plain(key)}`;
    const full = (key: string) =>
        language !== undefined && mock.settings.has(overridden(key)) ? overridden(key) : plain(key);
    return {
        get<T>(key: string, defaultValue?: T): T | undefined {
            return mock.settings.has(full(key)) ? (mock.settings.get(full(key)) as T) : defaultValue;
        },
        has(key: string): boolean {
            return mock.settings.has(full(key));
        },
        inspect(key: string) {
            return { key: full(key), globalValue: mock.settings.get(full(key)) };
        },
        async update(key: string, value: unknown, target?: ConfigurationTarget): Promise<void> {
            mock.settingTargets.set(full(key), target ?? ConfigurationTarget.Workspace);
            mock.changeSettings({ [full(key)]: value });
        },
    };
}

export const workspace = {
    getConfiguration: (section?: string, scope?: unknown) => configuration(section, scope),
    onDidChangeConfiguration: configChange.event,
    get workspaceFolders() {
        return mock.workspaceFolders;
    },
    isTrusted: true,
    onDidGrantWorkspaceTrust: new EventEmitter<void>().event,
    onDidOpenTextDocument: documentOpen.event,
};

export const window = {
    get activeTextEditor() {
        return mock.activeTextEditor;
    },
    onDidChangeActiveTextEditor: activeEditorChange.event,
    createStatusBarItem(id: string, alignment: StatusBarAlignment, priority: number): FakeStatusBarItem {
        const item = new FakeStatusBarItem(id, alignment, priority);
        mock.statusItems.push(item);
        return item;
    },
    createOutputChannel(name: string): FakeLogOutputChannel {
        const channel = new FakeLogOutputChannel(name);
        mock.outputChannels.push(channel);
        return channel;
    },
    async showErrorMessage(message: string, ...items: string[]): Promise<string | undefined> {
        mock.errors.push({ message, items });
        return mock.errorResponse;
    },
    async showWarningMessage(message: string, ...items: string[]): Promise<string | undefined> {
        mock.warnings.push({ message, items });
        return undefined;
    },
};

export const commands = {
    registerCommand(command: string, callback: (...args: any[]) => any) {
        if (mock.commands.has(command)) {
            throw new Error(`command '${command}' already exists`);
        }
        mock.commands.set(command, callback);
        return { dispose: () => mock.commands.delete(command) };
    },
    async executeCommand(command: string, ...args: unknown[]): Promise<unknown> {
        mock.executed.push({ command, args });
        const callback = mock.commands.get(command);
        return callback ? callback(...args) : undefined;
    },
};

export const env = {
    clipboard: {
        async writeText(text: string): Promise<void> {
            mock.clipboard = text;
        },
    },
};

export const extensions = {
    getExtension(id: string) {
        return mock.extensions.get(id);
    },
    onDidChange: new EventEmitter<void>().event,
};
