// The status bar item: model name, last suggestion latency, whether the active file's language gets suggestions,
// and a click that turns suggestions on/off.

import type { StatusBarItem } from 'vscode';
import { COMMANDS } from './constants';
import { createStatusBarItem, themeColor } from './vscodeapi';

export type ServerState = 'starting' | 'running' | 'stopped' | 'error';

export class StatusBar {
    private readonly item: StatusBarItem;
    private enabled = true;
    private state: ServerState = 'stopped';
    private model: string | undefined;
    private latencyMs: number | undefined;
    private problem: string | undefined;
    private endpoint: string | undefined;
    private languages: readonly string[] | undefined;
    private activeLanguage: string | undefined;
    private unseen: string | undefined;
    private excluded: string | undefined;

    constructor() {
        this.item = createStatusBarItem('completer.status', 100);
        this.item.name = 'Completer';
        this.item.command = COMMANDS.toggle;
        this.render();
        this.item.show();
    }

    setEnabled(enabled: boolean): void {
        this.enabled = enabled;
        this.render();
    }

    setState(state: ServerState, problem?: string): void {
        this.state = state;
        this.problem = state === 'error' ? problem : undefined;
        if (state !== 'running') {
            this.latencyMs = undefined;
        }
        this.render();
    }

    setModel(model: string | undefined): void {
        this.model = model;
        this.render();
    }

    /** The endpoint the lines come from (backend "openai"), or undefined for the local model. */
    setRemote(endpoint: string | undefined): void {
        this.endpoint = endpoint;
        this.render();
    }

    /** The language ids the server answers in (completer/info's `server.enabled_languages`, "*" for all), or
     *  undefined while it does not know them yet. */
    setLanguages(languages: readonly string[] | undefined): void {
        this.languages = languages;
        this.render();
    }

    /** The language id of the file in the active editor; undefined when no file's editor is active. */
    setActiveLanguage(languageId: string | undefined): void {
        this.activeLanguage = languageId;
        this.render();
    }

    /** The active file's language when the server answers in others only, else undefined. */
    get unansweredLanguage(): string | undefined {
        const { languages, activeLanguage } = this;
        if (!languages || !activeLanguage || languages.includes('*') || languages.includes(activeLanguage)) {
            return undefined;
        }
        return activeLanguage;
    }

    /** The completer.excludeFiles pattern that leaves the active file alone, or undefined. */
    setExcluded(pattern: string | undefined): void {
        this.excluded = pattern;
        this.render();
    }

    /** Why the suggestions cannot be seen in the active editor (settings.ts, `unseenBecause`), or undefined. */
    setUnseen(reason: string | undefined): void {
        this.unseen = reason;
        this.render();
    }

    setLatency(ms: number): void {
        this.latencyMs = ms;
        this.render();
    }

    /** For tests and logs: what the item currently shows. */
    get text(): string {
        return this.item.text;
    }

    dispose(): void {
        this.item.dispose();
    }

    private render(): void {
        const model = this.model ?? 'Completer';
        const latency = this.latencyMs === undefined ? '' : ` · ${Math.round(this.latencyMs)} ms`;
        const toggleHint = this.enabled ? 'Click to turn suggestions off.' : 'Click to turn suggestions on.';
        this.item.backgroundColor = undefined;
        if (!this.enabled) {
            this.item.text = `$(circle-slash) ${model}`;
            this.item.tooltip = `Completer: suggestions are off. ${toggleHint}`;
            return;
        }
        switch (this.state) {
            case 'starting':
                this.item.text = `$(sync~spin) ${model}`;
                this.item.tooltip = `Completer: starting the server… ${toggleHint}`;
                break;
            case 'running':
                if (this.unansweredLanguage !== undefined) {
                    this.renderUnanswered(model, this.unansweredLanguage, toggleHint);
                    break;
                }
                if (this.excluded !== undefined) {
                    this.renderExcluded(model, this.excluded, toggleHint);
                    break;
                }
                if (this.unseen !== undefined) {
                    this.renderUnseen(model, this.unseen, toggleHint);
                    break;
                }
                this.item.text = `${this.endpoint ? '$(cloud)' : '$(sparkle)'} ${model}${latency}`;
                this.item.tooltip =
                    `Completer: model ${model}` +
                    (this.endpoint
                        ? ` at ${this.endpoint}: the code around the cursor is sent there, not kept on this machine`
                        : '') +
                    (this.latencyMs === undefined ? '' : `, last suggestion took ${Math.round(this.latencyMs)} ms`) +
                    `. ${toggleHint}`;
                break;
            case 'error':
                this.item.text = `$(error) ${model}`;
                this.item.tooltip = `Completer: ${this.problem ?? 'the server is not running'}. Run "Completer: Show Logs" for details. ${toggleHint}`;
                this.item.backgroundColor = themeColor('statusBarItem.errorBackground');
                break;
            case 'stopped':
                this.item.text = `$(debug-stop) ${model}`;
                this.item.tooltip = `Completer: the server is stopped. ${toggleHint}`;
                break;
        }
    }

    private renderUnseen(model: string, reason: string, toggleHint: string): void {
        this.item.text = `$(warning) ${model} · hidden`;
        this.item.tooltip =
            `Completer: the suggestions cannot show here, since ${reason}. Turn on editor.inlineSuggest.enabled ` +
            `(for this language too, where a language's settings turn it off) and completer.inlineCompletions for ` +
            `ghost text, or completer.completionItems for the suggest widget. ${toggleHint}`;
        this.item.backgroundColor = themeColor('statusBarItem.warningBackground');
    }

    private renderExcluded(model: string, pattern: string, toggleHint: string): void {
        this.item.text = `$(eye-closed) ${model} · excluded`;
        this.item.tooltip =
            `Completer: no suggestions in this file, and nothing of it is read for other files` +
            `${this.endpoint ? ' or sent to the endpoint' : ''}: it matches "${pattern}" in completer.excludeFiles. ` +
            toggleHint;
    }

    private renderUnanswered(model: string, language: string, toggleHint: string): void {
        this.item.text = `$(eye-closed) ${model} · ${language}`; // not ⊘, which says suggestions are off
        this.item.tooltip =
            `Completer: no suggestions in ${language} files: model ${model} answers in ` +
            `${(this.languages ?? []).join(', ')}. Add "${language}" to completer.enabledLanguages, or choose a ` +
            `model that writes it ("Completer: Use a Model Already on This Machine"). ${toggleHint}`;
    }
}
