// Reading the `completer.*` settings and mapping them onto what the server expects.
// Pure module: no `vscode` import, so the unit and integration tests can use it in plain Node.
import * as fs from 'fs';
import * as path from 'path';

export type Device = 'auto' | 'cpu' | 'cuda';
export type Backend = 'local' | 'openai';
export type FimTemplate = 'auto' | 'none' | 'qwen' | 'starcoder2' | 'starcoder' | 'deepseek' | 'codellama';

/** Everything the extension reads from the `completer` configuration section. */
export interface ExtensionSettings {
    enabled: boolean;
    pythonPath: string | null;
    modelPath: string | null;
    beams: number;
    maxSuggestions: number;
    maxTokens: number;
    device: Device;
    threads: number;
    memoryBudgetMb: number;
    contextTokens: number;
    searchBudgetMs: number;
    documentRepeats: boolean;
    openFiles: number;
    searchAhead: boolean;
    fillInTheMiddle: boolean;
    workspaceContext: boolean;
    workspaceMemoryMb: number;
    excludeFiles: string[]; // .gitignore patterns of files that get no suggestions and are read for no other file
    enabledLanguages: string[] | null; // null: the languages the model writes (the server knows them)
    completionItems: boolean;
    inlineCompletions: boolean;
    backend: Backend;
    endpoint: string | null;
    model: string;
    apiKeyEnv: string | null;
    fimTemplate: FimTemplate;
    requestTimeoutMs: number;
    promptChars: number;
    endpointChoices: number;
}

/** What the server receives, as `initializationOptions` and in `workspace/didChangeConfiguration`. */
export type ServerSettings = Omit<ExtensionSettings, 'enabled' | 'pythonPath'>;

export const CONFIG_SECTION = 'completer';

/** The keys the server understands, in the order it documents them. */
export const SERVER_SETTING_KEYS: readonly (keyof ServerSettings)[] = [
    'modelPath',
    'beams',
    'maxSuggestions',
    'maxTokens',
    'device',
    'threads',
    'memoryBudgetMb',
    'contextTokens',
    'searchBudgetMs',
    'documentRepeats',
    'openFiles',
    'searchAhead',
    'fillInTheMiddle',
    'workspaceContext',
    'workspaceMemoryMb',
    'excludeFiles',
    'enabledLanguages',
    'completionItems',
    'inlineCompletions',
    'backend',
    'endpoint',
    'model',
    'apiKeyEnv',
    'fimTemplate',
    'requestTimeoutMs',
    'promptChars',
    'endpointChoices',
];

/** Files that hold secrets by convention (the server's lsp/exclusions.py DEFAULT_EXCLUDED; a test checks). */
export const DEFAULT_EXCLUDED: readonly string[] = Object.freeze([
    '.env', '.env.*', '.envrc', '*.pem', '*.key', '*.p12', '*.pfx', 'id_rsa*', 'id_ecdsa*', 'id_ed25519*', '.netrc',
    '.pypirc', '.npmrc', '.git-credentials',
]);

