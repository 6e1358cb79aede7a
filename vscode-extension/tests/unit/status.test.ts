import { mock } from './mocks/install';
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { StatusBar } from '../../src/common/status';
import { StatusBarAlignment, ThemeColor } from './mocks/vscode';

describe('status bar', () => {
    beforeEach(() => mock.reset());

    test('is a visible toggle on the right', () => {
        const status = new StatusBar();
        const item = mock.statusItems[0];
        assert.equal(mock.statusItems.length, 1);
        assert.equal(item.visible, true);
        assert.equal(item.command, 'completer.toggle');
        assert.equal(item.alignment, StatusBarAlignment.Right);
        assert.equal(status.text, item.text);
    });

    test('shows the model name and the last latency', () => {
        const status = new StatusBar();
        const item = mock.statusItems[0];
        status.setState('starting');
        assert.match(item.text, /sync~spin/);
        status.setState('running');
        status.setModel('py-small-v1');
        assert.equal(item.text, '$(sparkle) py-small-v1');
        status.setLatency(41.6);
        assert.equal(item.text, '$(sparkle) py-small-v1 · 42 ms');
        assert.match(String(item.tooltip), /py-small-v1/);
        assert.match(String(item.tooltip), /42 ms/);
        assert.match(String(item.tooltip), /turn suggestions off/);
        status.setLatency(7);
        assert.equal(item.text, '$(sparkle) py-small-v1 · 7 ms');
    });

    test('a remote backend shows a cloud and says where the code goes', () => {
        const status = new StatusBar();
        const item = mock.statusItems[0];
        status.setState('running');
        status.setModel('qwen2.5-coder');
        status.setRemote('https://gpu.example.com/v1');
        assert.equal(item.text, '$(cloud) qwen2.5-coder');
        assert.match(String(item.tooltip), /https:\/\/gpu\.example\.com\/v1/);
        assert.match(String(item.tooltip), /sent there/);
        status.setRemote(undefined);
        assert.equal(item.text, '$(sparkle) qwen2.5-coder');
    });

    test('shows off when toggled off, and back on', () => {
        const status = new StatusBar();
        const item = mock.statusItems[0];
        status.setState('running');
        status.setModel('m');
        status.setEnabled(false);
        assert.equal(item.text, '$(circle-slash) m');
        assert.match(String(item.tooltip), /off/);
        assert.match(String(item.tooltip), /turn suggestions on/);
        status.setEnabled(true);
        assert.equal(item.text, '$(sparkle) m');
    });

    test('shows errors with the error background', () => {
        const status = new StatusBar();
        const item = mock.statusItems[0];
        status.setState('error', 'the server is not installed');
        assert.match(item.text, /\$\(error\)/);
        assert.match(String(item.tooltip), /not installed/);
        assert.ok(item.backgroundColor instanceof ThemeColor);
        assert.equal((item.backgroundColor as ThemeColor).id, 'statusBarItem.errorBackground');
        status.setState('running');
        assert.equal(item.backgroundColor, undefined);
    });

    test('forgets the latency when the server stops', () => {
        const status = new StatusBar();
        const item = mock.statusItems[0];
        status.setState('running');
        status.setLatency(12);
        status.setState('stopped');
        status.setState('running');
        assert.doesNotMatch(item.text, /ms/);
        status.dispose();
        assert.equal(item.disposed, true);
    });

    test('says when the active file is in a language the server does not answer in', () => {
        const status = new StatusBar();
        const item = mock.statusItems[0];
        status.setState('running');
        status.setModel('python-small');
        status.setActiveLanguage('javascript');
        assert.equal(item.text, '$(sparkle) python-small', 'the languages not known yet: no claim');
        status.setLanguages(['python']);
        assert.equal(item.text, '$(eye-closed) python-small · javascript');
        assert.match(String(item.tooltip), /no suggestions in javascript files: model python-small answers in python\./);
        assert.match(String(item.tooltip), /completer\.enabledLanguages/);
        assert.match(String(item.tooltip), /turn suggestions off/);
        assert.equal(status.unansweredLanguage, 'javascript');
        status.setLatency(12); // a suggestion in another window's Python file
        assert.equal(item.text, '$(eye-closed) python-small · javascript');
        status.setActiveLanguage('python');
        assert.equal(item.text, '$(sparkle) python-small · 12 ms');
        status.setActiveLanguage(undefined); // the output panel, a settings editor
        assert.equal(item.text, '$(sparkle) python-small · 12 ms');
        status.setActiveLanguage('javascript');
        status.setLanguages(['*']); // a converted model writes them all
        assert.equal(item.text, '$(sparkle) python-small · 12 ms');
        status.setLanguages(['python', 'javascript']);
        assert.equal(status.unansweredLanguage, undefined);
        status.setLanguages(['python']);
        status.setEnabled(false);
        assert.equal(item.text, '$(circle-slash) python-small', 'off everywhere says so first');
        assert.match(String(item.tooltip), /suggestions are off/);
        status.setEnabled(true);
        status.setState('error', 'the server stopped');
        assert.match(item.text, /\$\(error\)/, 'an error says so first');
    });

    test('says when completer.excludeFiles leaves the active file alone', () => {
        const status = new StatusBar();
        const item = mock.statusItems[0];
        status.setState('running');
        status.setModel('python-small');
        status.setExcluded('.env');
        assert.equal(item.text, '$(eye-closed) python-small · excluded');
        assert.match(String(item.tooltip), /no suggestions in this file, and nothing of it is read for other files:/);
        assert.match(String(item.tooltip), /matches "\.env" in completer\.excludeFiles/);
        status.setRemote('https://gpu.example.com/v1');
        assert.match(String(item.tooltip), /or sent to the endpoint/);
        status.setExcluded(undefined);
        assert.equal(item.text, '$(cloud) python-small');
        status.setExcluded('.env');
        status.setEnabled(false);
        assert.equal(item.text, '$(circle-slash) python-small', 'off everywhere says so first');
    });

    test('says when the suggestions cannot be seen, with the warning background', () => {
        const status = new StatusBar();
        const item = mock.statusItems[0];
        status.setState('running');
        status.setModel('py-small-v1');
        status.setLatency(12);
        status.setUnseen("VS Code's editor.inlineSuggest.enabled is off");
        assert.equal(item.text, '$(warning) py-small-v1 · hidden');
        assert.match(String(item.tooltip), /since VS Code's editor\.inlineSuggest\.enabled is off/);
        assert.match(String(item.tooltip), /completer\.completionItems/);
        assert.deepEqual(item.backgroundColor, new ThemeColor('statusBarItem.warningBackground'));
        status.setEnabled(false);
        assert.match(item.text, /circle-slash/, 'turned off on purpose says that');
        status.setEnabled(true);
        status.setUnseen(undefined);
        assert.equal(item.text, '$(sparkle) py-small-v1 · 12 ms');
        assert.equal(item.backgroundColor, undefined);
    });
});
