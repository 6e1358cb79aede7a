"""User settings: camelCase LSP keys, checked one by one, mapped onto EngineSettings.

Each key is validated on its own so one bad value (a typo in `device`, a negative `beams`)
is reported and ignored while the rest of the change still applies; keys that depend on each
other (`maxTokens` and `contextTokens`) apply in any order.
"""
from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import os
import re
import reprlib
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlsplit

from completer.fim import FIM_TEMPLATES, template_for_model
from completer.remote import PROMPT_CHARS
from completer.text import MAX_CONTEXT_CHARS
from completer.types import EngineSettings
from lsp.documents import FILETYPES, LANGUAGE_IDS
from lsp.exclusions import DEFAULT_EXCLUDED, check_patterns, unusable_patterns

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
    "excludeFiles": "exclude_files",
}
REMOTE_KEYS: dict[str, str] = {
    "backend": "backend",
    "endpoint": "endpoint",
    "model": "model",
    "apiKeyEnv": "api_key_env",
    "fimTemplate": "fim_template",
    "requestTimeoutMs": "timeout_ms",
    "promptChars": "prompt_chars",
    "endpointChoices": "choices",
}
BACKENDS = ("local", "openai")
MODEL_NAME_CHARS = 256
"""The longest `model` taken: names are short (`qwen2.5-coder:1.5b-base`), and the name goes into every request, the
log and completer/info, where a pasted text would be kilobytes each time."""


@dataclass(frozen=True)
class RemoteSettings:
    """What generates the lines: the local engine, or an OpenAI-compatible endpoint (lsp/remote_backend.py)."""

    backend: str = "local"
    endpoint: str | None = None  # the API's base URL, as OpenAI clients take it: http://127.0.0.1:8080/v1
    model: str = ""  # the model name the endpoint serves
    api_key_env: str | None = None  # the environment variable that holds the API key (never the key itself)
    fim_template: str = "auto"  # "auto" (from the model's name), "none", or one of completer.fim.FIM_TEMPLATES
    timeout_ms: int = 5000
    prompt_chars: int = PROMPT_CHARS  # text before the cursor sent at most
    choices: int = 1  # completions asked for per request: 1 is greedy; more are sampled (temperature 0.2)

    @property
    def is_remote(self) -> bool:
        return self.backend != "local"

    def template(self) -> str | None:
        """The FIM template the prompts use, or None for the text before the cursor alone."""
        if self.fim_template == "auto":
            return template_for_model(self.model)
        return None if self.fim_template == "none" else self.fim_template


@dataclass(frozen=True)
class ServerSettings:
    """Everything the server honours; `engine` is what the worker gets."""

    engine: EngineSettings = field(default_factory=EngineSettings)
    enabled_languages: tuple[str, ...] | None = None  # None: the languages the model writes (Bundle.languages)
    completion_items: bool = True
    inline_completions: bool = True
    workspace_context: bool = True  # index the workspace folders; their snippets join the document's repeats
    workspace_memory_mb: int = 128  # the index's budget; files past it are left out
    exclude_files: tuple[str, ...] = DEFAULT_EXCLUDED  # .gitignore patterns of files never completed or read
    remote: RemoteSettings = field(default_factory=RemoteSettings)


    def to_camel(self) -> dict[str, Any]:
        """The settings as a client would write them (for completer/info and logs)."""
        out: dict[str, Any] = {key: getattr(self.engine, name) for key, name in ENGINE_KEYS.items()}
        out["enabledLanguages"] = None if self.enabled_languages is None else list(self.enabled_languages)
        out["completionItems"] = self.completion_items
        out["inlineCompletions"] = self.inline_completions
        out["workspaceContext"] = self.workspace_context
        out["workspaceMemoryMb"] = self.workspace_memory_mb
        out["excludeFiles"] = list(self.exclude_files)
        out.update({key: getattr(self.remote, name) for key, name in REMOTE_KEYS.items()})
        return out


def extract_section(settings: Any) -> Mapping[str, Any] | None:
    """`{"completer": {...}}` or the settings object itself; None when there is nothing for us, a `completer` that
    is not an object among it (`shape_problem` says what is wrong)."""
    if not isinstance(settings, Mapping):
        return None
    if SECTION in settings:
        inner = settings[SECTION]
        return inner if isinstance(inner, Mapping) else None
    return settings


def shape_problem(settings: Any) -> str | None:
    """Why settings sent for this server hold none: they, or their `completer`, are not an object (null is
    nothing sent). Read as the bare settings, `"completer": [...]` was an unknown setting named completer."""
    if settings is not None and not isinstance(settings, Mapping):
        return f"settings must be an object, such as {{\"{SECTION}\": {{\"beams\": 2}}}}, not {_kind(settings)}"
    inner = settings.get(SECTION) if settings is not None else None
    if inner is not None and not isinstance(inner, Mapping):
        return f"{SECTION} must be an object of settings, such as {{\"beams\": 2}}, not {_kind(inner)}; ignored"
    return None


