// Finding the Python interpreter that runs the server, and checking the server is installed in it.
// Pure module (node built-ins only): the Python extension and process spawning are passed in.

import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

export const PYTHON_EXTENSION_ID = 'ms-python.python';

/** The part of the ms-python.python extension API (`exports.environments`) that we use. */
export interface PythonEnvironmentsApi {
    getActiveEnvironmentPath(resource?: unknown): { id: string; path: string } | undefined;
    resolveEnvironment(
        environment: { id: string; path: string } | string,
    ): Promise<{ executable: { uri?: { fsPath: string } } } | undefined>;
    onDidChangeActiveEnvironmentPath?: (listener: (event: unknown) => unknown) => { dispose(): unknown };
}

export interface PythonExtensionApi {
    environments: PythonEnvironmentsApi;
}

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface Interpreter {
    command: string;
    source: InterpreterSource;
}

export function defaultPython(platform: NodeJS.Platform = process.platform): string {
    return platform === 'win32' ? 'python' : 'python3';
}

export interface ResolveOptions {
    /** `completer.pythonPath`, already expanded; null when unset. */
    pythonPath: string | null;
    /** Returns the Python extension's API when that extension is installed (activating it), else undefined. */
    getPythonApi?: () => Promise<PythonExtensionApi | undefined>;
    /** Workspace folder (or document) URI to ask the Python extension about. */
    resource?: unknown;
    /** The workspace folders' paths while VS Code does not trust the workspace: an interpreter inside one (a
     *  `.venv` the repository brought) is a program of the repository's, not run until the workspace is trusted. */
    untrustedFolders?: readonly string[];
    platform?: NodeJS.Platform;
    log?: (message: string) => void;
}

