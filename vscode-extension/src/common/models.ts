// "Completer: Use a Model Already on This Machine": the models other tools downloaded (`completer models`:
// the Hugging Face cache, llama.cpp, Ollama, Tabby, LM Studio), one converted once into the extension's storage
// (`completer convert`), and completer.modelPath pointed at the bundle. Pure module (node built-ins only): the
// VS Code UI and the processes are passed in, so the flow is tested with fakes and with the real Python.

import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import type { Logger } from './manager';
import { execFileRunner, installCommand, Runner, RunResult } from './python';

/** One row of `completer models --json`. */
export interface LocalModel {
    /** What `completer convert` takes: ORG/NAME[:QUANT], ollama:NAME, tabby:ORG/NAME or a GGUF file's path. */
    id: string;
    store: string;
    kind: string | null;
    convertible: boolean;
    whyNot: string | null;
    /** How many weights, as model names give it (135M, 1.5B); null when the files' headers do not say. */
    size: string | null;
}

/** The models, and whether this interpreter has the convert extra `completer convert` needs. */
export type ListResult =
    | { ok: true; models: LocalModel[]; canConvert: boolean; unreadable: string[] }
    | { ok: false; detail: string };

/** The last line of a failed command's output: the CLI's one-line reason. */
function lastLine(result: RunResult): string {
    const lines = (result.stderr || result.stdout).trim().split(/\r?\n/);
    return result.spawnError || lines[lines.length - 1] || `exit code ${result.code}`;
}

/** `<python> -m completer models --json`, read into rows; never rejects. */
export async function listLocalModels(python: string, run: Runner = execFileRunner): Promise<ListResult> {
    const result = await run(python, ['-m', 'completer', 'models', '--json']);
    if (result.code !== 0) {
        return { ok: false, detail: lastLine(result) };
    }
    let rows: unknown;
    let canConvert = true;
    let unreadable: string[] = [];
    try {
        const listed = JSON.parse(result.stdout) as { models?: unknown; convert_extra?: unknown; unreadable?: unknown };
        rows = listed.models;
        canConvert = listed.convert_extra !== false;
        if (Array.isArray(listed.unreadable)) {
            unreadable = listed.unreadable.filter((folder): folder is string => typeof folder === 'string');
        }
    } catch (err) {
        return { ok: false, detail: `completer models printed no JSON (${String(err)})` };
    }
    if (!Array.isArray(rows)) {
        return { ok: false, detail: 'completer models printed no list of models' };
    }
    const models = rows
        .filter((row): row is Record<string, unknown> => !!row && typeof row === 'object' && typeof row.id === 'string')
        .map((row) => ({
            id: row.id as string,
            store: typeof row.store === 'string' ? row.store : '',
            kind: typeof row.model_type === 'string' ? row.model_type : null,
            convertible: row.convertible === true,
            whyNot: typeof row.why_not === 'string' ? row.why_not : null,
            size: typeof row.size === 'string' ? row.size : null,
        }));
    return { ok: true, models, canConvert, unreadable };
}

/** The folder a model is converted into: one per model, named after it, under the extension's storage. */
export function bundleFolder(storageDir: string, id: string): string {
    const name = id.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[-.]+|-+$/g, '') || 'model';
    return path.join(storageDir, 'models', name);
}

export interface PickItem {
    label: string;
    description?: string;
    detail?: string;
    /** What completer.modelPath becomes: null for the default model. */
    modelPath: string | null;
    /** Set when the model must be converted into modelPath first. */
    convert?: string;
}

/** The embedded bundles, then each model that converts (those already converted say so). */
export function pickItems(models: LocalModel[], storageDir: string, isBundle: (folder: string) => boolean): PickItem[] {
    const items: PickItem[] = [
        { label: 'python-small', description: 'embedded (the default)', modelPath: null },
        { label: 'python-base', description: 'embedded, reads the lines below the cursor', modelPath: 'python-base' },
    ];
    for (const model of models.filter((m) => m.convertible)) {
        const folder = bundleFolder(storageDir, model.id);
        const converted = isBundle(folder);
        items.push({
            label: model.id,
            description: [model.store, model.kind, model.size].filter(Boolean).join(' · '),
            detail: converted ? `converted: ${folder}` : `converted once into ${folder}`,
            modelPath: folder,
            convert: converted ? undefined : model.id,
        });
    }
    return items;
}

