// Entry point: wires the VS Code API (through vscodeapi.ts) to the server manager.

import * as fs from 'fs';
import * as os from 'os';
import type { ExtensionContext } from 'vscode';
import { COMMANDS, EXTENSION_NAME } from './common/constants';
import { ServerManager } from './common/manager';
import { chooseModel } from './common/models';
import {
    checkServerInstalled,
    findRepoDir,
    PYTHON_EXTENSION_ID,
    PythonExtensionApi,
    resolveInterpreter,
} from './common/python';
import { createLanguageClient } from './common/server';
import { CONFIG_SECTION, ExtensionSettings, readSettings, unseenBecause } from './common/settings';
import { StatusBar } from './common/status';
import { TraceChannel } from './common/trace';
import {
    activeFileLanguage,
    activeFileUri,
    createLogOutputChannel,
    executeCommand,
    getConfiguration,
    getExtension,
    getWorkspaceFolders,
    inlineSuggestEnabled,
    isWorkspaceTrusted,
    onDidChangeActiveFile,
    onDidChangeConfiguration,
    onDidGrantWorkspaceTrust,
    registerCommand,
    showErrorMessage,
    showInformationMessage,
    showQuickPick,
    updateSetting,
    withProgress,
    writeClipboard,
} from './common/vscodeapi';

let manager: ServerManager | undefined;

async function getPythonApi(): Promise<PythonExtensionApi | undefined> {
    const extension = getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
    if (!extension) {
        return undefined;
    }
    if (!extension.isActive) {
        await extension.activate();
    }
    return extension.exports;
}

export async function activate(context: ExtensionContext): Promise<ServerManager> {
    const log = createLogOutputChannel(EXTENSION_NAME);
    const status = new StatusBar();
    const traceChannel = new TraceChannel(log, () => getConfiguration(CONFIG_SECTION).get('trace.server'));
    context.subscriptions.push(log, status, traceChannel);

    const firstFolder = () => getWorkspaceFolders()[0]?.uri;
    const read = () =>
        readSettings(getConfiguration(CONFIG_SECTION), { home: os.homedir(), workspaceFolder: firstFolder()?.fsPath });

    let unseenLogged: string | undefined;
    /** The status bar says when VS Code's settings hide every suggestion in the active editor, and the log once. */
    const refreshUnseen = () => {
        const language = activeFileLanguage();
        const reason = unseenBecause(read(), inlineSuggestEnabled(language));
        if (reason !== undefined && reason !== unseenLogged) {
            log.warn(`Suggestions cannot show${language ? ` in ${language} files` : ''}, since ${reason}`);
        }
        unseenLogged = reason;
        status.setUnseen(reason);
    };

    const interpreterFor = (settings: ExtensionSettings) =>
        resolveInterpreter({
            pythonPath: settings.pythonPath,
            getPythonApi,
            resource: firstFolder(),
            untrustedFolders: isWorkspaceTrusted() ? undefined : untrustedFolders(),
            log: (message) => log.warn(message),
        });
    const serverManager = new ServerManager({
        readSettings: read,
        resolveInterpreter: interpreterFor,
        checkInstalled: (python) => checkServerInstalled(python),
        createClient: (hooks) => createLanguageClient(hooks, log, traceChannel),
        status,
        log,
        showError: showErrorMessage,
        writeEnabled: (enabled) => updateSetting(CONFIG_SECTION, 'enabled', enabled),
        copyToClipboard: writeClipboard,
        showLogs: () => log.show(),
        openSettings: () => void executeCommand('workbench.action.openSettings', `${CONFIG_SECTION}.`),
        repoDir: findRepoDir(context.extensionPath),
        activeFileUri,
    });
    manager = serverManager;

    context.subscriptions.push(
        registerCommand(COMMANDS.toggle, () => serverManager.toggle()),
        registerCommand(COMMANDS.restartServer, () => serverManager.restart()),
        registerCommand(COMMANDS.showLogs, () => log.show()),
        registerCommand(COMMANDS.chooseModel, () =>
            chooseModel({
                python: async () => (serverManager.currentInterpreter ?? (await interpreterFor(read()))).command,
                storageDir: context.globalStorageUri.fsPath,
                pick: showQuickPick,
                withProgress,
                setModelPath: (value) => updateSetting(CONFIG_SECTION, 'modelPath', value),
                showError: showErrorMessage,
                showInfo: showInformationMessage,
                copyToClipboard: writeClipboard,
                log,
                repoDir: findRepoDir(context.extensionPath),
            }),
        ),
        onDidChangeConfiguration((event) => {
            if (event.affectsConfiguration(`${CONFIG_SECTION}.trace.server`)) {
                traceChannel.refresh();
            }
            if (event.affectsConfiguration(CONFIG_SECTION)) {
                void serverManager.onConfigurationChanged();
            }
            refreshUnseen(); // any change: a language's own settings may turn ghost text off
        }),
        { dispose: () => void serverManager.dispose() },
        onDidGrantWorkspaceTrust(() => {
            log.info('The workspace is trusted now: restarting the server with its interpreter');
            void serverManager.restart();
        }),
        onDidChangeActiveFile(() => {
            status.setActiveLanguage(activeFileLanguage());
            refreshUnseen();
            void serverManager.refreshActiveFile();
        }),
    );
    status.setActiveLanguage(activeFileLanguage());
    refreshUnseen();

    void serverManager.start().then(() => watchPythonInterpreter(context, serverManager, log));
    return serverManager;
}

/** The workspace folders' paths, as VS Code names them and as they really are (a folder opened through a link). */
function untrustedFolders(): string[] {
    return getWorkspaceFolders().flatMap((folder) => {
        const named = folder.uri.fsPath;
        try {
            return [named, fs.realpathSync(named)];
        } catch {
            return [named];
        }
    });
}

/** Restart when the Python extension's active interpreter changes (used when completer.pythonPath is unset). Not
 *  once the manager is disposed (the extension deactivated while the server started): the context's subscriptions
 *  were disposed with it, and one pushed now would never be. */
async function watchPythonInterpreter(
    context: ExtensionContext,
    serverManager: ServerManager,
    log: { warn(message: string): void },
): Promise<void> {
    try {
        const api = serverManager.isDisposed ? undefined : await getPythonApi();
        if (serverManager.isDisposed) {
            return;
        }
        const subscription = api?.environments.onDidChangeActiveEnvironmentPath?.(() => {
            void serverManager.onInterpreterChanged();
        });
        if (subscription) {
            context.subscriptions.push(subscription);
        }
    } catch (err) {
        log.warn(`Not following the Python extension's interpreter: ${String(err)}`);
    }
}

export async function deactivate(): Promise<void> {
    await manager?.dispose();
    manager = undefined;
}
