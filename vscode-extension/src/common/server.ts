// The real language client (vscode-languageclient). This is the only module that imports it, since it
// subclasses vscode classes when loaded; everything it needs is computed by the unit-tested modules.

import type { LogOutputChannel } from 'vscode';
import {
    LanguageClient,
    LanguageClientOptions,
    RevealOutputChannelOn,
    ServerOptions,
    State,
    TransportKind,
} from 'vscode-languageclient/node';
import { EXTENSION_NAME, SERVER_ID } from './constants';
import type { ClientHooks, ClientLike } from './manager';
import { createMiddleware } from './middleware';
import { serverCommand } from './python';
import { documentSelector, initializationOptions } from './settings';

const STOP_TIMEOUT_MS = 3000;

/**
 * @param outputChannel the Completer output channel
 * @param traceOutputChannel where the LSP message trace goes (trace.ts: the same channel, following
 *   `completer.trace.server` rather than VS Code's log level)
 */
export function createLanguageClient(
    hooks: ClientHooks,
    outputChannel: LogOutputChannel,
    traceOutputChannel: LogOutputChannel,
): ClientLike {
    const { command, args } = serverCommand(hooks.python);
    const serverOptions: ServerOptions = {
        command,
        args,
        transport: TransportKind.stdio,
        options: {
            // `python -m lsp` puts its working directory first on the import path. The client would use the
            // first workspace folder, so a workspace with its own `lsp/` or `completer/` package would run
            // instead of the server. Start from the extension's own directory, and on Python 3.11+ keep the
            // working directory off the path altogether.
            cwd: __dirname,
            env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONIOENCODING: 'utf-8', PYTHONSAFEPATH: '1' },
        },
    };
    const clientOptions: LanguageClientOptions = {
        documentSelector: documentSelector(hooks.getSettings().enabledLanguages),
        outputChannel,
        traceOutputChannel,
        revealOutputChannelOn: RevealOutputChannelOn.Never,
        // Evaluated at each (re)start of the server, so it always carries the current settings.
        initializationOptions: () => initializationOptions(hooks.getSettings()),
        middleware: createMiddleware({ getSettings: hooks.getSettings, onLatency: hooks.onLatency }),
    };
    const client = new LanguageClient(SERVER_ID, EXTENSION_NAME, serverOptions, clientOptions);

    // Report only what happens on its own after our start(): crashes and the client's automatic restarts.
    let started = false;
    client.onDidChangeState((event) => {
        if (!started) {
            return;
        }
        if (event.newState === State.Running) {
            hooks.onStateChange('running');
        } else if (event.newState === State.Stopped) {
            hooks.onStateChange('stopped');
        }
    });

    return {
        async start() {
            await client.start();
            started = true;
        },
        async stop() {
            started = false;
            if (client.state !== State.Stopped) {
                await client.stop(STOP_TIMEOUT_MS);
            }
            await client.dispose(STOP_TIMEOUT_MS).catch(() => undefined);
        },
        sendNotification(method, params) {
            return client.sendNotification(method, params);
        },
        sendRequest<R>(method: string, params?: unknown) {
            return client.sendRequest<R>(method, params);
        },
    };
}