/** Runs a program until it ends or `signal` aborts it, passing each line it writes on stderr to `onLine`. */
export type LongRunner = (
    command: string,
    args: string[],
    onLine: (line: string) => void,
    signal: AbortSignal,
) => Promise<RunResult>;

/**
 * `spawn`, never rejecting. An abort sends SIGINT first, so `completer convert` removes what it had begun to
 * write, and kills the process if it is still there 5 s later.
 */
export const spawnRunner: LongRunner = (command, args, onLine, signal) =>
    new Promise((resolve) => {
        let stdout = '';
        let stderr = '';
        let pending = '';
        const child = spawn(command, args, { windowsHide: true, stdio: ['ignore', 'pipe', 'pipe'] });
        const stop = () => {
            child.kill('SIGINT');
            setTimeout(() => child.exitCode === null && child.kill('SIGKILL'), 5000).unref();
        };
        signal.addEventListener('abort', stop, { once: true });
        child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => {
            const text = chunk.toString();
            stderr += text;
            const lines = (pending + text).split(/[\r\n]+/);
            pending = lines.pop() ?? '';
            lines.filter((line) => line.trim()).forEach(onLine);
        });
        child.on('error', (err: NodeJS.ErrnoException) => {
            signal.removeEventListener('abort', stop);
            resolve({ code: null, stdout, stderr, spawnError: err.code || err.message });
        });
        child.on('close', (code) => {
            signal.removeEventListener('abort', stop);
            resolve({ code, stdout, stderr });
        });
    });

export interface ChooseDeps {
    /** The interpreter that runs the server. */
    python(): Promise<string>;
    /** The extension's own storage folder; converted bundles go in its `models/`. */
    storageDir: string;
    pick(items: PickItem[], placeholder: string): Thenable<PickItem | undefined>;
    /** Runs `task` under a cancellable progress notification titled `title`. */
    withProgress<T>(
        title: string,
        task: (report: (message: string) => void, signal: AbortSignal) => Promise<T>,
    ): Thenable<T>;
    /** Persist completer.modelPath; the configuration change then reaches the server. */
    setModelPath(value: string | null): Promise<void>;
    showError(message: string, ...actions: string[]): Thenable<string | undefined>;
    showInfo(message: string): Thenable<unknown>;
    copyToClipboard(text: string): Thenable<void>;
    log: Logger;
    /** The completer repository, when the extension runs from a checkout (for the install command). */
    repoDir?: string;
    run?: Runner;
    convert?: LongRunner;
}

const COPY_INSTALL = 'Copy Install Command';

/** True when `folder` holds a bundle's manifest. */
export function isBundleFolder(folder: string): boolean {
    return fs.existsSync(path.join(folder, 'manifest.json'));
}

/**
 * Lists the models, lets the user pick one, converts it if it has not been, and sets completer.modelPath.
 * Returns the modelPath set, or undefined when nothing changed (cancelled, or an error the user was shown).
 */
