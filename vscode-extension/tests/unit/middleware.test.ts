import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createMiddleware, sectionValue } from '../../src/common/middleware';
import { DEFAULT_SETTINGS, ExtensionSettings, toServerSettings } from '../../src/common/settings';

const token = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose() {} }) } as any;
const cancelled = { isCancellationRequested: true, onCancellationRequested: () => ({ dispose() {} }) } as any;

function setup(overrides: Partial<ExtensionSettings> = {}) {
    const settings: ExtensionSettings = { ...DEFAULT_SETTINGS, ...overrides };
    const latencies: number[] = [];
    let clock = 1000;
    const middleware = createMiddleware({
        getSettings: () => settings,
        onLatency: (ms) => latencies.push(ms),
        now: () => clock,
    });
    return { middleware, settings, latencies, advance: (ms: number) => (clock += ms) };
}

describe('middleware', () => {
    test('times inline completions', async () => {
        const { middleware, latencies, advance } = setup();
        const items = [{ insertText: 'return x' }];
        const result = await middleware.provideInlineCompletionItems!(
            {} as any,
            {} as any,
            {} as any,
            token,
            async () => {
                advance(37);
                return items as any;
            },
        );
        assert.equal(result, items);
        assert.deepEqual(latencies, [37]);
    });

    test('does not report cancelled requests', async () => {
        const { middleware, latencies } = setup();
        await middleware.provideInlineCompletionItems!({} as any, {} as any, {} as any, cancelled, async () => null);
        assert.deepEqual(latencies, []);
    });

    test('drops inline completions when turned off', async () => {
        for (const overrides of [{ inlineCompletions: false }, { enabled: false }]) {
            const { middleware, latencies } = setup(overrides);
            let called = false;
            const result = await middleware.provideInlineCompletionItems!({} as any, {} as any, {} as any, token, async () => {
                called = true;
                return [];
            });
            assert.equal(result, null);
            assert.equal(called, false);
            assert.deepEqual(latencies, []);
        }
    });

    test('drops completion items when turned off, passes them otherwise', async () => {
        const list = { items: [{ label: 'x = 1' }], isIncomplete: false } as any;
        const on = setup({ completionItems: true });
        assert.equal(await on.middleware.provideCompletionItem!({} as any, {} as any, {} as any, token, async () => list), list);
        for (const overrides of [{ completionItems: false }, { enabled: false }]) {
            const off = setup(overrides);
            assert.equal(
                await off.middleware.provideCompletionItem!({} as any, {} as any, {} as any, token, async () => list),
                null,
            );
        }
    });

    test('answers workspace/configuration for completer with the server settings', async () => {
        const { middleware, settings } = setup({ beams: 2 });
        let forwarded: unknown;
        const result = await middleware.workspace!.configuration!(
            { items: [{ section: 'completer' }, { section: 'editor' }, { section: 'completer.beams' }] },
            token,
            async (params) => {
                forwarded = params;
                return [{ wrong: true }, { tabSize: 4 }, 99];
            },
        );
        assert.deepEqual(result, [toServerSettings(settings), { tabSize: 4 }, 2]);
        assert.ok(forwarded);
        const only = await middleware.workspace!.configuration!({ items: [{ section: 'completer' }] }, token, async () => {
            throw new Error('should not be asked');
        });
        assert.deepEqual(only, [toServerSettings(settings)]);
    });

    test('sectionValue', () => {
        const settings = { ...DEFAULT_SETTINGS };
        assert.equal(sectionValue('completer.maxTokens', settings), 24);
        assert.equal(sectionValue('completer.pythonPath', settings), undefined);
        assert.equal(sectionValue('python', settings), undefined);
        assert.equal(sectionValue(undefined, settings), undefined);
    });
});
