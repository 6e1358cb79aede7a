import { mock } from './mocks/install';
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import type { LogOutputChannel } from 'vscode';
import { LOG_LEVEL, TraceChannel, traceSetting } from '../../src/common/trace';
import { FakeLogOutputChannel } from './mocks/vscode';

describe('LSP trace channel', () => {
    beforeEach(() => mock.reset());

    function channel(initial: unknown) {
        const log = new FakeLogOutputChannel('Completer');
        let setting = initial;
        const trace = new TraceChannel(log as unknown as LogOutputChannel, () => setting);
        return { log, trace, set: (value: unknown) => (setting = value) };
    }

    test('reads only the known values of completer.trace.server', () => {
        assert.equal(traceSetting('messages'), 'messages');
        assert.equal(traceSetting('verbose'), 'verbose');
        assert.equal(traceSetting('bogus'), 'off');
        assert.equal(traceSetting(undefined), 'off');
    });

    test('"messages" writes trace lines to the channel at its default log level (Info)', () => {
        const { log, trace } = channel('messages');
        assert.equal(log.logLevel, 3); // VS Code's default: a LogOutputChannel's trace() would be dropped
        assert.equal(trace.logLevel, LOG_LEVEL.Trace); // so the client turns the server's trace on
        trace.trace("Sending request 'textDocument/inlineCompletion - (7)'.");
        assert.deepEqual(log.lines, ["[LSP] Sending request 'textDocument/inlineCompletion - (7)'."]);
        assert.equal(trace.name, 'Completer');
    });

    test('"off" traces nothing and tells the client its level is Off', () => {
        const { log, trace } = channel('off');
        assert.equal(trace.logLevel, LOG_LEVEL.Off);
        trace.trace('x');
        assert.deepEqual(log.lines, []);
    });

    test('a change of the setting reaches the client as a log level change, once', () => {
        const { log, trace, set } = channel('off');
        const seen: number[] = [];
        const subscription = trace.onDidChangeLogLevel((level) => seen.push(level));
        set('verbose');
        trace.refresh();
        trace.refresh();
        assert.deepEqual(seen, [LOG_LEVEL.Trace]);
        set('off');
        trace.refresh();
        assert.deepEqual(seen, [LOG_LEVEL.Trace, LOG_LEVEL.Off]);
        subscription.dispose();
        set('messages');
        trace.refresh();
        assert.equal(seen.length, 2);
        // The client's own info/warn/error lines still pass through.
        trace.warn('careful');
        assert.deepEqual(log.lines, ['[warn] careful']);
    });
});
