// Starts VS Code (code-server) with the completer extension and a fresh profile, opens it in Debian's
// chromium through playwright-core, and offers the workbench actions the checks need. Nothing is mocked:
// keystrokes go through chromium into VS Code, whose inline-suggest controller asks the extension, which
// asks the real language server.

import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

export const CHROMIUM = '/usr/bin/chromium';
/** Chromium as root needs --no-sandbox; the rest keep it off the (closed) network and quiet. */
const CHROMIUM_ARGS = [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-default-apps',
    '--disable-extensions',
    '--disable-dev-shm-usage', // containers often have a small /dev/shm
];

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function log(message) {
    process.stderr.write(`[e2e ${new Date().toISOString().slice(11, 23)}] ${message}\n`);
}

async function freePort() {
    return new Promise((resolve, reject) => {
        const server = net.createServer();
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => {
            const { port } = server.address();
            server.close(() => resolve(port));
        });
    });
}

/** Copy what the packaged extension holds (package.json and the esbuild bundle) into the extensions folder. */
function installExtension(extensionSource, extensionsDir) {
    const manifest = JSON.parse(fs.readFileSync(path.join(extensionSource, 'package.json'), 'utf8'));
    const bundle = path.join(extensionSource, 'dist', 'extension.js');
    if (!fs.existsSync(bundle)) {
        throw new Error(`${bundle} is missing: run \`npm run build\` in ${extensionSource}`);
    }
    const target = path.join(extensionsDir, `${manifest.publisher}.${manifest.name}-${manifest.version}`);
    fs.mkdirSync(target, { recursive: true });
    for (const file of ['package.json', 'README.md', 'LICENSE']) {
        fs.copyFileSync(path.join(extensionSource, file), path.join(target, file));
    }
    fs.cpSync(path.join(extensionSource, 'dist'), path.join(target, 'dist'), { recursive: true });
    return `${manifest.publisher}.${manifest.name}`;
}

/**
 * A code-server in its own process group with fresh user-data and extensions folders, and a chromium page
 * showing its workbench on `workspace`.
 */
export class Session {
    /**
     * @param settings user settings
     * @param machineSettings the remote machine's settings (user-data/Machine/settings.json): where settings of
     *   scope "machine" or "machine-overridable" such as completer.pythonPath take effect in code-server, whose
     *   window is a remote one (in its User settings they count only until the extension's schema is known)
     */
    constructor({ toolsDir, extensionSource, workspace, settings, machineSettings, root }) {
        this.toolsDir = toolsDir;
        this.extensionSource = extensionSource;
        this.workspace = workspace;
        this.settings = settings;
        this.machineSettings = machineSettings;
        this.root = root ?? fs.mkdtempSync(path.join(os.tmpdir(), 'completer-e2e-'));
        this.userDataDir = path.join(this.root, 'user-data');
        this.extensionsDir = path.join(this.root, 'extensions');
        this.serverLog = path.join(this.root, 'code-server.log');
        this.server = undefined;
        this.browser = undefined;
        this.page = undefined;
    }

    writeSettings() {
        for (const [folder, settings] of [['User', this.settings], ['Machine', this.machineSettings]]) {
            const file = path.join(this.userDataDir, folder, 'settings.json');
            fs.mkdirSync(path.dirname(file), { recursive: true });
            fs.writeFileSync(file, JSON.stringify(settings, null, 2));
        }
    }

    async start() {
        fs.mkdirSync(this.extensionsDir, { recursive: true });
        this.writeSettings();
        installExtension(this.extensionSource, this.extensionsDir);
        const configFile = path.join(this.root, 'code-server.yaml');
        fs.writeFileSync(configFile, 'auth: none\ncert: false\n');
        const port = await freePort();
        const entry = path.join(this.toolsDir, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
        const args = [
            entry,
            '--config', configFile,
            '--auth', 'none',
            '--bind-addr', `127.0.0.1:${port}`,
            '--user-data-dir', this.userDataDir,
            '--extensions-dir', this.extensionsDir,
            '--disable-telemetry',
            '--disable-update-check',
            '--disable-workspace-trust',
            '--disable-getting-started-override',
            '--disable-proxy',
            '--ignore-last-opened',
            this.workspace,
        ];
        const out = fs.openSync(this.serverLog, 'w');
        this.server = spawn(process.execPath, args, {
            detached: true, // its own process group: the extension host and our server are killed with it
            stdio: ['ignore', out, out],
            // Its config, heartbeat and logs stay in this session's folder, not in ~/.config and ~/.local/share.
            // A shared engine (where the server has one) that outlives the session ends soon after it.
            env: {
                ...process.env,
                XDG_CONFIG_HOME: path.join(this.root, 'xdg-config'),
                XDG_DATA_HOME: path.join(this.root, 'xdg-data'),
                COMPLETER_ENGINE_IDLE_EXIT_S: '5',
            },
        });
        fs.closeSync(out);
        // For whoever must clean up after a driver that was killed: the process group to end.
        fs.writeFileSync(path.join(this.root, 'code-server.pgid'), String(this.server.pid));
        this.url = `http://127.0.0.1:${port}/?folder=${encodeURIComponent(this.workspace)}`;
        await this.waitFor(() => fs.readFileSync(this.serverLog, 'utf8').includes('HTTP server listening'), 30000,
            'code-server to listen', () => fs.readFileSync(this.serverLog, 'utf8'));

        const require = createRequire(path.join(this.toolsDir, 'package.json'));
        const { chromium } = require('playwright-core');
        this.browser = await chromium.launch({
            executablePath: CHROMIUM,
            headless: true,
            chromiumSandbox: false,
            args: CHROMIUM_ARGS,
            timeout: 60000,
        });
        const context = await this.browser.newContext({ viewport: { width: 1280, height: 800 } });
        this.page = await context.newPage();
        this.page.setDefaultTimeout(30000);
        await this.page.goto(this.url, { waitUntil: 'domcontentloaded', timeout: 60000 });
        await this.page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
        log(`workbench loaded at ${this.url}`);
    }

    async waitFor(condition, timeoutMs, what, detail) {
        const deadline = Date.now() + timeoutMs;
        for (;;) {
            const value = await condition();
            if (value) {
                return value;
            }
            if (Date.now() > deadline) {
                throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}` + (detail ? `:\n${await detail()}` : ''));
            }
            await sleep(50);
        }
    }

    /** The Completer output channel's log file, which VS Code writes under the user-data folder. */
    completerLog() {
        const found = [];
        const walk = (dir) => {
            for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
                const full = path.join(dir, entry.name);
                if (entry.isDirectory()) {
                    walk(full);
                } else if (entry.name.endsWith('Completer.log')) {
                    found.push(full);
                }
            }
        };
        const logs = path.join(this.userDataDir, 'logs');
        if (fs.existsSync(logs)) {
            walk(logs);
        }
        return found.map((file) => fs.readFileSync(file, 'utf8')).join('\n');
    }

    async screenshot(file) {
        if (this.page) {
            fs.mkdirSync(path.dirname(file), { recursive: true });
            await this.page.screenshot({ path: file });
            log(`screenshot: ${file}`);
        }
    }

    async close() {
        try {
            await this.browser?.close();
        } catch (err) {
            log(`closing chromium: ${err}`);
        }
        if (this.server?.pid) {
            for (const signal of ['SIGTERM', 'SIGKILL']) {
                try {
                    process.kill(-this.server.pid, signal);
                } catch {
                    break; // the group is gone
                }
                await sleep(signal === 'SIGTERM' ? 1500 : 0);
            }
        }
    }
}
