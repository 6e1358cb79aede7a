// The LSP message trace, written to the Completer output channel when `completer.trace.server` says so.
//
// vscode-languageclient 10 traces only while its trace channel's log level is Trace: `trace.server` then
// picks the verbosity, but with VS Code's log level at its default (Info) nothing is traced at all, and
// the lines it would write go through `channel.trace()`, which an Info-level channel drops. This channel,
// given to the client as `traceOutputChannel`, reports the log level Trace exactly when the setting is not
// "off" (so the client turns the server's trace on and off with the setting) and writes each trace line to
// the Completer channel at the level that channel shows.

import type { Disposable, Event, LogOutputChannel, ViewColumn } from 'vscode';

/** vscode.LogLevel's values (stable API): the client compares the channel's level with Trace only. */
export const LOG_LEVEL = { Off: 0, Trace: 1 } as const;

export type TraceSetting = 'off' | 'messages' | 'compact' | 'verbose';

export function traceSetting(value: unknown): TraceSetting {
    return value === 'messages' || value === 'compact' || value === 'verbose' ? value : 'off';
}

export class TraceChannel implements LogOutputChannel {
    private level: number;
    private readonly listeners = new Set<(level: number) => unknown>();

    /**
     * @param log the Completer output channel, which the trace lines go to
     * @param readSetting the current value of `completer.trace.server`
     */
    constructor(
        private readonly log: LogOutputChannel,
        private readonly readSetting: () => unknown,
    ) {
        this.level = this.levelFor(readSetting());
    }

    get name(): string {
        return this.log.name;
    }

    get logLevel(): number {
        return this.level;
    }

    readonly onDidChangeLogLevel: Event<number> = (listener, thisArgs?, disposables?) => {
        const bound = (level: number) => listener.call(thisArgs, level);
        this.listeners.add(bound);
        const subscription: Disposable = { dispose: () => void this.listeners.delete(bound) } as Disposable;
        disposables?.push(subscription);
        return subscription;
    };

    /** Read `completer.trace.server` again (call on configuration changes); tells the client if it flipped. */
    refresh(): void {
        const level = this.levelFor(this.readSetting());
        if (level !== this.level) {
            this.level = level;
            for (const listener of [...this.listeners]) {
                listener(level);
            }
        }
    }

    trace(message: string): void {
        if (this.level === LOG_LEVEL.Trace) {
            this.log.appendLine(`[LSP] ${message}`);
        }
    }

    debug(message: string, ...args: any[]): void {
        this.log.debug(message, ...args);
    }

    info(message: string, ...args: any[]): void {
        this.log.info(message, ...args);
    }

    warn(message: string, ...args: any[]): void {
        this.log.warn(message, ...args);
    }

    error(error: string | Error, ...args: any[]): void {
        this.log.error(error, ...args);
    }

    append(value: string): void {
        this.log.append(value);
    }

    appendLine(value: string): void {
        this.log.appendLine(value);
    }

    replace(value: string): void {
        this.log.replace(value);
    }

    clear(): void {
        this.log.clear();
    }

    show(columnOrPreserveFocus?: ViewColumn | boolean, preserveFocus?: boolean): void {
        if (typeof columnOrPreserveFocus === 'boolean' || columnOrPreserveFocus === undefined) {
            this.log.show(columnOrPreserveFocus);
        } else {
            this.log.show(columnOrPreserveFocus, preserveFocus);
        }
    }

    hide(): void {
        this.log.hide();
    }

    /** The Completer channel belongs to the extension, not to one client: only the listeners go. */
    dispose(): void {
        this.listeners.clear();
    }

    private levelFor(setting: unknown): number {
        return traceSetting(setting) === 'off' ? LOG_LEVEL.Off : LOG_LEVEL.Trace;
    }
}
