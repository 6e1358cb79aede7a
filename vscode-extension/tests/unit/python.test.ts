import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import {
    checkServerInstalled,
    defaultPython,
    CHECKOUT_PLACEHOLDER,
    execFileRunner,
    execFileRunnerWithin,
    EXTERNALLY_MANAGED_EXIT,
    findRepoDir,
    IMPORT_CHECK,
    installCheckScript,
    installCommand,
    MIN_PYTHON,
    PYTHON_TOO_OLD_EXIT,
    PythonExtensionApi,
    resolveInterpreter,
    RunResult,
    serverCommand,
    SERVER_MODULES,
    venvInstall,
} from '../../src/common/python';

function pythonApi(activePath: string | undefined, executable?: string, fail = false): PythonExtensionApi {
    return {
        environments: {
            getActiveEnvironmentPath: () => (activePath ? { id: 'env', path: activePath } : undefined),
            resolveEnvironment: async () => {
                if (fail) {
                    throw new Error('cannot resolve');
                }
                return executable ? { executable: { uri: { fsPath: executable } } } : undefined;
            },
        },
    };
}

describe('interpreter resolution', () => {
    test('completer.pythonPath wins over the Python extension', async () => {
        let asked = false;
        const result = await resolveInterpreter({
            pythonPath: '/opt/py/bin/python',
            getPythonApi: async () => {
                asked = true;
                return pythonApi('/venv/bin/python');
            },
        });
        assert.deepEqual(result, { command: '/opt/py/bin/python', source: 'setting' });
        assert.equal(asked, false);
    });

    test("the Python extension's active interpreter is used when installed", async () => {
        const result = await resolveInterpreter({
            pythonPath: null,
            getPythonApi: async () => pythonApi('/venv', '/venv/bin/python'),
        });
        assert.deepEqual(result, { command: '/venv/bin/python', source: 'python-extension' });
    });

    test('falls back to the active path when the environment cannot be resolved', async () => {
        const logs: string[] = [];
        const result = await resolveInterpreter({
            pythonPath: null,
            getPythonApi: async () => pythonApi('/venv/bin/python', undefined, true),
            log: (m) => logs.push(m),
        });
        assert.deepEqual(result, { command: '/venv/bin/python', source: 'python-extension' });
        assert.equal(logs.length, 1);
    });

    test("an untrusted workspace's own interpreter is not run; one outside it, or once trusted, is", async () => {
        // A cloned repository's .venv, which the Python extension picks: its python (its site-packages, its .pth
        // files) would run the repository's code as the server before the user trusted the workspace.
        const logs: string[] = [];
        const inRepo = await resolveInterpreter({
            pythonPath: null,
            getPythonApi: async () => pythonApi('/src/repo/.venv', '/src/repo/.venv/bin/python'),
            untrustedFolders: ['/src/other', '/src/repo'],
            platform: 'linux',
            log: (m) => logs.push(m),
        });
        assert.deepEqual(inRepo, { command: 'python3', source: 'default' });
        const said = /Not running \/src\/repo\/\.venv\/bin\/python.* \/src\/repo, a folder of a workspace/;
        assert.match(logs.join('\n'), said);
        const elsewhere = await resolveInterpreter({
            pythonPath: null,
            getPythonApi: async () => pythonApi('/src/repo-venv', '/src/repo-venv/bin/python'),
            untrustedFolders: ['/src/repo'],
        });
        assert.deepEqual(elsewhere, { command: '/src/repo-venv/bin/python', source: 'python-extension' });
        const trusted = await resolveInterpreter({
            pythonPath: null,
            getPythonApi: async () => pythonApi('/src/repo/.venv', '/src/repo/.venv/bin/python'),
        });
        assert.deepEqual(trusted, { command: '/src/repo/.venv/bin/python', source: 'python-extension' });
    });

    test('python3 on PATH when neither is available', async () => {
        assert.deepEqual(await resolveInterpreter({ pythonPath: null, platform: 'linux' }), {
            command: 'python3',
            source: 'default',
        });
        assert.deepEqual(
            await resolveInterpreter({ pythonPath: null, getPythonApi: async () => undefined, platform: 'darwin' }),
            { command: 'python3', source: 'default' },
        );
        const broken = await resolveInterpreter({
            pythonPath: null,
            getPythonApi: async () => {
                throw new Error('activation failed');
            },
            platform: 'linux',
            log: () => undefined,
        });
        assert.equal(broken.source, 'default');
        assert.equal(defaultPython('win32'), 'python');
    });

    test('server command is <python> -m lsp', () => {
        assert.deepEqual(serverCommand('/venv/bin/python'), { command: '/venv/bin/python', args: ['-m', 'lsp'] });
    });
});