/** Whether `file` lies in `folder` (or is it), by their absolute paths. */
function isInside(file: string, folder: string): boolean {
    const relative = path.relative(path.resolve(folder), path.resolve(file));
    return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/** `completer.pythonPath`, else the Python extension's active interpreter (unless the workspace, untrusted, holds
 *  it), else python3 on PATH. */
export async function resolveInterpreter(options: ResolveOptions): Promise<Interpreter> {
    if (options.pythonPath) {
        return { command: options.pythonPath, source: 'setting' };
    }
    if (options.getPythonApi) {
        try {
            const api = await options.getPythonApi();
            const envs = api?.environments;
            const active = envs?.getActiveEnvironmentPath(options.resource);
            if (envs && active) {
                let executable: string | undefined;
                try {
                    const resolved = await envs.resolveEnvironment(active);
                    executable = resolved?.executable?.uri?.fsPath;
                } catch (err) {
                    options.log?.(`Python extension could not resolve ${active.path}: ${String(err)}`);
                }
                executable = executable || active.path;
                const inside = executable && options.untrustedFolders?.find((folder) => isInside(executable!, folder));
                if (inside) {
                    options.log?.(
                        `Not running ${executable}, the Python extension's interpreter: it lies in ${inside}, a ` +
                            'folder of a workspace VS Code does not trust (trust it to use it)',
                    );
                } else if (executable) {
                    return { command: executable, source: 'python-extension' };
                }
            }
        } catch (err) {
            options.log?.(`Python extension API unavailable: ${String(err)}`);
        }
    }
    return { command: defaultPython(options.platform), source: 'default' };
}

/** Command line of the server: `<python> -m lsp` (the same as `completer serve`). */
export function serverCommand(python: string): { command: string; args: string[] } {
    return { command: python, args: ['-m', 'lsp'] };
}

export interface RunResult {
    /** Exit code, or null when the process could not be started or was killed. */
    code: number | null;
    stdout: string;
    stderr: string;
    /** Set when the program could not be started at all (e.g. ENOENT). */
    spawnError?: string;
    /** The signal that ended it: its time limit's, or a crash's (SIGILL: a package built for another CPU). */
    signal?: string;
    /** Its time limit, when it was killed at it. */
    timedOutMs?: number;
}

export type Runner = (command: string, args: string[]) => Promise<RunResult>;

/** How long `execFileRunner` lets a program run. */
export const RUN_LIMIT_MS = 60_000;

type ExecError = NodeJS.ErrnoException & { code?: string | number; killed?: boolean; signal?: string | null };

/** A runner that gives a program `limitMs` and never rejects. */
export function execFileRunnerWithin(limitMs: number): Runner {
    return (command, args) => new Promise((resolve) => {
        execFile(command, args, { timeout: limitMs, windowsHide: true }, (error, stdout, stderr) => {
            const err = error as ExecError | null;
            if (!err) {
                resolve({ code: 0, stdout: String(stdout), stderr: String(stderr) });
            } else if (typeof err.code === 'number') {
                resolve({ code: err.code, stdout: String(stdout), stderr: String(stderr) });
            } else if (err.killed) {
                const signal = err.signal ?? undefined;
                resolve({ code: null, stdout: String(stdout), stderr: String(stderr), signal, timedOutMs: limitMs });
            } else if (err.signal) {
                resolve({ code: null, stdout: String(stdout), stderr: String(stderr), signal: err.signal });
            } else {
                resolve({ code: null, stdout: String(stdout ?? ''), stderr: String(stderr ?? ''), spawnError: err.code || err.message });
            }
        });
    });
}

/** Runs a program with RUN_LIMIT_MS, never rejecting. */
export const execFileRunner: Runner = execFileRunnerWithin(RUN_LIMIT_MS);

/** The oldest Python the server runs on: pyproject.toml's `requires-python` (onnxruntime 1.32 and the graphs
 *  need it). */
export const MIN_PYTHON: readonly [number, number] = [3, 11];

/** The exit code of `installCheckScript` in a Python older than its minimum, after it printed its version. */
export const PYTHON_TOO_OLD_EXIT = 86;

/** The exit code of `installCheckScript` where the server is missing from a Python that its system manages (PEP 668's
 *  EXTERNALLY-MANAGED: Debian 12, Ubuntu 23.04 and later), outside any venv: pip refuses to install into it. */
export const EXTERNALLY_MANAGED_EXIT = 87;

/** The modules the check imports: the server's own, which import every runtime dependency (pygls, onnxruntime,
 *  tokenizers, ...), so an install that has the server but not all of them is caught here, with the install
 *  command, rather than as a server that dies at start. */
export const SERVER_MODULES = 'lsp.server, lsp.worker, completer.engine';

/** The check run in the interpreter: its version first (pip refuses to install the server into an older Python,
 *  so the install command would not help there), then the server's modules; where they are missing, whether pip
 *  would refuse that interpreter too, as the system's own (a venv's is never). */
export function installCheckScript(minimum: readonly [number, number] = MIN_PYTHON): string {
    return [
        'import sys',
        `if sys.version_info < (${minimum[0]}, ${minimum[1]}): ` +
            `print("%d.%d.%d" % sys.version_info[:3]); sys.exit(${PYTHON_TOO_OLD_EXIT})`,
        'try:',
        `    import ${SERVER_MODULES}`,
        'except ImportError:',
        '    import os, sysconfig, traceback',
        '    traceback.print_exc()',
        '    managed = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")',
        `    sys.exit(${EXTERNALLY_MANAGED_EXIT} if sys.prefix == sys.base_prefix and os.path.isfile(managed) else 1)`,
    ].join('\n');
}

export const IMPORT_CHECK = installCheckScript();

export type InstallCheck =
    | { ok: true }
    | { ok: false; reason: InstallProblem; detail: string };

export type InstallProblem =
    'interpreter-missing' | 'not-installed' | 'externally-managed' | 'python-too-old' | 'check-failed';

/** Runs `installCheckScript` in `python`: can it run the server, and does it have it? For a Python too old,
 *  `detail` is its version; for a check that hung or crashed (`check-failed`), how it ended. */
export async function checkServerInstalled(
    python: string,
    run: Runner = execFileRunner,
    script: string = IMPORT_CHECK,
): Promise<InstallCheck> {
    const result = await run(python, ['-c', script]);
    if (result.spawnError) {
        return { ok: false, reason: 'interpreter-missing', detail: result.spawnError };
    }
    if (result.timedOutMs !== undefined || result.signal) {
        // Not a missing install: the import hung (a network drive, a lock) or crashed the interpreter.
        const lines = result.stderr.trim().split(/\r?\n/).filter((line) => line.trim());
        const how = result.timedOutMs !== undefined
            ? `did not finish within ${result.timedOutMs / 1000} s` : `was ended by ${result.signal}`;
        const detail = lines.length ? `${how}: ${lines[lines.length - 1]}` : how;
        return { ok: false, reason: 'check-failed', detail };
    }
    if (result.code === 0) {
        return { ok: true };
    }
    const version = result.stdout.trim();
    if (result.code === PYTHON_TOO_OLD_EXIT && /^\d+\.\d+\.\d+$/.test(version)) {
        return { ok: false, reason: 'python-too-old', detail: version };
    }
    const lines = result.stderr.trim().split(/\r?\n/);
    const reason = result.code === EXTERNALLY_MANAGED_EXIT ? 'externally-managed' : 'not-installed';
    return { ok: false, reason, detail: lines[lines.length - 1] || `exit code ${result.code}` };
}

function quote(arg: string, platform: NodeJS.Platform): string {
    if (/^[\w@%+=:,./\\-]+$/.test(arg)) {
        return arg;
    }
    return platform === 'win32' ? `"${arg}"` : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** What an install command names where no checkout of the repository is known. */
export const CHECKOUT_PLACEHOLDER = '/path/to/completer';

/**
 * The exact command that installs the server into `python`: an editable install of the repository's checkout
 * (CHECKOUT_PLACEHOLDER where none is known: the server is not published on PyPI, so a bare package name there
 * would install whatever someone else published under it); with `extra`, that optional extra too (`convert`
 * for `completer convert`).
 */
export function installCommand(
    python: string,
    repoDir?: string,
    platform: NodeJS.Platform = process.platform,
    extra?: string,
): string {
    const wanted = extra ? `[${extra}]` : '';
    const checkout = quote((repoDir ?? CHECKOUT_PLACEHOLDER) + wanted, platform);
    return `${quote(python, platform)} -m pip install -e ${checkout}`;
}

/**
 * Where pip refuses `python` (its system manages it), the commands that make a venv of it in the checkout, `.venv`
 * (where the README's quick start, `bash scripts/demo.sh`, makes one on such a system), and install the server
 * there; and that venv's interpreter, for `completer.pythonPath`.
 */
export function venvInstall(
    python: string,
    repoDir?: string,
    platform: NodeJS.Platform = process.platform,
): { command: string; python: string } {
    const checkout = repoDir ?? CHECKOUT_PLACEHOLDER;
    const venv = `${checkout}/.venv`;
    const venvPython = `${venv}/bin/python`;
    const command = `${quote(python, platform)} -m venv ${quote(venv, platform)} && ` +
        `${quote(venvPython, platform)} -m pip install -e ${quote(checkout, platform)}`;
    return { command, python: venvPython };
}

/** The completer repository around the extension (…/repo/vscode-extension), if the extension runs from one. An
 *  extension installed from a .vsix knows of none (the bundle records no folder it was built in: that would put the
 *  builder's paths into every copy of it), so its install commands name CHECKOUT_PLACEHOLDER. */
export function findRepoDir(
    extensionPath: string,
    fileSystem: Pick<typeof fs, 'readFileSync'> = fs,
): string | undefined {
    const candidate = path.dirname(extensionPath);
    try {
        const pyproject = fileSystem.readFileSync(path.join(candidate, 'pyproject.toml'), 'utf8');
        return /^\s*name\s*=\s*["']completer["']/m.test(pyproject) ? candidate : undefined;
    } catch {
        return undefined;
    }
}
