import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import {
    DEFAULT_EXCLUDED,
    DEFAULT_SETTINGS,
    unseenBecause,
    didChangeConfigurationParams,
    documentSelector,
    expandPath,
    readModelPath,
    ExtensionSettings,
    initializationOptions,
    needsRestart,
    readSettings,
    SERVER_SETTING_KEYS,
    serverSettingsChanged,
    toServerSettings,
} from '../../src/common/settings';

const root = path.resolve(__dirname, '..', '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const properties: Record<string, { default: unknown; type: unknown }> = manifest.contributes.configuration.properties;

function reader(values: Record<string, unknown>) {
    return { get: <T>(key: string) => values[key] as T | undefined };
}

/** What VS Code's getConfiguration('completer') returns when the user changed nothing. */
function manifestDefaults(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [key, schema] of Object.entries(properties)) {
        out[key.replace(/^completer\./, '')] = schema.default;
    }
    return out;
}

describe('settings', () => {
    test('defaults in package.json match DEFAULT_SETTINGS', () => {
        assert.deepEqual(readSettings(reader(manifestDefaults())), { ...DEFAULT_SETTINGS });
        for (const key of Object.keys(DEFAULT_SETTINGS)) {
            assert.ok(`completer.${key}` in properties, `package.json lacks completer.${key}`);
        }
    });

    test('every server setting is contributed in package.json', () => {
        for (const key of SERVER_SETTING_KEYS) {
            assert.ok(`completer.${key}` in properties, key);
        }
        assert.deepEqual(properties['completer.modelPath'].type, ['string', 'null']);
        assert.deepEqual(properties['completer.enabledLanguages'].default, null); // the model's languages
    });

    test("an integer setting's whole range in package.json (the server's, tests/test_docs.py) is sent as it is", () => {
        const ranged = Object.entries(properties as Record<string, { minimum?: number; maximum?: number }>)
            .filter(([, schema]) => schema.maximum !== undefined);
        assert.ok(ranged.length >= 12);
        for (const [full, { minimum, maximum }] of ranged) {
            const key = full.replace(/^completer\./, '') as keyof ExtensionSettings;
            for (const bound of [minimum!, maximum!]) {
                assert.equal(readSettings(reader({ [key]: bound }))[key], bound, `${key} ${bound}`);
            }
            assert.equal(readSettings(reader({ [key]: maximum! + 1 }))[key], maximum, `${key} clamped`);
        }
    });

    test('server settings use exactly the camelCase keys', () => {
        const server = toServerSettings({ ...DEFAULT_SETTINGS });
        assert.deepEqual(Object.keys(server).sort(), [...SERVER_SETTING_KEYS].sort());
        assert.deepEqual(server, {
            modelPath: null,
            beams: 0,
            maxSuggestions: 3,
            maxTokens: 24,
            device: 'auto',
            threads: 0,
            memoryBudgetMb: 256,
            contextTokens: 0,
            searchBudgetMs: 0,
            documentRepeats: true,
            openFiles: 4,
            searchAhead: true,
            fillInTheMiddle: true,
            workspaceContext: true,
            workspaceMemoryMb: 128,
            excludeFiles: [...DEFAULT_EXCLUDED],
            enabledLanguages: null,
            completionItems: false,
            inlineCompletions: true,
            backend: 'local',
            endpoint: null,
            model: '',
            apiKeyEnv: null,
            fimTemplate: 'auto',
            requestTimeoutMs: 5000,
            promptChars: 6000,
            endpointChoices: 1,
        });
        assert.ok(!('pythonPath' in server) && !('enabled' in server));
    });

    test('user values are mapped through', () => {
        const settings = readSettings(
            reader({
                modelPath: '~/models/small',
                pythonPath: '${workspaceFolder}/.venv/bin/python',
                beams: 2,
                maxSuggestions: 5,
                maxTokens: 48,
                device: 'cpu',
                threads: 2,
                memoryBudgetMb: 512,
                contextTokens: 512,
                searchBudgetMs: 40,
                documentRepeats: false,
                openFiles: 2,
                searchAhead: false,
                fillInTheMiddle: false,
                workspaceContext: true,
                workspaceMemoryMb: 256,
                excludeFiles: ['.env', 'secrets/', 7, ''],
                enabledLanguages: ['python', 'javascript', 'python'],
                completionItems: false,
                inlineCompletions: true,
                backend: 'openai',
                endpoint: ' https://gpu.example.com/v1 ',
                model: 'Qwen2.5-Coder-1.5B',
                apiKeyEnv: 'TEAM_API_KEY',
                fimTemplate: 'qwen',
                requestTimeoutMs: 3000,
                promptChars: 4000,
                endpointChoices: 2,
            }),
            { home: '/home/u', workspaceFolder: '/ws' },
        );
        assert.equal(settings.pythonPath, '/ws/.venv/bin/python');
        assert.deepEqual(initializationOptions(settings), {
            completer: {
                modelPath: '/home/u/models/small',
                beams: 2,
                maxSuggestions: 5,
                maxTokens: 48,
                device: 'cpu',
                threads: 2,
                memoryBudgetMb: 512,
                contextTokens: 512,
                searchBudgetMs: 40,
                documentRepeats: false,
                openFiles: 2,
                searchAhead: false,
                fillInTheMiddle: false,
                workspaceContext: true,
                workspaceMemoryMb: 256,
                excludeFiles: ['.env', 'secrets/'],
                enabledLanguages: ['python', 'javascript'],
                completionItems: false,
                inlineCompletions: true,
                backend: 'openai',
                endpoint: 'https://gpu.example.com/v1',
                model: 'Qwen2.5-Coder-1.5B',
                apiKeyEnv: 'TEAM_API_KEY',
                fimTemplate: 'qwen',
                requestTimeoutMs: 3000,
                promptChars: 4000,
                endpointChoices: 2,
            },
        });
        assert.deepEqual(didChangeConfigurationParams(settings), { settings: initializationOptions(settings) });
    });

    test('invalid values fall back to defaults or are clamped', () => {
        const settings = readSettings(
            reader({
                modelPath: '   ',
                pythonPath: 42,
                beams: 100,
                maxSuggestions: 0,
                maxTokens: 'many',
                device: 'tpu',
                threads: -3,
                memoryBudgetMb: 12.6,
                contextTokens: -5,
                searchBudgetMs: 1e9,
                documentRepeats: 'no',
                openFiles: 99,
                searchAhead: 'yes',
                fillInTheMiddle: 'no',
                workspaceContext: 'yes',
                workspaceMemoryMb: 100000,
                excludeFiles: '.env',
                enabledLanguages: 'python',
                completionItems: 'yes',
                inlineCompletions: null,
            }),
        );
        assert.equal(settings.modelPath, null);
        assert.equal(settings.pythonPath, null);
        assert.equal(settings.beams, 16);
        assert.equal(settings.maxSuggestions, 1);
        assert.equal(settings.maxTokens, 24);
        assert.equal(settings.device, 'auto');
        assert.equal(settings.threads, 0);
        assert.equal(settings.memoryBudgetMb, 13);
        assert.equal(settings.contextTokens, 0);
        assert.equal(settings.searchBudgetMs, 60000);
        assert.equal(settings.documentRepeats, true);
        assert.equal(settings.openFiles, 16);
        assert.equal(settings.searchAhead, true);
        assert.equal(settings.fillInTheMiddle, true);
        assert.equal(settings.workspaceContext, true);
        assert.equal(settings.workspaceMemoryMb, 4096);
        assert.deepEqual(settings.excludeFiles, [...DEFAULT_EXCLUDED]); // not a list: the secrets stay left out
        assert.deepEqual(settings.enabledLanguages, null);
        assert.equal(settings.completionItems, false);
        assert.equal(settings.inlineCompletions, true);
    });

    test('turning suggestions off tells the server both kinds are off', () => {
        const off = toServerSettings({ ...DEFAULT_SETTINGS, enabled: false });
        assert.equal(off.completionItems, false);
        assert.equal(off.inlineCompletions, false);
        assert.ok(serverSettingsChanged({ ...DEFAULT_SETTINGS }, { ...DEFAULT_SETTINGS, enabled: false }));
    });

    test('expandPath', () => {
        const vars = { home: '/home/u', workspaceFolder: '/ws' };
        assert.equal(expandPath('~', vars), '/home/u');
        assert.equal(expandPath('~/x', vars), '/home/u/x');
        assert.equal(expandPath('a~/x', { home: '/home/u' }), 'a~/x'); // only a leading ~ is home
        assert.equal(expandPath('${userHome}/m', vars), '/home/u/m');
        assert.equal(expandPath('${workspaceFolder}/m', {}), '${workspaceFolder}/m');
        // relative paths come from the workspace folder; a bare command stays a PATH lookup
        assert.equal(expandPath('.venv/bin/python', vars), '/ws/.venv/bin/python');
        assert.equal(expandPath('models/mine', vars), '/ws/models/mine');
        assert.equal(expandPath('python3', vars), 'python3');
        assert.equal(expandPath('/abs/python', vars), '/abs/python');
        assert.equal(expandPath('C:\\Python\\python.exe', vars), 'C:\\Python\\python.exe');
        assert.equal(expandPath('.venv/bin/python', { home: '/home/u' }), '.venv/bin/python');
    });

    test('modelPath keeps the names the server converts a model by', () => {
        const vars = { home: '/home/u', workspaceFolder: '/ws' };
        const none = () => false;
        assert.equal(readModelPath('tabby:TabbyML/StarCoder-1B', vars, none), 'tabby:TabbyML/StarCoder-1B');
        assert.equal(readModelPath('ollama:qwen2.5-coder:1.5b', vars, none), 'ollama:qwen2.5-coder:1.5b');
        assert.equal(readModelPath('Qwen/Qwen2.5-Coder-1.5B', vars, none), 'Qwen/Qwen2.5-Coder-1.5B');
        assert.equal(readModelPath('ggml-org/Qwen-GGUF:Q8_0', vars, none), 'ggml-org/Qwen-GGUF:Q8_0');
        // a folder of that name in the workspace is still the workspace's; a path is still a path
        assert.equal(readModelPath('models/mine', vars, (p) => p === '/ws/models/mine'), '/ws/models/mine');
        assert.equal(readModelPath('./models/mine', vars, none), '/ws/models/mine');
        assert.equal(readModelPath('~/models/q.gguf', vars, none), '/home/u/models/q.gguf');
        assert.equal(readModelPath('  ', vars, none), null);
    });

    test('document selector follows enabledLanguages', () => {
        assert.deepEqual(documentSelector(['python', 'go']), [
            { scheme: 'file', language: 'python' },
            { scheme: 'untitled', language: 'python' },
            { notebook: '*', language: 'python' },
            { scheme: 'file', language: 'go' },
            { scheme: 'untitled', language: 'go' },
            { notebook: '*', language: 'go' },
        ]);
        assert.deepEqual(documentSelector([]), []);
        // the server decides; a notebook's cells too
        assert.deepEqual(documentSelector(null), [{ scheme: 'file' }, { scheme: 'untitled' }, { notebook: '*' }]);
    });

    test('restart only for python path or language changes', () => {
        const base: ExtensionSettings = { ...DEFAULT_SETTINGS };
        assert.ok(needsRestart(base, { ...base, pythonPath: '/usr/bin/python3' }));
        assert.ok(needsRestart(base, { ...base, enabledLanguages: ['python', 'rust'] }));
        assert.ok(needsRestart({ ...base, enabledLanguages: ['python'] }, base)); // set, then unset
        assert.ok(!needsRestart(base, { ...base, beams: 8, modelPath: '/m', enabled: false }));
        assert.ok(!serverSettingsChanged(base, { ...base, pythonPath: '/x' }));
        assert.ok(serverSettingsChanged(base, { ...base, beams: 8 }));
    });

    test("unseenBecause: ghost text needs VS Code's inline suggestions, unless the suggest widget shows them", () => {
        const base = { ...DEFAULT_SETTINGS };
        assert.equal(unseenBecause(base, true), undefined);
        assert.equal(unseenBecause(base, false), "VS Code's editor.inlineSuggest.enabled is off");
        assert.equal(unseenBecause({ ...base, completionItems: true }, false), undefined);
        assert.equal(unseenBecause({ ...base, inlineCompletions: false }, true),
            'completer.inlineCompletions and completer.completionItems are both off');
        assert.equal(unseenBecause({ ...base, inlineCompletions: false, completionItems: true }, true), undefined);
        assert.equal(unseenBecause({ ...base, enabled: false }, false), undefined); // off on purpose
    });
});