def _short_repr() -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxlevel, short.maxdict, short.maxlist, short.maxtuple = 2, 4, 6, 6
    short.maxstring = short.maxother = short.maxlong = 80
    return short


_SHORT = _short_repr()


def quoted(value: Any) -> str:
    """A setting's value (or name) as a message quotes it, cut short and built at a bounded cost: a value of kilobytes
    (generated, or nested junk) made a popup and a log line of kilobytes for each key."""
    return _SHORT.repr(value)


def _kind(value: Any) -> str:
    """A JSON value's type, as a message names it (never the value: it may be long, or a secret pasted there)."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", tuple: "a list"}.get(type(value), type(value).__name__)


def _integer(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} must be an integer, got {quoted(value)}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{key} must be an integer, got {quoted(value)}")
        value = int(value)
    return value


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint(value: Any) -> str:
    """An endpoint URL the server may send code to: https anywhere, plain http only to this machine. The
    messages never repeat the value: a key pasted here by mistake must not reach the logs."""
    example = "a URL such as http://127.0.0.1:8080/v1"
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"endpoint must be {example}")
    url = value.strip().rstrip("/")
    if not all("!" <= char <= "~" for char in url):
        raise ValueError(f"endpoint must be {example}, in plain ASCII without spaces (an international domain "
                         "name in its xn-- form)")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise ValueError(f"endpoint must be {example}: its host or port cannot be read") from None
    if parts.scheme not in ("http", "https") or not host:
        raise ValueError(f"endpoint must be {example}: an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise ValueError("endpoint must not hold credentials; name an environment variable in apiKeyEnv")
    if any(_CREDENTIAL.search(name) for name, _ in parse_qsl(parts.query, keep_blank_values=True)):
        raise ValueError("endpoint must not hold a key or token in its query (the endpoint is logged and shown); name "
                         "an environment variable in apiKeyEnv, whose key is sent as Authorization: Bearer")
    if parts.scheme == "http" and not is_loopback(host):
        raise ValueError(f"endpoint: plain http is allowed only to this machine (localhost, 127.0.0.1, ::1), not "
                         f"{host}; use https for another host")
    return url


_CREDENTIAL = re.compile(r"key|token|secret|passw|auth|sig(nature)?$|credential", re.IGNORECASE)
"""Query parameter names that carry a credential (api_key, api-key, access_token, Subscription-Key, sig): one
in the endpoint would be logged with it, and shown in completer/info and the status bar's tooltip."""
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
_KEY_LIKE = re.compile(r"[A-Z0-9]{24}")
"""A run this long without an underscore is a key's, not a variable name's (API_KEY, TEAM_COMPLETIONS_KEY)."""


def _coerce_remote(key: str, value: Any) -> Any:
    if key == "backend":
        if value not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {quoted(value)}")
        return value
    if key == "endpoint":
        return check_endpoint(value)
    if key == "model":
        if not isinstance(value, str):
            raise ValueError(f"model must be a string, got {quoted(value)}")
        if len(value) > MODEL_NAME_CHARS or not value.isprintable():
            raise ValueError(f"model must be the name the endpoint serves, of at most {MODEL_NAME_CHARS} printable "
                             f"characters, got {quoted(value)}")
        return value.strip()
    if key == "apiKeyEnv":
        if not isinstance(value, str) or not _ENV_NAME.fullmatch(value) or _KEY_LIKE.search(value):
            raise ValueError("apiKeyEnv must be the name of an environment variable, in capitals, such as "
                             "TEAM_COMPLETIONS_KEY (the key itself never goes in settings)")
        return value
    if key == "fimTemplate":
        allowed = ("auto", "none", *FIM_TEMPLATES)
        if value not in allowed:
            raise ValueError(f"fimTemplate must be one of {', '.join(allowed)}, got {quoted(value)}")
        return value
    limits = {"requestTimeoutMs": (100, 120000), "promptChars": (256, MAX_CONTEXT_CHARS), "endpointChoices": (1, 16)}
    low, high = limits[key]
    number = _integer(key, value)
    if not low <= number <= high:
        raise ValueError(f"{key} must be between {low} and {high}, got {number}")
    return number


def _coerce(key: str, value: Any) -> Any:
    """Check one value's JSON type and turn it into the Python value; ValueError names the key."""
    if key in REMOTE_KEYS:
        return _coerce_remote(key, value)
    if key == "modelPath":
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValueError(f"modelPath must be a string or null, got {quoted(value)}")
        try:
            os.fsencode(value)  # a lone surrogate (a JSON escape) names no file, nor a model to convert
        except UnicodeEncodeError:
            raise ValueError(f"modelPath must be a path, got {quoted(value)} (a lone surrogate)") from None
        if "\0" in value:
            raise ValueError(f"modelPath must be a path, got {quoted(value)} (a NUL character)")
        return os.path.expanduser(value)
    if key == "device":
        if not isinstance(value, str):
            raise ValueError(f"device must be \"auto\", \"cpu\" or \"cuda\", got {quoted(value)}")
        return value.lower()
    if key == "enabledLanguages":
        return _languages(value)
    if key == "excludeFiles":
        return check_patterns(value)
    if key in ("completionItems", "inlineCompletions", "documentRepeats", "searchAhead", "fillInTheMiddle",
               "workspaceContext"):
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {quoted(value)}")
        return value
    return _integer(key, value)


