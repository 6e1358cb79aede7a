// Language client middleware: drops suggestions that are turned off, times inline completions for the
// status bar, and answers the server's `workspace/configuration` pulls with the mapped settings.
// Only types come from vscode-languageclient, so this module loads without VS Code.

import type { Middleware } from 'vscode-languageclient';
import { CONFIG_SECTION, ExtensionSettings, toServerSettings } from './settings';

export interface MiddlewareOptions {
    getSettings(): ExtensionSettings;
    /** Called with the round trip of each inline completion request that was answered (not cancelled). */
    onLatency(ms: number): void;
    now?: () => number;
}

export function createMiddleware(options: MiddlewareOptions): Middleware {
    const now = options.now ?? (() => performance.now());
    return {
        provideInlineCompletionItems: async (document, position, context, token, next) => {
            const settings = options.getSettings();
            if (!settings.enabled || !settings.inlineCompletions) {
                return null;
            }
            const start = now();
            const result = await next(document, position, context, token);
            if (!token.isCancellationRequested) {
                options.onLatency(now() - start);
            }
            return result;
        },
        provideCompletionItem: (document, position, context, token, next) => {
            const settings = options.getSettings();
            if (!settings.enabled || !settings.completionItems) {
                return null;
            }
            return next(document, position, context, token);
        },
        workspace: {
            configuration: async (params, token, next) => {
                const ours = params.items.map((item) => sectionValue(item.section, options.getSettings()));
                if (ours.every((value) => value !== undefined)) {
                    return ours;
                }
                const theirs = await next(params, token);
                if (!Array.isArray(theirs)) {
                    return theirs;
                }
                return ours.map((value, i) => (value === undefined ? theirs[i] : value));
            },
        },
    };
}

/** `completer` → all server settings, `completer.beams` → one of them, anything else → undefined. */
export function sectionValue(section: string | undefined, settings: ExtensionSettings): unknown {
    if (section === CONFIG_SECTION) {
        return toServerSettings(settings);
    }
    if (section?.startsWith(CONFIG_SECTION + '.')) {
        const key = section.slice(CONFIG_SECTION.length + 1);
        const server = toServerSettings(settings) as unknown as Record<string, unknown>;
        return key in server ? server[key] : undefined;
    }
    return undefined;
}
