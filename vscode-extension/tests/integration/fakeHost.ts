// A fake VS Code host good enough for the real vscode-languageclient: the unit-test mock (settings,
// status bar, commands, messages) plus the value classes and the `languages`/`workspace` events the
// client uses. Whatever else the client touches is an inert "anything" (callable, constructible, every
// property another anything), so loading the bundled extension never depends on the full API.
// Providers the client registers are captured in `host` for the test to call like the editor would.

import Module = require('module');
import * as base from '../unit/mocks/vscode';

export const { mock, EventEmitter, ThemeColor, StatusBarAlignment, ConfigurationTarget } = base;

/** Callable, constructible, and every property (but `then`) is another one. */
function anything(name = 'anything'): any {
    const target = function () {
        return anything(`${name}()`);
    };
    return new Proxy(target, {
        get(t, prop) {
            if (prop === 'then' || typeof prop === 'symbol') {
                return undefined;
            }
            if (prop === 'dispose') {
                return () => undefined;
            }
            if (!(prop in t) || prop === 'name' || prop === 'length') {
                (t as any)[prop] = anything(`${name}.${String(prop)}`);
            }
            return (t as any)[prop];
        },
        apply: () => anything(`${name}()`),
        construct: () => anything(`new ${name}`),
    });
}

export class Disposable {
    constructor(private readonly callOnDispose: () => unknown = () => undefined) {}
    static from(...items: { dispose(): unknown }[]): Disposable {
        return new Disposable(() => items.forEach((item) => item?.dispose?.()));
    }
    dispose(): void {
        this.callOnDispose();
    }
}

export class Uri {
    private constructor(
        public readonly scheme: string,
        public readonly path: string,
    ) {}
    get fsPath(): string {
        return this.path;
    }
    static file(fsPath: string): Uri {
        return new Uri('file', fsPath);
    }
    static parse(value: string): Uri {
        const url = new URL(value);
        return new Uri(url.protocol.replace(/:$/, ''), decodeURIComponent(url.pathname));
    }
    with(change: { scheme?: string; path?: string }): Uri {
        return new Uri(change.scheme ?? this.scheme, change.path ?? this.path);
    }
    toString(): string {
        return this.scheme === 'file' ? new URL(`file://${this.path}`).toString() : `${this.scheme}:${this.path}`;
    }
    toJSON(): unknown {
        return { scheme: this.scheme, path: this.path };
    }
}

export class Position {
    constructor(
        public readonly line: number,
        public readonly character: number,
    ) {}
    isEqual(other: Position): boolean {
        return this.line === other.line && this.character === other.character;
    }
}

export class Range {
    readonly start: Position;
    readonly end: Position;
    constructor(a: Position | number, b: Position | number, c?: number, d?: number) {
        if (typeof a === 'number') {
            this.start = new Position(a, b as number);
            this.end = new Position(c as number, d as number);
        } else {
            this.start = a;
            this.end = b as Position;
        }
    }
    get isEmpty(): boolean {
        return this.start.isEqual(this.end);
    }
}

export class Selection extends Range {}
export class Location {
    constructor(
        public uri: Uri,
        public range: Range,
    ) {}
}
export class TextEdit {
    constructor(
        public range: Range,
        public newText: string,
    ) {}
    static replace(range: Range, newText: string): TextEdit {
        return new TextEdit(range, newText);
    }
}
export class SnippetString {
    constructor(public value = '') {}
}
export class MarkdownString {
    constructor(
        public value = '',
        public supportThemeIcons = false,
    ) {}
}
export class CompletionItem {
    constructor(
        public label: string | { label: string },
        public kind?: number,
    ) {}
    [key: string]: unknown;
}
export class CompletionList {
    constructor(
        public items: CompletionItem[] = [],
        public isIncomplete = false,
    ) {}
}
export class InlineCompletionItem {
    constructor(
        public insertText: string | SnippetString,
        public range?: Range,
        public command?: unknown,
    ) {}
    [key: string]: unknown;
}
export class InlineCompletionList {
    constructor(public items: InlineCompletionItem[]) {}
}
export class CancellationError extends Error {
    constructor() {
        super('Canceled');
        this.name = 'Canceled';
    }
}
export class CancellationTokenSource {
    private readonly emitter = new base.EventEmitter<void>();
    readonly token = {
        isCancellationRequested: false,
        onCancellationRequested: this.emitter.event,
    };
    cancel(): void {
        if (!this.token.isCancellationRequested) {
            this.token.isCancellationRequested = true;
            this.emitter.fire();
        }
    }
    dispose(): void {
        this.emitter.dispose();
    }
}
// Plain classes the client subclasses when it loads.
export class CodeAction {}
export class CodeLens {
    constructor(public range?: Range) {}
}
export class Diagnostic {
    constructor(
        public range?: Range,
        public message?: string,
        public severity?: number,
    ) {}
}
export class DocumentLink {
    constructor(public range?: Range) {}
}
export class InlayHint {
    constructor(public position?: Position) {}
}
export class CallHierarchyItem {}
export class TypeHierarchyItem {}
export class SymbolInformation {}