export async function chooseModel(deps: ChooseDeps): Promise<string | null | undefined> {
    const python = await deps.python();
    const listed = await listLocalModels(python, deps.run);
    if (!listed.ok) {
        deps.log.error(`completer models failed: ${listed.detail}`);
        void deps.showError(`Completer: could not list the models on this machine: ${listed.detail}`);
        return undefined;
    }
    const refused = listed.models.filter((m) => !m.convertible);
    refused.forEach((m) => deps.log.info(`Not offered: ${m.id} (${m.store}): ${m.whyNot ?? 'cannot be converted'}`));
    const items = pickItems(listed.models, deps.storageDir, isBundleFolder);
    const placeholder =
        items.length > 2
            ? 'A model to complete with (models other tools downloaded are converted once)'
            : 'No model another tool downloaded converts here (Hugging Face cache, Ollama, Tabby, LM Studio); the embedded ones';
    // a store this user cannot list (Linux's Ollama service keeps its own group-only): its models are missing here
    listed.unreadable.forEach((folder) => deps.log.warn(`Cannot read ${folder}; its models are not listed`));
    const more =
        (refused.length ? `; ${refused.length} more cannot be converted (see the log)` : '') +
        (listed.unreadable.length ? `; ${listed.unreadable.length} folder(s) could not be read (see the log)` : '');
    const chosen = await deps.pick(items, placeholder + more);
    if (!chosen) {
        return undefined;
    }
    if (chosen.convert !== undefined && !listed.canConvert) {
        const install = installCommand(python, deps.repoDir, undefined, 'convert');
        deps.log.error(`Converting ${chosen.convert} needs the convert extra: ${install}`);
        const action = await deps.showError(
            `Completer: converting ${chosen.convert} needs the convert extra in ${python}. Install it with: ${install}`,
            COPY_INSTALL,
        );
        if (action === COPY_INSTALL) {
            await deps.copyToClipboard(install);
        }
        return undefined;
    }
    if (chosen.convert !== undefined && chosen.modelPath !== null) {
        const converted = await convertInto(deps, python, chosen.convert, chosen.modelPath);
        if (!converted) {
            return undefined;
        }
    }
    await deps.setModelPath(chosen.modelPath);
    deps.log.info(`completer.modelPath set to ${chosen.modelPath ?? 'the default model'}`);
    return chosen.modelPath;
}

/**
 * Converts `id` into `folder`, unless a conversion into it is under way (in this window or another: they share the
 * storage folder), which is then said instead of starting a second one.
 */
async function convertInto(deps: ChooseDeps, python: string, id: string, folder: string): Promise<boolean> {
    fs.mkdirSync(path.dirname(folder), { recursive: true });
    if (!claimConversion(folder)) {
        deps.log.info(`Not converting ${id}: a conversion into ${folder} is under way`);
        void deps.showInfo(`Completer: ${id} is being converted already; pick it again once that conversion ends.`);
        return false;
    }
    try {
        if (isBundleFolder(folder)) {
            return true; // converted by another window since the models were listed
        }
        return await convertInWorkFolder(deps, python, id, folder);
    } finally {
        releaseConversion(folder);
    }
}

/** The conversion itself, under the lock on `folder`: the converter writes in a work folder of its own, removed
 *  afterwards with whatever a converter killed before its end left there. */
async function convertInWorkFolder(deps: ChooseDeps, python: string, id: string, folder: string): Promise<boolean> {
    const work = workFolderOf(folder);
    fs.rmSync(work, { recursive: true, force: true }); // a window closed mid-conversion left it; none runs now
    fs.mkdirSync(work);
    try {
        const made = path.join(work, path.basename(folder));
        const result = await runConverter(deps, python, id, made);
        if (result === undefined) {
            deps.log.info(`Converting ${id} was cancelled`);
            return false;
        }
        if (result.code !== 0 || !isBundleFolder(made)) {
            reportFailure(deps, id, result);
            return false;
        }
        putInPlace(made, folder);
    } finally {
        fs.rmSync(work, { recursive: true, force: true });
    }
    void deps.showInfo(`Completer: ${id} converted into ${folder}; suggestions now come from it.`);
    return true;
}

