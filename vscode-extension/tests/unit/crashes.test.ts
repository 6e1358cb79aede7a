import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gaveUpReason, RestartPolicy, startFailure, StderrTail } from '../../src/common/crashes';

describe('a server that stops on its own', () => {
    test('is restarted four times within three minutes, then not again; older stops no longer count', () => {
        let now = 0;
        const policy = new RestartPolicy(4, 180_000, () => now);
        assert.deepEqual([1, 2, 3, 4, 5].map(() => policy.shouldRestart()), [true, true, true, true, false]);
        now = 180_001; // the first four stops are more than three minutes old
        assert.equal(policy.shouldRestart(), true);
    });

    test("the message quotes the server's last line on stderr, else the client's error", () => {
        const tail = new StderrTail();
        assert.equal(startFailure('write EPIPE', tail), 'write EPIPE');
        assert.equal(gaveUpReason(new RestartPolicy(), tail),
            'the server stopped 5 times within 3 minutes and is not restarted again');
        tail.push('Traceback (most recent call last):');
        tail.push("ModuleNotFoundError: No module named 'lsprotocol'");
        tail.push('   ');
        assert.equal(startFailure('write EPIPE', tail), "ModuleNotFoundError: No module named 'lsprotocol'");
        assert.match(gaveUpReason(new RestartPolicy(), tail), /; its last output: ModuleNotFoundError/);
        tail.push('x'.repeat(1000));
        assert.equal(tail.lastLine?.length, 301);
        tail.clear();
        assert.equal(tail.lastLine, undefined);
    });
});
