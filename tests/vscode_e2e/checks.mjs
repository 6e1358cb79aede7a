// The end-to-end checks, in the order a user meets them. Each throws with what it saw when it fails.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { log, sleep } from './harness.mjs';
import {
    clearLine,
    editorSettled,
    editSettings,
    ghostState,
    notificationHistory,
    notifications,
    openFile,
    runCommand,
    statusBar,
    waitForGhost,
    waitForStatus,
} from './workbench.mjs';

const MODEL = 'python-small';
const INDENT = '    ';
/** Line starts, ending inside a word, tried in turn for a suggestion that goes on with that word and more. */
const PREFIXES = ['pri', 'ret', 'tot', 'wit', 'lin', 'pat', 'res', 'fo', 'wor', 'cou'];

function check(condition, message) {
    if (!condition) {
        throw new Error(message);
    }
}

function pass(message) {
    console.log(`PASS ${message}`);
}

const running = (status) => status.label.includes(`Completer: model ${MODEL}`) && status.label.includes('turn suggestions off');

/** Lines of the Completer output channel (its log file) matching `pattern`. */
function logLines(session, pattern) {
    return session.completerLog().split('\n').filter((line) => pattern.test(line));
}

/** Type `prefix` on the cursor's (indented, otherwise empty) line and wait for ghost text after it. */
async function typeForGhost(page, prefix, timeoutMs = 15000) {
    await page.keyboard.type(prefix, { delay: 40 });
    return waitForGhost(page, { timeoutMs, lineOk: (line) => line === INDENT + prefix });
}