def _languages(value: Any) -> tuple[str, ...]:
    """enabledLanguages' ids, each as LSP spells it where it names one in other letter case (`Python`), else as
    written: documents are matched by their id exactly, and such an id, or an empty one, matched none, silently."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"enabledLanguages must be a list of language ids, got {quoted(value)}")
    ids = [v.strip() for v in value]
    if not all(ids):
        raise ValueError(f"enabledLanguages must be a list of language ids such as [\"python\"] ([\"*\"] for all), "
                         f"not an empty one: got {quoted(value)}")
    known = LANGUAGE_IDS | FILETYPES.keys()
    return tuple(v.lower() if v not in known and v.lower() in known else v for v in ids)


def _with_key(settings: ServerSettings, key: str, value: Any, defaults: ServerSettings) -> ServerSettings:
    """`settings` with one key changed and checked; ValueError or TypeError names what is wrong."""
    if key in ENGINE_KEYS:
        name = ENGINE_KEYS[key]
        coerced = getattr(defaults.engine, name) if value is None else _coerce(key, value)
        engine = dataclasses.replace(settings.engine, **{name: coerced})
        try:
            engine.validate()
        except ValueError as exc:  # EngineSettings names its fields as Python does; the user wrote the settings'
            raise ValueError(_SNAKE_NAMES.sub(lambda found: _CAMEL_NAMES[found.group(0)], str(exc))) from None
        return dataclasses.replace(settings, engine=engine)
    if key in REMOTE_KEYS:
        name = REMOTE_KEYS[key]
        coerced = getattr(defaults.remote, name) if value is None else _coerce(key, value)
        return dataclasses.replace(settings, remote=dataclasses.replace(settings.remote, **{name: coerced}))
    name = SERVER_KEYS[key]
    coerced = getattr(defaults, name) if value is None else _coerce(key, value)
    if key == "workspaceMemoryMb" and not 1 <= coerced <= 4096:
        raise ValueError(f"workspaceMemoryMb must be between 1 and 4096, got {coerced}")
    return dataclasses.replace(settings, **{name: coerced})


_CAMEL_NAMES = {snake: camel for camel, snake in ENGINE_KEYS.items() if snake != camel}
_SNAKE_NAMES = re.compile(r"\b(?:" + "|".join(map(re.escape, _CAMEL_NAMES)) + r")\b")


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
    known = ENGINE_KEYS.keys() | SERVER_KEYS.keys() | REMOTE_KEYS.keys()
    unknown = [str(key) for key in changes if key not in known]
    pending = {key: value for key, value in changes.items() if key in known}
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
    if "excludeFiles" in changes and "excludeFiles" not in errors:
        warnings += _unusable_warning(unusable_patterns(changes["excludeFiles"]))
    return new, warnings, unknown


PATTERNS_NAMED = 5
"""The unusable excludeFiles patterns a warning quotes; the rest are counted."""


def _unusable_warning(bad: list[str]) -> list[str]:
    """What the user is told of excludeFiles lines that are no .gitignore pattern (lsp/exclusions.check_patterns
    leaves them out and adds the defaults)."""
    if not bad:
        return []
    named = ", ".join(quoted(item) for item in bad[:PATTERNS_NAMED])
    more = f" and {len(bad) - PATTERNS_NAMED} more" if len(bad) > PATTERNS_NAMED else ""
    return [f"Ignoring {named}{more} in {SECTION}.excludeFiles: not a .gitignore pattern. The other patterns "
            "apply, with the default ones too until it is fixed"]


_BY_FOLDED_KEY = {key.lower(): key for key in (*ENGINE_KEYS, *SERVER_KEYS, *REMOTE_KEYS)}
"""Every setting by its name in lower case: what a misspelling is compared with."""


def likely_meant(unknown: str) -> str | None:
    """The setting an unknown key is most likely a misspelling of (`maxSuggestion`, `enabled_languages`), if
    any is close enough."""
    folded = unknown.lower().replace("_", "").replace("-", "")
    if folded in _BY_FOLDED_KEY:
        return _BY_FOLDED_KEY[folded]
    found = difflib.get_close_matches(folded, [key for key in _BY_FOLDED_KEY if key[0] == folded[:1]], n=1,
                                      cutoff=0.85)
    return _BY_FOLDED_KEY[found[0]] if found else None  # the same first letter: not disabledLanguages for enabled...


def engine_dict(settings: ServerSettings) -> dict[str, Any]:
    """EngineSettings as a plain dict for the worker, with the model's folder resolved here, as this server
    sees it: the shared engine runs with the environment of whichever server started it, in /, so
    COMPLETER_MODEL and a relative modelPath must mean what they mean to this window."""
    from completer.bundle import bundle_dir

    out = dataclasses.asdict(settings.engine)
    out["model_path"] = str(bundle_dir(settings.engine.model_path).absolute())
    return out
