// What the checks read from and do to VS Code's workbench: the focused editor's ghost text and cursor, the
// Completer status bar item, notifications, the command palette and Quick Open. Everything is read from the
// DOM that the user sees.

import { sleep } from './harness.mjs';

export const STATUS_ITEM = '[id="completer.completer.completer.status"]';

/**
 * The focused editor's ghost text (Monaco's inline suggestion, `.ghost-text-decoration` spans) and the line
 * it is on, without it; plus the cursor's and the ghost text's left edges in pixels. `ghost` is '' when none.
 */
export async function ghostState(page) {
    return page.evaluate(() => {
        const editor = document.querySelector('.monaco-editor.focused') ?? document.querySelector('.monaco-editor');
        const text = (el) => (el.textContent ?? '').replace(/\u00a0/g, ' ');
        const cursor = editor?.querySelector('.cursors-layer .cursor');
        const cursorRect = cursor?.getBoundingClientRect();
        const spans = editor ? [...editor.querySelectorAll('.view-line .ghost-text-decoration')] : [];
        const lineOfCursor = () => {
            if (!editor || !cursorRect) {
                return undefined;
            }
            const middle = cursorRect.top + cursorRect.height / 2;
            return [...editor.querySelectorAll('.view-line')].find((line) => {
                const rect = line.getBoundingClientRect();
                return rect.top <= middle && middle < rect.bottom;
            });
        };
        const line = spans.length ? spans[0].closest('.view-line') : lineOfCursor();
        const lineSpans = line ? [...line.querySelectorAll('span > span')] : [];
        return {
            ghost: spans.map(text).join(''),
            line: lineSpans.filter((span) => !span.classList.contains('ghost-text-decoration')).map(text).join(''),
            ghostLeft: spans.length ? spans[0].getBoundingClientRect().left : null,
            ghostTop: spans.length ? spans[0].getBoundingClientRect().top : null,
            cursorLeft: cursorRect ? cursorRect.left : null,
            cursorTop: cursorRect ? cursorRect.top : null,
            focused: Boolean(document.querySelector('.monaco-editor.focused')),
            // False while no editor has the focus or its cursor is not drawn (a tab closing, a frame mid-render):
            // `line` then reads '' whatever the line holds.
            lineFound: Boolean(line) && Boolean(document.querySelector('.monaco-editor.focused')),
        };
    });
}

/** Wait for ghost text on the cursor's line whose typed part (the line without it) satisfies `lineOk`. */
export async function waitForGhost(page, { timeoutMs = 15000, lineOk = () => true } = {}) {
    const deadline = Date.now() + timeoutMs;
    let state;
    while (Date.now() < deadline) {
        state = await ghostState(page);
        if (state.ghost.trim() !== '' && lineOk(state.line)) {
            return state;
        }
        await sleep(30);
    }
    throw new Error(`no ghost text within ${timeoutMs} ms; last state ${JSON.stringify(state)}`);
}

/** The Completer status bar item's text (codicons dropped) and its accessible label (which holds the tooltip). */
export async function statusBar(page) {
    const item = page.locator(STATUS_ITEM);
    if ((await item.count()) === 0) {
        return { text: '', label: '' };
    }
    // Text and label in one read: two reads can straddle a render and pair the old text with the new label.
    return item.evaluate((element) => ({
        text: (element.textContent ?? '').replace(/\u00a0/g, ' ').trim(),
        label: element.getAttribute('aria-label') ?? '',
    }));
}

export async function waitForStatus(page, predicate, what, timeoutMs = 30000) {
    const deadline = Date.now() + timeoutMs;
    let status;
    while (Date.now() < deadline) {
        status = await statusBar(page);
        if (predicate(status)) {
            return status;
        }
        await sleep(50);
    }
    throw new Error(`status bar never showed ${what} within ${timeoutMs} ms; last ${JSON.stringify(status)}`);
}

/** The texts of the notification toasts on screen. */
export async function notifications(page) {
    return page.locator('.notifications-toasts .notification-toast').evaluateAll((toasts) =>
        toasts.map((toast) => (toast.textContent ?? '').replace(/\u00a0/g, ' ')),
    );
}

/** The texts of every notification so far, from the notification center (toasts hide after a while). */
export async function notificationHistory(page) {
    await runCommand(page, 'Notifications: Show Notifications');
    const center = page.locator('.notifications-center');
    await center.waitFor({ state: 'visible' });
    await sleep(200);
    const texts = await center.locator('.notification-list-item-message').evaluateAll((items) =>
        items.map((item) => (item.textContent ?? '').replace(/\u00a0/g, ' ')),
    );
    await runCommand(page, 'Notifications: Hide Notifications');
    await center.waitFor({ state: 'hidden' });
    return texts;
}