export const CompletionItemKind = new Proxy({ Text: 0, Method: 1, Function: 2, Snippet: 14 } as Record<string, number>, {
    get: (t, p: string) => (p in t ? t[p] : 0),
});
export enum CompletionTriggerKind {
    Invoke = 0,
    TriggerCharacter = 1,
    TriggerForIncompleteCompletions = 2,
}
export enum InlineCompletionTriggerKind {
    Invoke = 0,
    Automatic = 1,
}
export enum LogLevel {
    Off = 0,
    Trace = 1,
    Debug = 2,
    Info = 3,
    Warning = 4,
    Error = 5,
}
export enum ProgressLocation {
    SourceControl = 1,
    Window = 10,
    Notification = 15,
}
export enum TextDocumentSaveReason {
    Manual = 1,
    AfterDelay = 2,
    FocusOut = 3,
}
export enum DiagnosticSeverity {
    Error = 0,
    Warning = 1,
    Information = 2,
    Hint = 3,
}
export enum EndOfLine {
    LF = 1,
    CRLF = 2,
}

/** A text document as the client reads it. */
export class FakeTextDocument {
    version = 1;
    isClosed = false;
    isDirty = false;
    readonly isUntitled = false;
    readonly eol = EndOfLine.LF;
    constructor(
        public readonly uri: Uri,
        public readonly languageId: string,
        private text: string,
    ) {}
    get fileName(): string {
        return this.uri.fsPath;
    }
    get lineCount(): number {
        return this.text.split('\n').length;
    }
    getText(): string {
        return this.text;
    }
    lineAt(line: number | Position): { text: string; range: Range } {
        const index = typeof line === 'number' ? line : line.line;
        const text = this.text.split('\n')[index];
        return { text, range: new Range(index, 0, index, text.length) };
    }
    setText(text: string): void {
        this.text = text;
        this.version++;
    }
}

interface Filter {
    language?: string;
    scheme?: string;
    pattern?: string;
}

function matchSelector(selector: unknown, document: FakeTextDocument): number {
    const filters = (Array.isArray(selector) ? selector : [selector]) as (string | Filter)[];
    let best = 0;
    for (const filter of filters) {
        if (typeof filter === 'string') {
            best = Math.max(best, filter === document.languageId || filter === '*' ? 10 : 0);
            continue;
        }
        if (filter.language && filter.language !== '*' && filter.language !== document.languageId) {
            continue;
        }
        if (filter.scheme && filter.scheme !== '*' && filter.scheme !== document.uri.scheme) {
            continue;
        }
        best = Math.max(best, 10);
    }
    return best;
}

/** What the client registered and what the editor state is. */
export const host = {
    documents: [] as FakeTextDocument[],
    inlineProviders: [] as { selector: unknown; provider: any }[],
    completionProviders: [] as { selector: unknown; provider: any; triggerCharacters: string[] }[],
    onDidOpenTextDocument: new base.EventEmitter<FakeTextDocument>(),
    onDidCloseTextDocument: new base.EventEmitter<FakeTextDocument>(),
    onDidChangeTextDocument: new base.EventEmitter<unknown>(),
    openDocument(document: FakeTextDocument): void {
        this.documents.push(document);
        this.onDidOpenTextDocument.fire(document);
    },
    changeDocument(document: FakeTextDocument, text: string): void {
        document.setText(text);
        this.onDidChangeTextDocument.fire({ document, contentChanges: [{ text, range: undefined, rangeLength: undefined, rangeOffset: undefined }], reason: undefined });
    },
};

function event<T>(emitter?: base.EventEmitter<T>) {
    return (emitter ?? new base.EventEmitter<T>()).event;
}

export const version = '1.95.0';

export const languages = new Proxy(
    {
        match: matchSelector,
        registerInlineCompletionItemProvider(selector: unknown, provider: unknown) {
            const entry = { selector, provider };
            host.inlineProviders.push(entry);
            return new Disposable(() => host.inlineProviders.splice(host.inlineProviders.indexOf(entry), 1));
        },
        registerCompletionItemProvider(selector: unknown, provider: unknown, ...triggerCharacters: string[]) {
            const entry = { selector, provider, triggerCharacters };
            host.completionProviders.push(entry);
            return new Disposable(() => host.completionProviders.splice(host.completionProviders.indexOf(entry), 1));
        },
    } as Record<string, unknown>,
    { get: (t, p: string) => (p in t ? t[p] : (t[p] = anything(`languages.${p}`))) },
);

