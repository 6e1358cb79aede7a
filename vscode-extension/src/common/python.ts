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
    platform?: NodeJS.Platform;
    log?: (message: string) => void;
}

/** `completer.pythonPath`, else the Python extension's active interpreter, else python3 on PATH. */
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
                if (executable) {
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
}

export type Runner = (command: string, args: string[]) => Promise<RunResult>;

/** Runs a program with a time limit, never rejecting. */
export const execFileRunner: Runner = (command, args) =>
    new Promise((resolve) => {
        execFile(command, args, { timeout: 60_000, windowsHide: true }, (error, stdout, stderr) => {
            const err = error as (NodeJS.ErrnoException & { code?: string | number; killed?: boolean }) | null;
            if (!err) {
                resolve({ code: 0, stdout: String(stdout), stderr: String(stderr) });
            } else if (typeof err.code === 'number') {
                resolve({ code: err.code, stdout: String(stdout), stderr: String(stderr) });
            } else if (err.killed) {
                resolve({ code: null, stdout: String(stdout), stderr: String(stderr) || 'timed out' });
            } else {
                resolve({ code: null, stdout: String(stdout ?? ''), stderr: String(stderr ?? ''), spawnError: err.code || err.message });
            }
        });
    });

export const IMPORT_CHECK = 'import lsp, completer';

export type InstallCheck =
    | { ok: true }
    | { ok: false; reason: 'interpreter-missing' | 'not-installed'; detail: string };

/** `<python> -c "import lsp, completer"`: does this interpreter have the server? */
export async function checkServerInstalled(python: string, run: Runner = execFileRunner): Promise<InstallCheck> {
    const result = await run(python, ['-c', IMPORT_CHECK]);
    if (result.spawnError) {
        return { ok: false, reason: 'interpreter-missing', detail: result.spawnError };
    }
    if (result.code === 0) {
        return { ok: true };
    }
    const lines = result.stderr.trim().split(/\r?\n/);
    return { ok: false, reason: 'not-installed', detail: lines[lines.length - 1] || `exit code ${result.code}` };
}

function quote(arg: string, platform: NodeJS.Platform): string {
    if (/^[\w@%+=:,./\\-]+$/.test(arg)) {
        return arg;
    }
    return platform === 'win32' ? `"${arg}"` : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * The exact command that installs the server into `python`: an editable install of the repository when the
 * extension runs from a checkout (or a repository is known), else the `completer` package; with `extra`, that
 * optional extra too (`convert` for `completer convert`).
 */
export function installCommand(
    python: string,
    repoDir?: string,
    platform: NodeJS.Platform = process.platform,
    extra?: string,
): string {
    const wanted = extra ? `[${extra}]` : '';
    const target = repoDir ? `-e ${quote(repoDir + wanted, platform)}` : quote(`completer${wanted}`, platform);
    return `${quote(python, platform)} -m pip install ${target}`;
}

/** The completer repository around the extension (…/repo/vscode-extension), if the extension runs from one. */
export function findRepoDir(extensionPath: string, fileSystem: Pick<typeof fs, 'readFileSync'> = fs): string | undefined {
    const candidate = path.dirname(extensionPath);
    try {
        const pyproject = fileSystem.readFileSync(path.join(candidate, 'pyproject.toml'), 'utf8');
        return /^\s*name\s*=\s*["']completer["']/m.test(pyproject) ? candidate : undefined;
    } catch {
        return undefined;
    }
}