/** Run a command by its title from the command palette (F1), as a user would. */
export async function runCommand(page, title) {
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible' });
    await input.fill(`>${title}`);
    const first = page.locator('.quick-input-list .monaco-list-row').first();
    await first.waitFor({ state: 'visible' });
    const deadline = Date.now() + 10000;
    while (!((await first.getAttribute('aria-label')) ?? '').includes(title)) {
        if (Date.now() > deadline) {
            throw new Error(`the command palette does not offer "${title}" first: ${await first.getAttribute('aria-label')}`);
        }
        await sleep(50);
    }
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget').waitFor({ state: 'hidden' });
}

/** Open a workspace file with Quick Open (Ctrl+P) and wait until its editor has the focus (a notebook's tab
 *  only, with `notebook`: no cell editor has the focus until one is clicked). */
export async function openFile(page, name, { notebook = false } = {}) {
    await page.keyboard.press('Control+P');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible' });
    await input.fill(name);
    const first = page.locator('.quick-input-list .monaco-list-row').first();
    await first.waitFor({ state: 'visible' });
    const deadline = Date.now() + 10000;
    while (!((await first.getAttribute('aria-label')) ?? '').includes(name)) {
        if (Date.now() > deadline) {
            throw new Error(`Quick Open does not offer ${name}`);
        }
        await sleep(50);
    }
    await page.keyboard.press('Enter');
    await page.locator(`.tab.active[aria-label*="${name}"]`).waitFor({ state: 'visible' });
    if (!notebook) {
        await page.locator('.monaco-editor.focused').waitFor({ state: 'visible' });
    }
    await editorSettled(page);
}

/**
 * Wait for the page's next idle time. VS Code creates an editor's inline-suggest controller (an "Eventually"
 * editor contribution) only when the window is first idle after the editor opens, at the latest 5 s later;
 * keystrokes before that reach no controller and ask for no inline completion at all, and the controller,
 * once made, waits for the next edit. Idle callbacks run in the order they were asked for, so when ours
 * runs, VS Code's has run.
 */
export async function editorSettled(page) {
    await page.evaluate(() => new Promise((resolve) => requestIdleCallback(() => resolve(undefined), { timeout: 10000 })));
}

/** The focused editor's cursor line, once one is drawn (at most `timeoutMs` later). */
async function focusedLine(page, timeoutMs = 5000) {
    const deadline = Date.now() + timeoutMs;
    let state = await ghostState(page);
    while (!state.lineFound) {
        if (Date.now() > deadline) {
            throw new Error(`no focused editor with a cursor line: ${JSON.stringify(state)}`);
        }
        await sleep(20);
        state = await ghostState(page);
    }
    return state.line;
}

/** The cursor line's text once it differs from `before` (the editor renders edits a frame later). */
async function lineAfter(page, before, timeoutMs = 2000) {
    const deadline = Date.now() + timeoutMs;
    let line = await focusedLine(page);
    while (line === before && Date.now() < deadline) {
        await sleep(20);
        line = await focusedLine(page);
    }
    return line;
}

/** Make the cursor's line read `indent` and nothing else, with the cursor at its end. */
export async function clearLine(page, indent = '    ') {
    await page.keyboard.press('Escape');
    // Each round deletes up to the indentation, or on a blank line the indentation itself. The line is read only
    // from a focused editor with its cursor drawn: any other read says '' and would end the rounds early.
    let line = await focusedLine(page);
    for (let round = 0; round < 3 && line !== ''; round++) {
        await page.keyboard.press('End');
        await page.keyboard.press('Shift+Home');
        await page.keyboard.press('Backspace');
        line = await lineAfter(page, line);
    }
    await page.keyboard.insertText(indent);
    line = await lineAfter(page, line);
    if (line !== indent) {
        throw new Error(`could not clear the line: it reads ${JSON.stringify(line)}`);
    }
}

/**
 * Replace the user settings (or with `remote`, the machine's) as a user would: "Preferences: Open User
 * Settings (JSON)", select all, type, save, close. (code-server does not notice a write to the file from
 * outside.)
 */
export async function editSettings(page, settings, { remote = false } = {}) {
    await runCommand(page, remote ? 'Preferences: Open Remote Settings (JSON)' : 'Preferences: Open User Settings (JSON)');
    const tab = page.locator('.tab.active[aria-label*="settings.json"]');
    await tab.waitFor({ state: 'visible' });
    await page.locator('.monaco-editor.focused').waitFor({ state: 'visible' });
    await page.keyboard.press('Control+A');
    await page.keyboard.insertText(JSON.stringify(settings));
    const typed = await page.evaluate(() => document.querySelector('.monaco-editor.focused .view-lines')?.textContent ?? '');
    if (typed.replace(/\u00a0/g, ' ').trim() !== JSON.stringify(settings)) {
        throw new Error(`settings.json reads ${typed}, not what was typed: ${JSON.stringify(settings)}`);
    }
    await page.keyboard.press('Control+S');
    await page.locator('.tab.active.dirty[aria-label*="settings.json"]').waitFor({ state: 'detached' });
    await page.keyboard.press('Control+W');
    await tab.waitFor({ state: 'detached' });
    await page.locator('.monaco-editor.focused').waitFor({ state: 'visible' });
}
