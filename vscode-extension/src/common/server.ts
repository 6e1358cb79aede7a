// The real language client (vscode-languageclient). This is the only module that imports it, since it
// subclasses vscode classes when loaded; everything it needs is computed by the unit-tested modules.

import * as readline from 'readline';
import type { Readable } from 'stream';
import type { LogOutputChannel } from 'vscode';
import {
    CloseAction,
    CloseHandlerResult,
    ErrorAction,
    LanguageClient,
    LanguageClientOptions,
    RevealOutputChannelOn,
    ServerOptions,
    State,
    TransportKind,
} from 'vscode-languageclient/node';
import { EXTENSION_NAME, SERVER_ID } from './constants';
import { gaveUpReason, RestartPolicy, startFailure, StderrTail } from './crashes';
import type { ClientHooks, ClientLike } from './manager';
import { errorText } from './manager';
import { createMiddleware } from './middleware';
import { serverCommand } from './python';
import { documentSelector, initializationOptions } from './settings';

const STOP_TIMEOUT_MS = 3000;
/** How long a failure waits for the server's last stderr lines, which may arrive after its connection closed. */
const STDERR_GRACE_MS = 1000;

/**
 * The client, with its own error notifications written to the log only: the manager shows one message, with the
 * server's own last words. (Left to itself, the client shows five to seventeen popups for a server that exits as it
 * starts: each restart's "couldn't create connection", "connection to server is erroring", "write EPIPE", ...)
 */
class QuietLanguageClient extends LanguageClient {
    override error(message: string, data?: unknown, _showNotification?: boolean | 'force'): void {
        super.error(message, data, false);
    }

    /** A start that fails rejects, always: when the server's connection closes before its `initialize` fails, the
     *  client resolves start() instead, and leaves its own promise of the start rejected and unobserved. */
    override async start(): Promise<void> {
        const starting = super.start();
        (this as unknown as { _onStart?: Promise<void> })._onStart?.catch(() => undefined);
        await starting;
        if (this.state !== State.Running) {
            throw new Error(`the server stopped as it started (the client is ${State[this.state]})`);
        }
    }

    /** The client stops a server whose start failed (`void this.stop()`), which it refuses to do while starting:
     *  that refusal is logged, not left an unhandled rejection. Its process is still killed if alive. */
    override stop(timeout?: number): Promise<void> {
        return super.stop(timeout).catch((err) => {
            if (this.state !== State.Starting && this.state !== State.StartFailed) {
                throw err;
            }
            this.debug(`Not stopping a server that did not start: ${errorText(err)}`);
        });
    }
}

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
    const tail = new StderrTail();
    let stderrClosed: Promise<void> = Promise.resolve();
    const policy = new RestartPolicy();
    let started = false; // by our start(), until our stop(): a stop meanwhile is the server's own doing
    let gaveUp = false;
    let connectionFailed: string | undefined; // the error for which the client stopped the server
    let failed = false; // stopped for good, and said so
    const lines = (input: Readable, write: (line: string) => void) =>
        readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on('line', write);
    const clientOptions: LanguageClientOptions = {
        documentSelector: documentSelector(hooks.getSettings().enabledLanguages),
        outputChannel,
        traceOutputChannel,
        revealOutputChannelOn: RevealOutputChannelOn.Never,
        // Evaluated at each (re)start of the server, so it always carries the current settings.
        initializationOptions: () => initializationOptions(hooks.getSettings()),
        middleware: createMiddleware({ getSettings: hooks.getSettings, onLatency: hooks.onLatency }),
        // Each server process's stderr goes to the channel, as the client's default does, and its last line is kept.
        stdioOptions: {
            stdout: (input, channel) => void lines(input, (line) => channel.info(line)),
            stderr: (input, channel) => {
                tail.clear();
                stderrClosed = new Promise((resolve) => lines(input, (line) => {
                    tail.push(line);
                    channel.error(line);
                }).once('close', resolve));
            },
        },
        initializationFailedHandler: () => false, // not the client's popup of the error: start() rejects with it
        errorHandler: {
            // A pipe that failed (EPIPE, a destroyed stream: errors with a code) is a server that exited: its close
            // says why, and restarts it. Output that is no LSP message is a server gone wrong: stopped, said once.
            error: (error) => {
                if (!started || typeof (error as NodeJS.ErrnoException).code === 'string') {
                    return { action: ErrorAction.Continue, handled: true };
                }
                connectionFailed = errorText(error).split('\n')[0];
                return { action: ErrorAction.Shutdown, handled: true };
            },
            closed: (): CloseHandlerResult => {
                if (!started || client.state === State.Starting) {
                    return { action: CloseAction.DoNotRestart, handled: true }; // start() fails, and says why
                }
                if (policy.shouldRestart()) {
                    return { action: CloseAction.Restart, message: 'The server stopped: starting it again',
                        handled: true };
                }
                gaveUp = true;
                return { action: CloseAction.DoNotRestart, message: 'The server stopped too often', handled: true };
            },
        },
    };
    const client = new QuietLanguageClient(SERVER_ID, EXTENSION_NAME, serverOptions, clientOptions);
    /** The server's stderr read to its end, or STDERR_GRACE_MS passed. */
    const stderrRead = () =>
        Promise.race([stderrClosed, new Promise<void>((resolve) => {
            setTimeout(resolve, STDERR_GRACE_MS).unref?.();
        })]);

    // Report only what happens on its own after our start(): crashes, the client's automatic restarts, and a
    // server that stopped for good (too often, or a restart that failed).
    client.onDidChangeState((event) => {
        if (!started) {
            return;
        }
        if (event.newState === State.Running) {
            failed = false;
            hooks.onStateChange('running');
        } else if (failed) {
            return; // told already (a failed start passes through StartFailed more than once)
        } else if (gaveUp || connectionFailed !== undefined || event.newState === State.StartFailed) {
            failed = true;
            const reason = gaveUp ? () => gaveUpReason(policy, tail)
                : connectionFailed !== undefined ? () => `the connection to the server failed: ${connectionFailed}`
                    : () => `the server stopped and did not start again: ${startFailure('see the logs', tail)}`;
            void stderrRead().then(() => {
                if (started) {
                    hooks.onStateChange('failed', reason());
                }
            });
        } else if (event.newState === State.Stopped) {
            hooks.onStateChange('stopped');
        }
    });

    return {
        async start() {
            try {
                await client.start();
            } catch (err) {
                await stderrRead();
                throw new Error(startFailure(errorText(err), tail));
            }
            started = true;
        },
        async stop() {
            started = false;
            if (client.state !== State.Stopped && client.state !== State.StartFailed) {
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