export async function runChecks(session, { python, artifacts, workspace }) {
    const page = session.page;
    const sampleFile = path.join(workspace, 'sample.py');

    // 1. The extension starts the server on start-up; wait until the status bar names the model.
    const ready = await waitForStatus(page, running, `"${MODEL}" while running`, 60000);
    pass(`status bar shows the model once the server is up: "${ready.text}"`);

    // 2. Open the file (which waits for VS Code's inline-suggest controller: see editorSettled) and type:
    //    ghost text, starting where the cursor is.
    await openFile(page, 'sample.py');
    await page.keyboard.press('Control+End');
    const first = await typeForGhost(page, 'for');
    check(first.focused, 'the editor lost the focus');
    check(Math.abs(first.ghostLeft - first.cursorLeft) <= 3,
        `the ghost text starts at x=${first.ghostLeft}, the cursor is at x=${first.cursorLeft}`);
    check(Math.abs(first.ghostTop - first.cursorTop) <= 20, `the ghost text is not on the cursor's line: ${JSON.stringify(first)}`);
    pass(`ghost text "${first.ghost}" after "${first.line}", starting at the cursor (x ${first.ghostLeft} vs ${first.cursorLeft})`);

    // 3. completer.trace.server "messages" writes the LSP trace to the Completer output channel.
    const requests = await session.waitFor(
        () => {
            const sent = logLines(session, /\[LSP\] Sending request 'textDocument\/inlineCompletion/);
            const received = logLines(session, /\[LSP\] Received response 'textDocument\/inlineCompletion/);
            return sent.length && received.length ? { sent, received } : null;
        },
        10000, 'inline completion requests in the Completer channel\'s trace',
        () => session.completerLog().slice(-3000),
    );
    check(logLines(session, /^(Params|Result): /).length === 0, '"messages" traced the messages\' contents');
    pass(`"messages" trace in the Completer channel: ${requests.sent.length} inline completion request(s) sent, e.g. ${requests.received.at(-1).trim()}`);

    // 4. The status bar shows the model and the last latency.
    const withLatency = await waitForStatus(page, (s) => new RegExp(`${MODEL} · \\d+ ms`).test(s.text), 'a latency');
    pass(`status bar: "${withLatency.text}"`);

    // 5. The ghost text is the server's: with the trace at "verbose" (changed live, in the settings.json editor), the
    //    response holding it is in the trace.
    session.settings = { ...session.settings, 'completer.trace.server': 'verbose' };
    await editSettings(page, session.settings);
    await session.waitFor(async () => {
        await clearLine(page);
        await page.keyboard.type('fo', { delay: 40 });
        await sleep(300);
        return logLines(session, /^Result: /).length > 0;
    }, 20000, 'a "verbose" trace after the setting changed');
    await clearLine(page);
    const traced = await typeForGhost(page, 'for');
    const escaped = JSON.stringify(traced.ghost.trimEnd()).slice(1, -1);
    await session.waitFor(() => session.completerLog().includes(escaped), 5000,
        `the ghost text ${JSON.stringify(traced.ghost)} in a traced response`, () => session.completerLog().slice(-3000));
    pass(`the ghost text ${JSON.stringify(traced.ghost)} is in the server's traced inlineCompletion result`);

    // 6. Tab accepts exactly the ghost text, and saving writes the line.
    const expected = traced.line + traced.ghost;
    await page.keyboard.press('Tab');
    const accepted = await session.waitFor(async () => {
        const state = await ghostState(page);
        return state.line === expected ? state : null;
    }, 5000, `the line to read "${expected}" after Tab`, async () => JSON.stringify(await ghostState(page)));
    await page.keyboard.press('Control+S');
    await session.waitFor(() => fs.readFileSync(sampleFile, 'utf8').split('\n').includes(expected), 10000,
        `"${expected}" in the saved file`, () => fs.readFileSync(sampleFile, 'utf8'));
    pass(`Tab accepted "${traced.ghost}"; the saved file has "${accepted.line}"`);

    // 6b. The line just accepted is not extended: no ghost text at its end until the next keystroke.
    await sleep(2000);
    const afterAccept = await ghostState(page);
    check(afterAccept.ghost === '', `ghost text "${afterAccept.ghost}" extends the line just accepted, "${afterAccept.line}"`);
    pass(`no ghost text extends the accepted line in 2 s`);

    // Back to the "messages" trace.
    session.settings = { ...session.settings, 'completer.trace.server': 'messages' };
    await editSettings(page, session.settings);

    // 7. Ctrl+Right accepts one word. VS Code's rule: up to the end of the word the ghost text starts with (or
    //    only up to the next word, when it starts with spaces or punctuation); so use a ghost text that goes on
    //    with a word and has more after it.
    await clearLine(page);
    let partial;
    for (const prefix of PREFIXES) {
        const state = await typeForGhost(page, prefix, 8000).catch(() => undefined);
        if (state && /^\w+\W+\w/.test(state.ghost)) {
            partial = state;
            break;
        }
        await clearLine(page);
    }
    check(partial, `no suggestion that goes on with a word and more after any of ${PREFIXES.join(', ')}`);
    const word = partial.ghost.match(/^\w+/)[0];
    await page.keyboard.press('Control+ArrowRight');
    const afterWord = await session.waitFor(async () => {
        const state = await ghostState(page);
        return state.line !== partial.line ? state : null;
    }, 5000, 'Ctrl+Right to accept a word');
    check(afterWord.line === partial.line + word,
        `Ctrl+Right made the line "${afterWord.line}" from "${partial.line}" with ghost "${partial.ghost}"; expected the word "${word}"`);
    pass(`Ctrl+Right accepted one word, "${word}", of "${partial.ghost}": the line reads "${afterWord.line}"`);

    // 8. Toggle stops suggestions, toggling again brings them back.
    await clearLine(page);
    await runCommand(page, 'Completer: Toggle Suggestions On/Off');
    const off = await waitForStatus(page, (s) => s.label.includes('suggestions are off'), 'suggestions off');
    await page.locator('.monaco-editor.focused').waitFor({ state: 'visible' });
    await page.keyboard.type('for', { delay: 40 });
    await sleep(2500);
    const none = await ghostState(page);
    check(none.ghost === '', `ghost text "${none.ghost}" while suggestions are off`);
    pass(`after Toggle the status bar reads "${off.text}" and "for" gets no ghost text in 2.5 s`);
    await clearLine(page);
    await runCommand(page, 'Completer: Toggle Suggestions On/Off');
    await waitForStatus(page, running, 'suggestions on again');
    await page.locator('.monaco-editor.focused').waitFor({ state: 'visible' });
    const back = await typeForGhost(page, 'for');
    pass(`after the second Toggle ghost text is back: "${back.ghost}"`);

    // 9. Restart Server starts a new server process, and suggestions come from it.
    const starts = logLines(session, /\] Starting: .* -m lsp/).length;
    await clearLine(page);
    await runCommand(page, 'Completer: Restart Server');
    await session.waitFor(() => logLines(session, /\] Starting: .* -m lsp/).length > starts, 20000, 'a new server start');
    await waitForStatus(page, running, 'the model after the restart', 60000);
    await page.locator('.monaco-editor.focused').waitFor({ state: 'visible' });
    const restarted = await typeForGhost(page, 'for');
    pass(`Restart Server started the server again (${starts} -> ${logLines(session, /\] Starting: .* -m lsp/).length} starts); ghost text "${restarted.ghost}"`);

    // No notification from Completer so far (an invalid setting, a crash, ...).
    const shown = (await notificationHistory(page)).filter((text) => /completer/i.test(text));
    check(shown.length === 0, `unexpected notifications: ${JSON.stringify(shown)}`);
    pass('no notification from Completer or its server on the way');
    await page.locator('.monaco-editor.focused').waitFor({ state: 'visible' });
    await clearLine(page);
    await typeForGhost(page, 'fo'); // the ghost text for the screenshot
    const screenshot = path.join(artifacts, 'vscode-ghost-text.png');
    await session.screenshot(screenshot);
    pass(`screenshot with ghost text: ${screenshot}`);

    // 8b. VS Code's own setting turns ghost text off in Python files: the status bar says the suggestions are hidden
    //     and why (the extension reads the setting in the language's scope), and no longer once it is back.
    session.settings = { ...session.settings, '[python]': { 'editor.inlineSuggest.enabled': false } };
    await editSettings(page, session.settings);
    const hidden = await waitForStatus(page,
        (s) => s.text.endsWith(`${MODEL} · hidden`) && s.label.includes('editor.inlineSuggest.enabled is off'),
        'hidden suggestions');
    const { '[python]': _hiddenInPython, ...withGhostText } = session.settings;
    session.settings = withGhostText;
    await editSettings(page, session.settings);
    await waitForStatus(page, running, 'suggestions shown again');
    pass(`with "[python]": {"editor.inlineSuggest.enabled": false} the status bar reads "${hidden.text}", ` +
        'and not after');

    // 9b. A file in a language the embedded model does not write: the status bar says it gets no suggestions.
    await openFile(page, 'notes.js');
    const unanswered = await waitForStatus(page,
        (s) => s.text.endsWith(`${MODEL} · javascript`) && s.label.includes('no suggestions in javascript files'),
        'javascript without suggestions');
    pass(`in notes.js the status bar reads "${unanswered.text}": "${unanswered.label.slice(0, 110)}"`);

    // 9c. A file completer.excludeFiles leaves alone (a pattern added to the defaults): the status bar says so and
    //     names the pattern (the extension asks the server with completer/fileInfo), and no longer once it is gone.
    session.settings = { ...session.settings, 'completer.excludeFiles': ['.env', 'vault/'] };
    await editSettings(page, session.settings);
    await openFile(page, 'vault_keys.py');
    const excluded = await waitForStatus(page,
        (s) => s.text.endsWith(`${MODEL} · excluded`)
            && s.label.includes('matches "vault/" in completer.excludeFiles'),
        'the excluded file');
    const { 'completer.excludeFiles': _vault, ...withDefaultExclusions } = session.settings;
    session.settings = withDefaultExclusions;
    await editSettings(page, session.settings);
    await openFile(page, 'vault_keys.py');
    await waitForStatus(page, running, 'the file no longer excluded');
    pass(`with "completer.excludeFiles": [".env", "vault/"] vault/vault_keys.py's status bar reads ` +
        `"${excluded.text}", and not after`);

    // 9d. A notebook: its last cell is completed with the cells above it, which define the name typed.
    await openFile(page, 'analysis.ipynb', { notebook: true });
    const lastCell = page.locator('.notebook-editor .code-cell-row .monaco-editor').last();
    await lastCell.waitFor({ state: 'visible', timeout: 20000 });
    await lastCell.click();
    await page.locator('.monaco-editor.focused').waitFor({ state: 'visible' });
    await editorSettled(page);
    await page.keyboard.press('Control+End');
    await page.keyboard.type('frob', { delay: 40 });
    const inCell = await waitForGhost(page, { lineOk: (line) => line === 'total = frob' });
    check(inCell.ghost.startsWith('nicate_the_widgets'), `the cell's ghost text is "${inCell.ghost}"`);
    check(logLines(session, /\[LSP\] Sending notification 'notebookDocument\/didOpen'/).length > 0,
        'no notebookDocument/didOpen in the trace');
    pass(`in a notebook's last cell "total = frob" gets "${inCell.ghost}", a name only the first cell defines`);

    // 10. "Use a Model Already on This Machine": a model in the Hugging Face cache (tests/test_vscode_e2e.py builds
    //     acme/tiny-coder there) is picked, converted into the extension's storage, and the server loads it; a
    //     converted model writes every language, so notes.js gets suggestions then.
    await runCommand(page, 'Completer: Use a Model Already on This Machine...');
    const picker = page.locator('.quick-input-widget input');
    await picker.waitFor({ state: 'visible', timeout: 60000 });
    await picker.fill('acme/tiny-coder');
    const row = page.locator('.quick-input-list .monaco-list-row').first();
    await session.waitFor(async () => ((await row.getAttribute('aria-label')) ?? '').includes('acme/tiny-coder'), 10000,
        'the cached model offered first', async () => row.getAttribute('aria-label'));
    await page.keyboard.press('Enter');
    const converted = await session.waitFor(async () => (await notifications(page)).find((text) => text.includes('converted into')),
        120000, 'the "converted" notification', async () => JSON.stringify(await notifications(page)));
    const switched = await waitForStatus(page, (s) => s.text.includes('acme-tiny-coder')
        && s.label.includes('Completer: model acme-tiny-coder'), 'the converted model', 60000);
    check(!switched.text.includes('javascript'), `with the converted model the status bar still reads "${switched.text}"`);
    pass(`a cached model converted and loaded: "${converted.trim().slice(0, 120)}"; in notes.js the status bar reads "${switched.text}"`);

    // 11. An interpreter without the server: the error notification names the install command.
    const bare = path.join(session.root, 'python-without-completer');
    fs.writeFileSync(bare, `#!/bin/sh\n# ${python} without site-packages or PYTHONPATH: completer is not importable\nexec "${python}" -I -S "$@"\n`,
        { mode: 0o755 });
    session.machineSettings = { ...session.machineSettings, 'completer.pythonPath': bare };
    await editSettings(page, session.machineSettings, { remote: true });
    const toast = await session.waitFor(async () => (await notifications(page)).find((text) => text.includes('not installed')),
        30000, 'the "not installed" notification', async () => JSON.stringify(await notifications(page)));
    // (where `python` is a venv of a system Python that pip refuses, such as Debian 12's, `-I -S` leaves that system
    // Python, for which the command makes a venv first)
    check(toast.includes(`Install it with: ${bare} -m pip install`) || toast.includes(`with: ${bare} -m venv `),
        `the notification lacks the install command: ${toast}`);
    const errorStatus = await waitForStatus(page, (s) => s.text.includes('error') || s.label.includes('error') || s.label.includes('not installed'),
        'the error state');
    await session.screenshot(path.join(artifacts, 'vscode-not-installed.png'));
    pass(`with a bad completer.pythonPath: "${toast.trim().slice(0, 200)}"; status bar "${errorStatus.label.slice(0, 80)}"`);
}