describe('install check', () => {
    const fake = (result: RunResult) => {
        const calls: string[][] = [];
        const run = async (command: string, args: string[]) => {
            calls.push([command, ...args]);
            return result;
        };
        return { run, calls };
    };

    test("runs `<python> -c` with the version check, then imports the server's modules", async () => {
        const { run, calls } = fake({ code: 0, stdout: '', stderr: '' });
        assert.deepEqual(await checkServerInstalled('/py', run), { ok: true });
        assert.deepEqual(calls, [['/py', '-c', IMPORT_CHECK]]);
        assert.ok(IMPORT_CHECK.includes(`\n    import ${SERVER_MODULES}\n`));
    });

    test('a real interpreter with the server installed passes', async () => {
        const python = process.env.COMPLETER_PYTHON || 'python3';
        assert.deepEqual(await checkServerInstalled(python, execFileRunner), { ok: true });
    });

    test("a real interpreter that has the server but not one of its dependencies fails, naming it", async () => {
        // The server's packages without pygls: `pip install --no-deps`, or pygls uninstalled since.
        const python = process.env.COMPLETER_PYTHON || 'python3';
        const blocker = fs.mkdtempSync(path.join(os.tmpdir(), 'no-pygls-'));
        fs.writeFileSync(path.join(blocker, 'sitecustomize.py'), "import sys\nsys.modules['pygls'] = None\n");
        const inherited = process.env.PYTHONPATH;
        const env = { ...process.env, PYTHONPATH: inherited ? `${blocker}${path.delimiter}${inherited}` : blocker };
        const withoutPygls = (command: string, args: string[]) =>
            new Promise<RunResult>((resolve) => {
                execFile(command, args, { env, timeout: 60_000 }, (error, stdout, stderr) =>
                    resolve({ code: error ? Number(error.code) : 0, stdout: String(stdout), stderr: String(stderr) }));
            });
        try {
            const result = await checkServerInstalled(python, withoutPygls);
            assert.equal(!result.ok && result.reason, 'not-installed', JSON.stringify(result));
            assert.match(!result.ok ? result.detail : '', /ModuleNotFoundError: .*pygls/);
        } finally {
            fs.rmSync(blocker, { recursive: true, force: true });
        }
    });

    test("a server missing from a Python its system manages (PEP 668) is told apart: pip refuses it", async () => {
        const missing = "ModuleNotFoundError: No module named 'lsp'\n";
        const { run } = fake({ code: EXTERNALLY_MANAGED_EXIT, stdout: '', stderr: missing });
        assert.deepEqual(await checkServerInstalled('python3', run), {
            ok: false,
            reason: 'externally-managed',
            detail: "ModuleNotFoundError: No module named 'lsp'",
        });
    });

    test("a real externally managed system Python without the server says so, and a venv of it does not", async (t) => {
        // Debian 12's /usr/bin/python3, where pip install -e would stop with externally-managed-environment
        const system = '/usr/bin/python3';
        const probe = 'import importlib.util, os, sys, sysconfig\n' +
            'managed = os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))\n' +
            'sys.exit(0 if managed and sys.prefix == sys.base_prefix and not importlib.util.find_spec("lsp") else 1)';
        const env = { ...process.env };  // the system's Python as a user starts it: no test's PYTHONPATH
        delete env.PYTHONPATH;
        delete env.PYTHONHOME;
        const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'managed-'));  // no checkout's lsp/ in the current folder
        try {
            execFileSync(system, ['-c', probe], { stdio: 'ignore', env, cwd });
        } catch {
            fs.rmSync(cwd, { recursive: true, force: true });
            t.skip(`${system} is not an externally managed Python without the server`);
            return;
        }
        const inCwd: typeof execFileRunner = (command, args) => new Promise((resolve) => {
            execFile(command, args, { cwd, env, timeout: 60_000 }, (error, stdout, stderr) =>
                resolve({ code: error ? Number(error.code) : 0, stdout: String(stdout), stderr: String(stderr) }));
        });
        try {
            const result = await checkServerInstalled(system, inCwd);
            assert.equal(!result.ok && result.reason, 'externally-managed', JSON.stringify(result));
            assert.match(!result.ok ? result.detail : '', /ModuleNotFoundError: No module named/);
            execFileSync(system, ['-m', 'venv', '--without-pip', path.join(cwd, 'venv')]);
            const inVenv = await checkServerInstalled(path.join(cwd, 'venv', 'bin', 'python'), inCwd);
            assert.equal(!inVenv.ok && inVenv.reason, 'not-installed', JSON.stringify(inVenv));
        } finally {
            fs.rmSync(cwd, { recursive: true, force: true });
        }
    });

    test('names the version of a Python too old for the server (pip would refuse to install it there)', async () => {
        const { run } = fake({ code: PYTHON_TOO_OLD_EXIT, stdout: '3.10.12\n', stderr: '' });
        assert.deepEqual(await checkServerInstalled('/usr/bin/python3', run), {
            ok: false,
            reason: 'python-too-old',
            detail: '3.10.12',
        });
        const other = fake({ code: PYTHON_TOO_OLD_EXIT, stdout: 'something else', stderr: 'Error: boom' });
        assert.deepEqual(await checkServerInstalled('/py', other.run), {
            ok: false,
            reason: 'not-installed',
            detail: 'Error: boom',
        });
    });

    test('a real interpreter below the minimum reports its own version', async () => {
        const python = process.env.COMPLETER_PYTHON || 'python3';
        const result = await checkServerInstalled(python, execFileRunner, installCheckScript([99, 0]));
        assert.equal(!result.ok && result.reason, 'python-too-old', JSON.stringify(result));
        assert.match(!result.ok ? result.detail : '', /^3\.\d+\.\d+$/);
    });

    test("the minimum is pyproject.toml's requires-python", () => {
        const pyproject = fs.readFileSync(path.join(__dirname, '..', '..', '..', '..', 'pyproject.toml'), 'utf8');
        assert.match(pyproject, new RegExp(`^requires-python = ">=${MIN_PYTHON.join('\\.')}"`, 'm'));
    });

    test('reports a missing module with the last line of the traceback', async () => {
        const { run } = fake({
            code: 1,
            stdout: '',
            stderr: "Traceback (most recent call last):\n  File \"<string>\", line 1\nModuleNotFoundError: No module named 'lsp'\n",
        });
        assert.deepEqual(await checkServerInstalled('/py', run), {
            ok: false,
            reason: 'not-installed',
            detail: "ModuleNotFoundError: No module named 'lsp'",
        });
    });

    test('a check that crashes the interpreter is no missing interpreter and no missing install', async () => {
        // What importing onnxruntime built for a newer CPU does: SIGILL, after the interpreter ran fine.
        const python = process.env.COMPLETER_PYTHON || 'python3';
        const crash = 'import os, signal, sys\nsys.stderr.write("Illegal instruction\\n"); sys.stderr.flush()\n' +
            'os.kill(os.getpid(), signal.SIGILL)';
        const result = await checkServerInstalled(python, execFileRunner, crash);
        const detail = 'was ended by SIGILL: Illegal instruction';
        assert.deepEqual(result, { ok: false, reason: 'check-failed', detail });
    });

    test('a check that hangs is said to have hung', async () => {
        const python = process.env.COMPLETER_PYTHON || 'python3';
        const result = await checkServerInstalled(python, execFileRunnerWithin(300), 'import time; time.sleep(30)');
        assert.deepEqual(result, { ok: false, reason: 'check-failed', detail: 'did not finish within 0.3 s' });
    });

    test('reports an interpreter that cannot be run', async () => {
        const result = await checkServerInstalled(path.join(os.tmpdir(), 'no-such-python-here'), execFileRunner);
        assert.equal(result.ok, false);
        assert.equal(!result.ok && result.reason, 'interpreter-missing');
        assert.equal(!result.ok && result.detail, 'ENOENT');
    });

    test('the real runner reports exit codes', async () => {
        const result = await execFileRunner(process.execPath, ['-e', 'process.stderr.write("boom\\n"); process.exit(3)']);
        assert.equal(result.code, 3);
        assert.equal(result.stderr, 'boom\n');
    });

    test('install command names the interpreter and the checkout', () => {
        // no checkout known: a placeholder for it, never a bare package name, which PyPI would resolve to whatever
        // someone else published under it
        assert.equal(installCommand('/venv/bin/python', undefined, 'linux'),
            `/venv/bin/python -m pip install -e ${CHECKOUT_PLACEHOLDER}`);
        assert.equal(installCommand('python3', '/src/completer', 'linux'), 'python3 -m pip install -e /src/completer');
        assert.equal(
            installCommand('/My Envs/python', '/src/my repo', 'linux'),
            "'/My Envs/python' -m pip install -e '/src/my repo'",
        );
        assert.equal(installCommand('C:\\Program Files\\Python\\python.exe', undefined, 'win32'),
            `"C:\\Program Files\\Python\\python.exe" -m pip install -e ${CHECKOUT_PLACEHOLDER}`);
        // with an optional extra, quoted so that no shell reads its brackets
        assert.equal(installCommand('python3', undefined, 'linux', 'convert'),
            `python3 -m pip install -e '${CHECKOUT_PLACEHOLDER}[convert]'`);
        assert.equal(installCommand('python3', '/src/completer', 'linux', 'convert'),
            "python3 -m pip install -e '/src/completer[convert]'");
    });

    test("for a Python pip refuses, a venv in the checkout (the quick start's .venv) and its interpreter", () => {
        assert.deepEqual(venvInstall('python3', '/src/completer', 'linux'), {
            command: 'python3 -m venv /src/completer/.venv && /src/completer/.venv/bin/python -m pip install -e ' +
                '/src/completer',
            python: '/src/completer/.venv/bin/python',
        });
        assert.deepEqual(venvInstall('/usr/bin/python3', '/src/my repo', 'linux'), {
            command: "/usr/bin/python3 -m venv '/src/my repo/.venv' && '/src/my repo/.venv/bin/python' -m pip " +
                "install -e '/src/my repo'",
            python: '/src/my repo/.venv/bin/python',
        });
        assert.equal(venvInstall('python3', undefined, 'linux').python, `${CHECKOUT_PLACEHOLDER}/.venv/bin/python`);
    });

    test('findRepoDir recognises the completer checkout around the extension', () => {
        const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'completer-repo-'));
        try {
            fs.mkdirSync(path.join(repo, 'vscode-extension'));
            assert.equal(findRepoDir(path.join(repo, 'vscode-extension')), undefined);
            fs.writeFileSync(path.join(repo, 'pyproject.toml'), '[project]\nname = "other"\n');
            assert.equal(findRepoDir(path.join(repo, 'vscode-extension')), undefined);
            fs.writeFileSync(path.join(repo, 'pyproject.toml'), '[project]\nname = "completer"\nversion = "0.1.0"\n');
            assert.equal(findRepoDir(path.join(repo, 'vscode-extension')), repo);
        } finally {
            fs.rmSync(repo, { recursive: true, force: true });
        }
    });

    test('findRepoDir: the checkout around the extension, none for one installed elsewhere', () => {
        const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'completer-repo-'));
        const installed = fs.mkdtempSync(path.join(os.tmpdir(), 'vscode-extensions-'));
        try {
            fs.writeFileSync(path.join(repo, 'pyproject.toml'), '[project]\nname = "completer"\n');
            fs.mkdirSync(path.join(repo, 'vscode-extension'));
            assert.equal(findRepoDir(path.join(repo, 'vscode-extension')), repo);
            const extensionDir = path.join(installed, 'completer-0.1.0'); // as `code --install-extension` puts it
            fs.mkdirSync(extensionDir);
            assert.equal(findRepoDir(extensionDir), undefined);
        } finally {
            fs.rmSync(repo, { recursive: true, force: true });
            fs.rmSync(installed, { recursive: true, force: true });
        }
    });

    test('the bundle records no path of the machine it was built on', () => {
        const extensionDir = path.resolve(__dirname, '..', '..', '..');
        const bundle = path.join(extensionDir, 'dist', 'extension.js');
        if (fs.existsSync(bundle)) { // `npm run build` made it (tests/test_vscode_extension.py runs it first)
            assert.ok(!fs.readFileSync(bundle, 'utf8').includes(path.dirname(extensionDir)));
        }
    });

    test('findRepoDir finds this repository', () => {
        const extensionDir = path.resolve(__dirname, '..', '..', '..');
        const repo = path.dirname(extensionDir);
        if (fs.existsSync(path.join(repo, 'pyproject.toml'))) {
            assert.equal(findRepoDir(extensionDir), repo);
        }
    });
});
