// Latency a user sees in VS Code: from a keystroke (the keydown event's timestamp in the page) to the first
// DOM change that shows ghost text for the new line, measured in the page by a MutationObserver. This
// includes VS Code's own inline-suggest scheduling, the extension, the LSP round trip and the model.

import * as fs from 'node:fs';
import * as os from 'node:os';
import { execFileSync } from 'node:child_process';
import { log, sleep } from './harness.mjs';
import { clearLine, ghostState, openFile, waitForGhost, waitForStatus } from './workbench.mjs';

const INDENT = '    ';
/** Line starts typed in main(); the last character of each is the timed keystroke. */
const PREFIXES = [
    'for', 'total', 'ret', 'with', 'pri', 'lines', 'if ', 'path', 'count', 'res',
    'data', 'os.', 'words', 'val', 'text', 'fil', 'x = ', 'name', 'try', 'line',
];
const IDLE_MS = 700;
const TIMEOUT_MS = 5000;

/** In the page: wait for the next keydown, then for ghost text on a line that reads `expectedLine`. */
function arm({ expectedLine, timeoutMs }) {
    window.__completerBench = new Promise((resolve) => {
        let keyAt = null;
        let timer;
        const editor = document.querySelector('.monaco-editor.focused');
        const text = (el) => (el.textContent ?? '').replace(/\u00a0/g, ' ');
        const look = () => {
            if (keyAt === null) {
                return;
            }
            const spans = [...editor.querySelectorAll('.view-line .ghost-text-decoration')];
            if (!spans.length) {
                return;
            }
            const line = spans[0].closest('.view-line');
            const typed = [...line.querySelectorAll('span > span')]
                .filter((span) => !span.classList.contains('ghost-text-decoration')).map(text).join('');
            const ghost = spans.map(text).join('');
            if (typed === expectedLine && ghost.trim() !== '') {
                finish({ ms: performance.now() - keyAt, ghost });
            }
        };
        const observer = new MutationObserver(look);
        const onKey = (event) => {
            if (keyAt === null) {
                keyAt = event.timeStamp;
                timer = setTimeout(() => finish({ ms: null, ghost: null }), timeoutMs);
                setTimeout(look, 0);
            }
        };
        function finish(result) {
            observer.disconnect();
            window.removeEventListener('keydown', onKey, true);
            clearTimeout(timer);
            resolve(result);
        }
        window.addEventListener('keydown', onKey, true);
        observer.observe(editor, { subtree: true, childList: true, characterData: true, attributes: true });
    });
}

function percentile(sorted, p) {
    if (!sorted.length) {
        return null;
    }
    const rank = (p / 100) * (sorted.length - 1);
    const low = Math.floor(rank);
    const high = Math.ceil(rank);
    return +(sorted[low] + (sorted[high] - sorted[low]) * (rank - low)).toFixed(1);
}

function versionOf(command, args) {
    try {
        return execFileSync(command, args, { encoding: 'utf8' }).trim().split('\n')[0];
    } catch {
        return null;
    }
}

export async function runBench(session, { keystrokes, python }) {
    const page = session.page;
    await waitForStatus(page, (s) => s.label.includes('Completer: model'), 'the model', 60000);
    await openFile(page, 'sample.py');
    await page.keyboard.press('Control+End');
    // One suggestion first, so the document's context is in the server's cache as it would be while editing.
    await page.keyboard.type('for', { delay: 40 });
    await waitForGhost(page, { lineOk: (line) => line === INDENT + 'for' });
    await clearLine(page);

    // Two passes over the same line starts. "dismissed": Escape hides whatever ghost text the line start got,
    // so the timed keystroke needs a new suggestion (VS Code's inline-suggest scheduling, the extension, the LSP
    // round trip and the server). "shown": the ghost text stays, and when it already begins with the typed
    // character VS Code shows the rest at once (typed through) while it asks again.
    const passes = {};
    for (const pass of ['dismissed', 'shown']) {
        const samples = [];
        for (let i = 0; i < keystrokes; i++) {
            const prefix = PREFIXES[i % PREFIXES.length];
            await clearLine(page);
            await page.keyboard.type(prefix.slice(0, -1), { delay: 40 });
            await sleep(IDLE_MS); // whatever the earlier keys started has finished
            if (pass === 'dismissed') {
                await page.keyboard.press('Escape');
                await sleep(100);
            }
            const before = (await ghostState(page)).ghost;
            await page.evaluate(arm, { expectedLine: INDENT + prefix, timeoutMs: TIMEOUT_MS });
            await page.keyboard.press(prefix.at(-1) === ' ' ? 'Space' : prefix.at(-1));
            const result = await page.evaluate(() => window.__completerBench);
            if (result.ms === null) {
                log(`no ghost text for ${JSON.stringify(INDENT + prefix)}; the editor shows ${JSON.stringify(await ghostState(page))}`);
            }
            const typedThrough = before.length > 1 && before.startsWith(prefix.at(-1));
            samples.push({ prefix, ms: result.ms === null ? null : +result.ms.toFixed(1), ghost: result.ghost,
                ghost_before: before, typed_through: typedThrough });
            log(`${pass} ${JSON.stringify(prefix)}: ${result.ms === null ? 'no ghost text' : `${result.ms.toFixed(0)} ms`} ${JSON.stringify(result.ghost)}${typedThrough ? ' (typed through)' : ''}`);
        }
        const times = samples.filter((s) => s.ms !== null).map((s) => s.ms).sort((a, b) => a - b);
        passes[pass] = {
            keystrokes,
            with_ghost_text: times.length,
            typed_through: samples.filter((s) => s.typed_through).length,
            p50_ms: percentile(times, 50),
            p90_ms: percentile(times, 90),
            max_ms: times.length ? times.at(-1) : null,
            samples,
        };
    }
    await clearLine(page);

    const summary = Object.fromEntries(Object.entries(passes).map(([name, pass]) => [name,
        Object.fromEntries(Object.entries(pass).filter(([key]) => key !== 'samples'))]));
    return {
        what: 'ms from a keystroke (its keydown timestamp in the page) to the DOM change that shows ghost text for the new line; VS Code (code-server) in headless chromium. dismissed: Escape hid the ghost text before the keystroke, so a new suggestion is needed; shown: the ghost text stayed (typed through when it began with the typed character)',
        summary,
        passes: Object.fromEntries(Object.entries(passes).map(([name, pass]) => [name, pass.samples])),
        setup: {
            code_server: JSON.parse(fs.readFileSync(`${session.toolsDir}/node_modules/code-server/package.json`, 'utf8')).version,
            chromium: versionOf('/usr/bin/chromium', ['--version']),
            node: process.version,
            python: versionOf(python, ['--version']),
            cpus: os.cpus().length,
            cpu_model: os.cpus()[0]?.model ?? null,
            idle_ms_before_keystroke: IDLE_MS,
            settings: session.settings,
        },
    };
}

