// Thin wrapper around the `vscode` API (as in Microsoft's python-tools extension template): the rest of
// the extension calls these functions, so unit tests can replace the `vscode` module with a mock.

import {
    CancellationToken,
    commands,
    ConfigurationChangeEvent,
    ConfigurationScope,
    ConfigurationTarget,
    Disposable,
    env,
    extensions,
    LogOutputChannel,
    Progress,
    ProgressLocation,
    QuickPickItem,
    StatusBarAlignment,
    StatusBarItem,
    ThemeColor,
    Uri,
    window,
    workspace,
    WorkspaceConfiguration,
    WorkspaceFolder,
} from 'vscode';

export function getConfiguration(section: string, scope?: ConfigurationScope): WorkspaceConfiguration {
    return workspace.getConfiguration(section, scope);
}

export function onDidChangeConfiguration(handler: (e: ConfigurationChangeEvent) => unknown): Disposable {
    return workspace.onDidChangeConfiguration(handler);
}

/** Write a setting where it currently takes effect (workspace folder, workspace, else user settings). */
export async function updateSetting(section: string, key: string, value: unknown): Promise<void> {
    const config = workspace.getConfiguration(section);
    const inspected = config.inspect(key);
    let target = ConfigurationTarget.Global;
    if (inspected?.workspaceFolderValue !== undefined) {
        target = ConfigurationTarget.WorkspaceFolder;
    } else if (inspected?.workspaceValue !== undefined) {
        target = ConfigurationTarget.Workspace;
    }
    await config.update(key, value, target);
}

const COMPLETED_SCHEMES = ['file', 'untitled', 'vscode-notebook-cell'];

/** The language id of the file, untitled document or notebook cell in the active editor; undefined for none, or
 *  an output channel's, a diff's or a settings editor's. */
export function activeFileLanguage(): string | undefined {
    const document = window.activeTextEditor?.document;
    return document && COMPLETED_SCHEMES.includes(document.uri.scheme) ? document.languageId : undefined;
}

/** The URI of the file, untitled document or notebook cell in the active editor, as the language client sends it. */
export function activeFileUri(): string | undefined {
    const document = window.activeTextEditor?.document;
    return document && COMPLETED_SCHEMES.includes(document.uri.scheme) ? document.uri.toString() : undefined;
}

/** VS Code's `editor.inlineSuggest.enabled`, for `languageId`'s editors when given (a language can override it). */
export function inlineSuggestEnabled(languageId: string | undefined): boolean {
    const scope = languageId === undefined ? undefined : { languageId };
    return workspace.getConfiguration('editor', scope).get<boolean>('inlineSuggest.enabled', true) !== false;
}

/** Another editor became active, or a document opened (as when its language mode is changed). */
export function onDidChangeActiveFile(handler: () => unknown): Disposable {
    const editors = window.onDidChangeActiveTextEditor(handler);
    const documents = workspace.onDidOpenTextDocument(handler);
    return Disposable.from(editors, documents);
}

export function getWorkspaceFolders(): readonly WorkspaceFolder[] {
    return workspace.workspaceFolders ?? [];
}

export function isWorkspaceTrusted(): boolean {
    return workspace.isTrusted;
}

export function onDidGrantWorkspaceTrust(handler: () => unknown): Disposable {
    return workspace.onDidGrantWorkspaceTrust(handler);
}

export function createLogOutputChannel(name: string): LogOutputChannel {
    return window.createOutputChannel(name, { log: true });
}

export function createStatusBarItem(id: string, priority: number): StatusBarItem {
    return window.createStatusBarItem(id, StatusBarAlignment.Right, priority);
}

export function themeColor(id: string): ThemeColor {
    return new ThemeColor(id);
}

export function registerCommand(command: string, callback: (...args: any[]) => any): Disposable {
    return commands.registerCommand(command, callback);
}

export function executeCommand<T = unknown>(command: string, ...rest: unknown[]): Thenable<T> {
    return commands.executeCommand<T>(command, ...rest);
}

export function showErrorMessage(message: string, ...items: string[]): Thenable<string | undefined> {
    return window.showErrorMessage(message, ...items);
}

export function showWarningMessage(message: string, ...items: string[]): Thenable<string | undefined> {
    return window.showWarningMessage(message, ...items);
}

export function writeClipboard(text: string): Thenable<void> {
    return env.clipboard.writeText(text);
}

export function getExtension<T = any>(id: string): { isActive: boolean; exports: T; activate(): Thenable<T> } | undefined {
    return extensions.getExtension<T>(id);
}

export function onDidChangeExtensions(handler: () => unknown): Disposable {
    return extensions.onDidChange(handler);
}

export function fileUri(fsPath: string): Uri {
    return Uri.file(fsPath);
}

export function showInformationMessage(message: string, ...items: string[]): Thenable<string | undefined> {
    return window.showInformationMessage(message, ...items);
}

export function showQuickPick<T extends QuickPickItem>(items: T[], placeHolder: string): Thenable<T | undefined> {
    return window.showQuickPick(items, { placeHolder, matchOnDescription: true, matchOnDetail: true });
}

/** A cancellable notification with progress messages; `task` gets an AbortSignal that fires on Cancel. */
export function withProgress<T>(
    title: string,
    task: (report: (message: string) => void, signal: AbortSignal) => Promise<T>,
): Thenable<T> {
    return window.withProgress(
        { location: ProgressLocation.Notification, title, cancellable: true },
        (progress: Progress<{ message?: string }>, token: CancellationToken) => {
            const abort = new AbortController();
            token.onCancellationRequested(() => abort.abort());
            return task((message) => progress.report({ message }), abort.signal);
        },
    );
}