export const workspace = new Proxy(
    {
        getConfiguration: base.workspace.getConfiguration,
        onDidChangeConfiguration: base.workspace.onDidChangeConfiguration,
        get workspaceFolders() {
            return base.mock.workspaceFolders;
        },
        get textDocuments() {
            return host.documents;
        },
        notebookDocuments: [],
        isTrusted: true,
        onDidOpenTextDocument: event(host.onDidOpenTextDocument),
        onDidCloseTextDocument: event(host.onDidCloseTextDocument),
        onDidChangeTextDocument: event(host.onDidChangeTextDocument),
        onDidSaveTextDocument: event(),
        onWillSaveTextDocument: event(),
        onDidChangeWorkspaceFolders: event(),
        onDidGrantWorkspaceTrust: event(),
        onDidOpenNotebookDocument: event(),
        onDidCloseNotebookDocument: event(),
        onDidChangeNotebookDocument: event(),
        onDidSaveNotebookDocument: event(),
    } as Record<string, unknown>,
    { get: (t, p: string) => (p in t ? t[p] : (t[p] = anything(`workspace.${p}`))) },
);

export const window = new Proxy(
    {
        ...base.window,
        activeTextEditor: undefined,
        visibleTextEditors: [],
        onDidChangeVisibleTextEditors: event(),
        onDidChangeActiveTextEditor: event(),
        tabGroups: { all: [], onDidChangeTabs: event(), onDidChangeTabGroups: event() },
        showInformationMessage: async () => undefined,
    } as Record<string, unknown>,
    { get: (t, p: string) => (p in t ? t[p] : (t[p] = anything(`window.${p}`))) },
);

export const env = { ...base.env, appName: 'Fake VS Code', language: 'en', machineId: 'test', sessionId: 'test', openExternal: async () => true };
export const commands = base.commands;
export const extensions = base.extensions;

const real: Record<string, unknown> = {
    mock,
    EventEmitter,
    ThemeColor,
    StatusBarAlignment,
    ConfigurationTarget,
    Disposable,
    Uri,
    Position,
    Range,
    Selection,
    Location,
    TextEdit,
    SnippetString,
    MarkdownString,
    CompletionItem,
    CompletionList,
    InlineCompletionItem,
    InlineCompletionList,
    CancellationError,
    CancellationTokenSource,
    CodeAction,
    CodeLens,
    Diagnostic,
    DocumentLink,
    InlayHint,
    CallHierarchyItem,
    TypeHierarchyItem,
    SymbolInformation,
    CompletionItemKind,
    CompletionTriggerKind,
    InlineCompletionTriggerKind,
    LogLevel,
    ProgressLocation,
    TextDocumentSaveReason,
    DiagnosticSeverity,
    EndOfLine,
    version,
    languages,
    workspace,
    window,
    env,
    commands,
    extensions,
};

// Modules compiled with TypeScript's __importStar copy the module's own properties once, so every name
// the API declares must exist up front.
const declarations = require('fs').readFileSync(require.resolve('@types/vscode/index.d.ts'), 'utf8') as string;
for (const match of declarations.matchAll(/^\s{1,4}export (?:class|enum|namespace|const|function|let) (\w+)/gm)) {
    if (!(match[1] in real)) {
        real[match[1]] = anything(`vscode.${match[1]}`);
    }
}

/** The `vscode` module: the pieces above, and an inert anything for the rest. */
export const vscode = new Proxy(real, {
    get(t, prop) {
        if (typeof prop === 'symbol' || prop === 'then' || prop === '__esModule') {
            return undefined;
        }
        if (!(prop in t)) {
            t[prop] = anything(`vscode.${prop}`);
        }
        return t[prop];
    },
});

const moduleWithLoad = Module as unknown as { _load(request: string, parent: unknown, isMain: boolean): unknown };
const originalLoad = moduleWithLoad._load;
moduleWithLoad._load = function (request: string, parent: unknown, isMain: boolean) {
    return request === 'vscode' ? vscode : originalLoad.call(this, request, parent, isMain);
};

/** What the editor does when the window closes: the extension deactivated, then each of its subscriptions disposed
 *  (one that throws does not keep the others). */
export async function closeWindow(
    extension: { deactivate(): Promise<void> } | undefined,
    context: { subscriptions: { dispose(): unknown }[] },
): Promise<void> {
    await extension?.deactivate();
    for (const subscription of context.subscriptions) {
        try {
            subscription.dispose();
        } catch {
            // best effort
        }
    }
}