/** `completer convert` of `id` into `out` under a cancellable progress notification; undefined when cancelled. */
async function runConverter(deps: ChooseDeps, python: string, id: string, out: string): Promise<RunResult | undefined> {
    const run = deps.convert ?? spawnRunner;
    const args = ['-m', 'completer', 'convert', id, '--out', out, '--progress'];
    deps.log.info(`Running ${python} ${args.join(' ')}`);
    let cancelled = false;
    const result = await deps.withProgress(`Completer: converting ${id}`, (report, signal) => {
        signal.addEventListener('abort', () => (cancelled = true), { once: true });
        return run(
            python,
            args,
            (line) => {
                deps.log.info(`convert: ${line}`);
                report(line.length > 120 ? `${line.slice(0, 117)}...` : line);
            },
            signal,
        );
    });
    return cancelled ? undefined : result;
}

/** The converter's one-line reason, or that it was killed where it gave none (the OOM killer gives no chance). */
function reportFailure(deps: ChooseDeps, id: string, result: RunResult): void {
    const killed = result.code === null && !result.spawnError && !(result.stderr || result.stdout).trim();
    const detail = killed
        ? 'the converter was killed before its end (out of memory?)'
        : lastLine(result).replace(/^completer convert: /, '');
    deps.log.error(`Converting ${id} failed: ${detail}`);
    void deps.showError(`Completer: could not convert ${id}: ${detail}`);
}

/**
 * The folder a conversion into `folder` writes in, beside it: the converter stages the bundle and unpacks a GGUF
 * file beside its --out, so what one killed before its end leaves is there, and no other conversion's is
 * (completer/converted.py's `work_folder`, which the server converts in).
 */
function workFolderOf(folder: string): string {
    return path.join(path.dirname(folder), `.${path.basename(folder)}.work`);
}

/** The file whose presence says a conversion into `folder` is under way; it names the process that runs it. */
function lockFileOf(folder: string): string {
    return path.join(path.dirname(folder), `.${path.basename(folder)}.lock`);
}

/** Takes the lock on conversions into `folder`, unless a live process holds it; one left by a process that is gone
 *  (a window closed mid-conversion) is taken over. */
function claimConversion(folder: string): boolean {
    const lock = lockFileOf(folder);
    if (createLock(lock)) {
        return true;
    }
    if (holderAlive(lock)) {
        return false;
    }
    fs.rmSync(lock, { force: true });
    return createLock(lock);
}

function releaseConversion(folder: string): void {
    fs.rmSync(lockFileOf(folder), { force: true });
}

/** Creates `lock` naming this process; false when it exists. */
function createLock(lock: string): boolean {
    try {
        fs.writeFileSync(lock, String(process.pid), { flag: 'wx' });
        return true;
    } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
            return false;
        }
        throw err;
    }
}

/** Whether the process `lock` names still runs. An empty lock is being written (held); one unreadable for another
 *  reason than its removal counts as held too, so that a conversion is never run twice at once. */
function holderAlive(lock: string): boolean {
    let text: string;
    try {
        text = fs.readFileSync(lock, 'utf8').trim();
    } catch (err) {
        return (err as NodeJS.ErrnoException).code !== 'ENOENT';
    }
    if (text === '') {
        return true;
    }
    const pid = Number(text);
    if (!Number.isInteger(pid) || pid <= 0) {
        return false;
    }
    try {
        process.kill(pid, 0); // signal 0: whether it exists, sending nothing
        return true;
    } catch (err) {
        return (err as NodeJS.ErrnoException).code === 'EPERM'; // another user's process
    }
}

/**
 * The bundle `made` in the work folder becomes `folder`. Its manifest and model card record the command that made
 * it: they now name `folder`, not the work folder (neither file is among those the manifest checksums), as
 * completer/converted.py's `put_in_place` does.
 */
function putInPlace(made: string, folder: string): void {
    fs.renameSync(made, folder);
    for (const name of ['manifest.json', 'MODEL.md']) {
        const file = path.join(folder, name);
        try {
            const text = fs.readFileSync(file, 'utf8');
            const escaped = (p: string) => JSON.stringify(p).slice(1, -1); // as manifest.json spells a path
            fs.writeFileSync(file, text.split(escaped(made)).join(escaped(folder)).split(made).join(folder));
        } catch {
            // a file this converter did not write: nothing in it names the work folder
        }
    }
}
