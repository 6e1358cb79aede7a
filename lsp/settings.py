"""User settings: camelCase LSP keys, checked one by one, mapped onto EngineSettings.

Each key is validated on its own so one bad value (a typo in `device`, a negative `beams`)
is reported and ignored while the rest of the change still applies; keys that depend on each
other (`maxTokens` and `contextTokens`) apply in any order.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from completer.types import EngineSettings

SECTION = "completer"

ENGINE_KEYS: dict[str, str] = {
    "modelPath": "model_path",
    "beams": "beams",
    "maxSuggestions": "max_suggestions",
    "maxTokens": "max_tokens",
    "device": "device",
    "threads": "threads",
    "memoryBudgetMb": "memory_budget_mb",
    "contextTokens": "context_tokens",
    "searchBudgetMs": "search_budget_ms",
    "documentRepeats": "document_repeats",
    "openFiles": "open_files",
    "searchAhead": "search_ahead",
    "fillInTheMiddle": "fill_in_the_middle",
}
SERVER_KEYS: dict[str, str] = {
    "enabledLanguages": "enabled_languages",
    "completionItems": "completion_items",
    "inlineCompletions": "inline_completions",
    "workspaceContext": "workspace_context",
    "workspaceMemoryMb": "workspace_memory_mb",
}


@dataclass(frozen=True)
class ServerSettings:
    """Everything the server honours; `engine` is what the worker gets."""

    engine: EngineSettings = field(default_factory=EngineSettings)
    enabled_languages: tuple[str, ...] = ("python",)
    completion_items: bool = True
    inline_completions: bool = True
    workspace_context: bool = False  # index the workspace folders; their snippets join the document's repeats
    workspace_memory_mb: int = 128  # the index's budget; files past it are left out

    def language_enabled(self, language_id: str | None) -> bool:
        return "*" in self.enabled_languages or (language_id or "") in self.enabled_languages

    def to_camel(self) -> dict[str, Any]:
        """The settings as a client would write them (for completer/info and logs)."""
        out: dict[str, Any] = {key: getattr(self.engine, name) for key, name in ENGINE_KEYS.items()}
        out["enabledLanguages"] = list(self.enabled_languages)
        out["completionItems"] = self.completion_items
        out["inlineCompletions"] = self.inline_completions
        out["workspaceContext"] = self.workspace_context
        out["workspaceMemoryMb"] = self.workspace_memory_mb
        return out


def extract_section(settings: Any) -> Mapping[str, Any] | None:
    """`{"completer": {...}}` or the settings object itself; None when there is nothing for us."""
    if not isinstance(settings, Mapping):
        return None
    inner = settings.get(SECTION)
    if isinstance(inner, Mapping):
        return inner
    return settings


def _integer(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{key} must be an integer, got {value!r}")
        value = int(value)
    return value


def _coerce(key: str, value: Any) -> Any:
    """Check one value's JSON type and turn it into the Python value; ValueError names the key."""
    if key == "modelPath":
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValueError(f"modelPath must be a string or null, got {value!r}")
        return os.path.expanduser(value)
    if key == "device":
        if not isinstance(value, str):
            raise ValueError(f"device must be \"auto\", \"cpu\" or \"cuda\", got {value!r}")
        return value.lower()
    if key == "enabledLanguages":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"enabledLanguages must be a list of language ids, got {value!r}")
        return tuple(value)
    if key in ("completionItems", "inlineCompletions", "documentRepeats", "searchAhead", "fillInTheMiddle", "workspaceContext"):
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {value!r}")
        return value
    return _integer(key, value)


def _with_key(settings: ServerSettings, key: str, value: Any, defaults: ServerSettings) -> ServerSettings:
    """`settings` with one key changed and checked; ValueError or TypeError names what is wrong."""
    if key in ENGINE_KEYS:
        name = ENGINE_KEYS[key]
        coerced = getattr(defaults.engine, name) if value is None else _coerce(key, value)
        engine = dataclasses.replace(settings.engine, **{name: coerced})
        engine.validate()
        return dataclasses.replace(settings, engine=engine)
    name = SERVER_KEYS[key]
    coerced = getattr(defaults, name) if value is None else _coerce(key, value)
    if key == "workspaceMemoryMb" and not 1 <= coerced <= 4096:
        raise ValueError(f"workspaceMemoryMb must be between 1 and 4096, got {coerced}")
    return dataclasses.replace(settings, **{name: coerced})


def apply_changes(current: ServerSettings, changes: Mapping[str, Any]) -> tuple[ServerSettings, list[str], list[str]]:
    """Apply the keys present in `changes` over `current`.

    Returns (new settings, warnings for invalid values that were ignored, unknown keys).
    A key set to null goes back to its default; keys left out keep their current value.
    Keys are tried again while any other key still applies, so the result does not depend on their order:
    `maxTokens` 64 with `contextTokens` 200 both apply, even when the context was 100 before and comes
    after it in the change.
    """
    defaults = ServerSettings()
    new = current
    unknown = [str(key) for key in changes if key not in ENGINE_KEYS and key not in SERVER_KEYS]
    pending = {key: value for key, value in changes.items() if key in ENGINE_KEYS or key in SERVER_KEYS}
    errors: dict[str, Exception] = {}
    progress = True
    while pending and progress:
        progress, errors = False, {}
        for key, value in list(pending.items()):
            try:
                new = _with_key(new, key, value, defaults)
            except (ValueError, TypeError) as exc:
                errors[key] = exc
                continue
            del pending[key]
            progress = True
    warnings = [f"Ignoring invalid setting {SECTION}.{key}: {exc}" for key, exc in errors.items()]
    return new, warnings, unknown


def engine_dict(settings: ServerSettings) -> dict[str, Any]:
    """EngineSettings as a plain dict for the worker."""
    return dataclasses.asdict(settings.engine)
