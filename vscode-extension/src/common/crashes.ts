// What happens when the server's process ends on its own: restart it a few times, then give up, and say why
// in one message. Pure module (no `vscode` import): server.ts wires it into the language client.

/** Restarts allowed within RESTART_WINDOW_MS before giving up (vscode-languageclient's own default policy). */
export const MAX_RESTARTS = 4;
export const RESTART_WINDOW_MS = 3 * 60 * 1000;

/** Whether a server that stopped on its own is started again: up to `max` times within `windowMs`. */
export class RestartPolicy {
    private readonly restarts: number[] = [];

    constructor(
        readonly max = MAX_RESTARTS,
        readonly windowMs = RESTART_WINDOW_MS,
        private readonly now: () => number = Date.now,
    ) {}

    /** Called once per stop; true when this one is restarted (and counted), false once the limit is reached. */
    shouldRestart(): boolean {
        const time = this.now();
        while (this.restarts.length && time - this.restarts[0] > this.windowMs) {
            this.restarts.shift();
        }
        if (this.restarts.length >= this.max) {
            return false;
        }
        this.restarts.push(time);
        return true;
    }
}

/** Longest line of the server's output a message quotes. */
const MAX_QUOTED = 300;

/** The server's last line on stderr, kept to say why it stopped (a Python traceback ends with the exception). */
export class StderrTail {
    private last: string | undefined;

    push(line: string): void {
        const trimmed = line.trim();
        if (trimmed !== '') {
            this.last = trimmed.length > MAX_QUOTED ? `${trimmed.slice(0, MAX_QUOTED)}…` : trimmed;
        }
    }

    /** Forget what an earlier process wrote: a new one starts. */
    clear(): void {
        this.last = undefined;
    }

    get lastLine(): string | undefined {
        return this.last;
    }
}

/** Why the server did not start, for the one message the user sees: its own last words when it wrote any (the
 *  client's error is then only "write EPIPE" or "connection got disposed"), else the client's error. */
export function startFailure(clientError: string, tail: StderrTail): string {
    return tail.lastLine ?? clientError;
}

/** Why the server is not restarted again after it stopped `max + 1` times in the window. */
export function gaveUpReason(policy: RestartPolicy, tail: StderrTail): string {
    const minutes = Math.round(policy.windowMs / 60000);
    const times = `the server stopped ${policy.max + 1} times within ${minutes} minutes and is not restarted again`;
    return tail.lastLine === undefined ? times : `${times}; its last output: ${tail.lastLine}`;
}