/** Must equal the defaults in package.json's contributes.configuration (a unit test checks). */
export const DEFAULT_SETTINGS: Readonly<ExtensionSettings> = Object.freeze({
    enabled: true,
    pythonPath: null,
    modelPath: null,
    beams: 0, // the model's default (its bundle's manifest; 4 for the embedded model)
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
    completionItems: false, // ghost text only: items would open the suggest widget, and Tab would take them
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

type IntegerKey = 'beams' | 'maxSuggestions' | 'maxTokens' | 'threads' | 'memoryBudgetMb' | 'contextTokens'
    | 'searchBudgetMs' | 'openFiles' | 'workspaceMemoryMb' | 'requestTimeoutMs' | 'promptChars' | 'endpointChoices';

const INTEGER_RANGES: Record<IntegerKey, [number, number]> = {
    beams: [0, 16],
    maxSuggestions: [1, 16],
    maxTokens: [1, 256],
    threads: [0, 256],
    memoryBudgetMb: [1, 65536],
    contextTokens: [0, 16777216], // the server's MAX_CONTEXT_TOKENS; it checks the rest against maxTokens
    searchBudgetMs: [0, 60000],
    openFiles: [0, 16],
    workspaceMemoryMb: [1, 4096],
    requestTimeoutMs: [100, 120000],
    promptChars: [256, 32768],
    endpointChoices: [1, 16],
};

const DEVICES: readonly Device[] = ['auto', 'cpu', 'cuda'];
const BACKENDS: readonly Backend[] = ['local', 'openai'];
const FIM_TEMPLATES: readonly FimTemplate[] = [
  'auto', 'none', 'qwen', 'starcoder2', 'starcoder', 'deepseek', 'codellama',
];

/** A trimmed string, or null when unset or empty (the server checks what it means). */
function readText(value: unknown): string | null {
    return typeof value === 'string' && value.trim() !== '' ? value.trim() : null;
}

/** The part of vscode.WorkspaceConfiguration that reading settings needs. */
export interface ConfigReader {
    get<T>(key: string): T | undefined;
}

/** Values substituted into path settings. */
export interface PathVariables {
    home?: string;
    workspaceFolder?: string;
}

/**
 * Expand a leading `~` and `${workspaceFolder}` / `${userHome}`; unknown variables are left alone. A relative
 * path (one with a separator, such as `.venv/bin/python`) is taken from the workspace folder, not from
 * wherever the extension host runs; a bare name such as `python3` stays a PATH lookup.
 */
export function expandPath(value: string, vars: PathVariables): string {
    let out = value;
    if (vars.home && (out === '~' || out.startsWith('~/') || out.startsWith('~\\'))) {
        out = vars.home + out.slice(1);
    }
    if (vars.home) {
        out = out.split('${userHome}').join(vars.home);
    }
    if (vars.workspaceFolder) {
        out = out.split('${workspaceFolder}').join(vars.workspaceFolder);
        if (/[\\/]/.test(out) && !path.isAbsolute(out) && !path.win32.isAbsolute(out)) {
            out = path.join(vars.workspaceFolder, out);
        }
    }
    return out;
}

function readPath(value: unknown, vars: PathVariables): string | null {
    if (typeof value !== 'string') {
        return null;
    }
    const trimmed = value.trim();
    return trimmed === '' ? null : expandPath(trimmed, vars);
}

/** A Hugging Face id, ORG/NAME[:QUANT], as the server reads it from the local cache. */
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*(:[A-Za-z0-9_.-]+)?$/;

/**
 * modelPath: a path as `readPath` reads it, except the names the server converts a model by
 * (lsp/model_sources.py): `ollama:NAME` and `tabby:ORG/NAME` as they are, and an ORG/NAME id that is no folder
 * in the workspace as it is too, for the server to find in the local Hugging Face cache.
 */
export function readModelPath(value: unknown, vars: PathVariables,
                              exists: (p: string) => boolean = fs.existsSync): string | null {
    const read = readPath(value, vars);
    if (read === null || typeof value !== 'string') {
        return read;
    }
    const trimmed = value.trim();
    if (/^(ollama|tabby):/.test(trimmed) || (MODEL_ID.test(trimmed) && read !== trimmed && !exists(read))) {
        return trimmed;
    }
    return read;
}

function readBoolean(value: unknown, fallback: boolean): boolean {
    return typeof value === 'boolean' ? value : fallback;
}

function readInteger(value: unknown, key: keyof typeof INTEGER_RANGES): number {
    const [min, max] = INTEGER_RANGES[key];
    if (typeof value !== 'number' || !Number.isFinite(value)) {
        return DEFAULT_SETTINGS[key];
    }
    return Math.min(max, Math.max(min, Math.round(value)));
}

/** The patterns as written (a .gitignore line's spaces can matter), without what is not a string; not a list: the
 *  defaults. The server checks each pattern and says which it refuses. */
function readPatterns(value: unknown): string[] {
    if (!Array.isArray(value)) {
        return [...DEFAULT_EXCLUDED];
    }
    return value.filter((item): item is string => typeof item === 'string' && item.trim() !== '');
}

function readLanguages(value: unknown): string[] | null {
    if (!Array.isArray(value)) {
        return DEFAULT_SETTINGS.enabledLanguages;
    }
    const seen = new Set<string>();
    for (const item of value) {
        if (typeof item === 'string' && item.trim() !== '') {
            seen.add(item.trim());
        }
    }
    return [...seen];
}

/** Read and sanitise the settings: wrong types fall back to the default, numbers are clamped to their range. */
export function readSettings(config: ConfigReader, vars: PathVariables = {}): ExtensionSettings {
    const device = config.get<string>('device');
    return {
        enabled: readBoolean(config.get('enabled'), DEFAULT_SETTINGS.enabled),
        pythonPath: readPath(config.get('pythonPath'), vars),
        modelPath: readModelPath(config.get('modelPath'), vars),
        beams: readInteger(config.get('beams'), 'beams'),
        maxSuggestions: readInteger(config.get('maxSuggestions'), 'maxSuggestions'),
        maxTokens: readInteger(config.get('maxTokens'), 'maxTokens'),
        device: DEVICES.includes(device as Device) ? (device as Device) : DEFAULT_SETTINGS.device,
        threads: readInteger(config.get('threads'), 'threads'),
        memoryBudgetMb: readInteger(config.get('memoryBudgetMb'), 'memoryBudgetMb'),
        contextTokens: readInteger(config.get('contextTokens'), 'contextTokens'),
        searchBudgetMs: readInteger(config.get('searchBudgetMs'), 'searchBudgetMs'),
        documentRepeats: readBoolean(config.get('documentRepeats'), DEFAULT_SETTINGS.documentRepeats),
        openFiles: readInteger(config.get('openFiles'), 'openFiles'),
        searchAhead: readBoolean(config.get('searchAhead'), DEFAULT_SETTINGS.searchAhead),
        fillInTheMiddle: readBoolean(config.get('fillInTheMiddle'), DEFAULT_SETTINGS.fillInTheMiddle),
        workspaceContext: readBoolean(config.get('workspaceContext'), DEFAULT_SETTINGS.workspaceContext),
        workspaceMemoryMb: readInteger(config.get('workspaceMemoryMb'), 'workspaceMemoryMb'),
        excludeFiles: readPatterns(config.get('excludeFiles')),
        enabledLanguages: readLanguages(config.get('enabledLanguages')),
        completionItems: readBoolean(config.get('completionItems'), DEFAULT_SETTINGS.completionItems),
        inlineCompletions: readBoolean(config.get('inlineCompletions'), DEFAULT_SETTINGS.inlineCompletions),
        backend: BACKENDS.includes(config.get<string>('backend') as Backend)
            ? (config.get<string>('backend') as Backend)
            : DEFAULT_SETTINGS.backend,
        endpoint: readText(config.get('endpoint')),
        model: readText(config.get('model')) ?? DEFAULT_SETTINGS.model,
        apiKeyEnv: readText(config.get('apiKeyEnv')),
        fimTemplate: FIM_TEMPLATES.includes(config.get<string>('fimTemplate') as FimTemplate)
            ? (config.get<string>('fimTemplate') as FimTemplate)
            : DEFAULT_SETTINGS.fimTemplate,
        requestTimeoutMs: readInteger(config.get('requestTimeoutMs'), 'requestTimeoutMs'),
        promptChars: readInteger(config.get('promptChars'), 'promptChars'),
        endpointChoices: readInteger(config.get('endpointChoices'), 'endpointChoices'),
    };
}

/**
 * The settings as the server sees them (camelCase keys). When suggestions are toggled off both kinds are
 * sent as disabled, so the server does no work at all.
 */
export function toServerSettings(settings: ExtensionSettings): ServerSettings {
    return {
        modelPath: settings.modelPath,
        beams: settings.beams,
        maxSuggestions: settings.maxSuggestions,
        maxTokens: settings.maxTokens,
        device: settings.device,
        threads: settings.threads,
        memoryBudgetMb: settings.memoryBudgetMb,
        contextTokens: settings.contextTokens,
        searchBudgetMs: settings.searchBudgetMs,
        documentRepeats: settings.documentRepeats,
        openFiles: settings.openFiles,
        searchAhead: settings.searchAhead,
        fillInTheMiddle: settings.fillInTheMiddle,
        workspaceContext: settings.workspaceContext,
        workspaceMemoryMb: settings.workspaceMemoryMb,
        excludeFiles: [...settings.excludeFiles],
        enabledLanguages: settings.enabledLanguages === null ? null : [...settings.enabledLanguages],
        completionItems: settings.enabled && settings.completionItems,
        inlineCompletions: settings.enabled && settings.inlineCompletions,
        backend: settings.backend,
        endpoint: settings.endpoint,
        model: settings.model,
        apiKeyEnv: settings.apiKeyEnv,
        fimTemplate: settings.fimTemplate,
        requestTimeoutMs: settings.requestTimeoutMs,
        promptChars: settings.promptChars,
        endpointChoices: settings.endpointChoices,
    };
}

/** Why the server's suggestions cannot be seen in an editor, or undefined when they can: the extension answers
 *  with ghost text unless `completionItems` puts them in the suggest widget, and VS Code draws no ghost text
 *  where its own `editor.inlineSuggest.enabled` is off (often turned off for one language, or to quiet another
 *  extension). Suggestions turned off on purpose (`completer.enabled`) are not a reason. */
export function unseenBecause(settings: ExtensionSettings, inlineSuggestEnabled: boolean): string | undefined {
    if (!settings.enabled || settings.completionItems) {
        return undefined;
    }
    if (!settings.inlineCompletions) {
        return 'completer.inlineCompletions and completer.completionItems are both off';
    }
    return inlineSuggestEnabled ? undefined : "VS Code's editor.inlineSuggest.enabled is off";
}

/** An environment variable's name as the server takes it for apiKeyEnv (lsp/settings.py), and a run of capitals and
 *  digits so long it is a key's, not a name's. */
const ENV_NAME = /^[A-Z_][A-Z0-9_]{0,63}$/;
const KEY_LIKE = /[A-Z0-9]{24}/;

/** The settings as the log shows them: a key pasted into apiKeyEnv, or credentials in the endpoint's URL, never
 *  reach it (the server refuses both without repeating them either). */
export function settingsForLog(settings: ServerSettings): ServerSettings {
    const { apiKeyEnv, endpoint } = settings;
    const keyHidden = apiKeyEnv !== null && (!ENV_NAME.test(apiKeyEnv) || KEY_LIKE.test(apiKeyEnv));
    return {
        ...settings,
        apiKeyEnv: keyHidden ? '(hidden: not the name of an environment variable)' : apiKeyEnv,
        endpoint: endpoint === null ? null : endpointForLog(endpoint),
    };
}

function endpointForLog(endpoint: string): string {
    let url: URL;
    try {
        url = new URL(endpoint);
    } catch {
        return '(hidden: not a URL)';
    }
    if (url.username === '' && url.password === '') {
        return endpoint;
    }
    url.username = url.password = '';
    return `${url.toString()} (its credentials hidden)`;
}

/** `initializationOptions` of the `initialize` request. */
export function initializationOptions(settings: ExtensionSettings): { completer: ServerSettings } {
    return { completer: toServerSettings(settings) };
}

/** Params of `workspace/didChangeConfiguration`: `{settings: {completer: {...}}}`. */
export function didChangeConfigurationParams(settings: ExtensionSettings): { settings: { completer: ServerSettings } } {
    return { settings: { completer: toServerSettings(settings) } };
}

export type DocumentFilter = { scheme: string; language?: string } | { notebook: string; language?: string };

/** Documents the client syncs and asks suggestions for: files, unsaved editors and notebook cells of the enabled
 * languages; with none set, every one, and the server answers for the languages its model writes. The cells are
 * synced as their notebooks, in order (the server offers notebookDocumentSync), so a cell reads those above it. */
export function documentSelector(languages: readonly string[] | null): DocumentFilter[] {
    if (languages === null) {
        return [{ scheme: 'file' }, { scheme: 'untitled' }, { notebook: '*' }];
    }
    return languages.flatMap((language) => [
        { scheme: 'file', language },
        { scheme: 'untitled', language },
        { notebook: '*', language },
    ]);
}

/** Changes that need a new server process (interpreter) or a new client (document selector). */
export function needsRestart(before: ExtensionSettings, after: ExtensionSettings): boolean {
    return (
        before.pythonPath !== after.pythonPath ||
        JSON.stringify(before.enabledLanguages) !== JSON.stringify(after.enabledLanguages)
    );
}

/** Whether the server-visible settings differ. */
export function serverSettingsChanged(before: ExtensionSettings, after: ExtensionSettings): boolean {
    return JSON.stringify(toServerSettings(before)) !== JSON.stringify(toServerSettings(after));
}
