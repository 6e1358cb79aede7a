"""Whole-line suggestions from lines another engine generated (an OpenAI-compatible endpoint): the prompt it is
sent, and its completions turned into suggestions with the local engine's clipping, filters and typing through.
No HTTP here (lsp/remote_backend.py sends the prompt), so all of it is tested without a server.
"""
from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from .fim import FIM_TEMPLATES, fim_prompt
from .filters import CONTEXT_LINES, LineContext, kept_comment, kept_insertion, line_context
from .syntax import Syntax, syntax_for
from .repository import (LINE_BREAKS, REPOSITORY_FORMATS, SNIPPET_CHARS, RepositoryContext, document_opening, fitted,
                         repository_head)
from .text import MAX_INSERTED_BYTES, MAX_LINE_CHARS, clean, clip_before, looks_binary, rest_of_line
from .types import SKIPPED_BINARY, SKIPPED_LONG_LINE, SOURCE_REMOTE, CompletionResult, Suggestion, at_cursor
from .typing_through import LastAnswer, typed_through

PROMPT_CHARS = 6000
"""Text before the cursor sent by default: about 1,500-2,000 tokens of code, which fits every code model's
window beside the lines below and the generated line."""
BELOW_CHARS = 1500
"""Lines below the cursor a FIM prompt sends at most: the nearest ones say most."""
DOCUMENTS_KEPT = 256
"""Documents whose last answer is kept for typing through."""

_HASH_COMMENTS = {".py", ".pyi", ".rb", ".sh", ".bash", ".zsh", ".yaml", ".yml", ".toml", ".r", ".pl", ".jl",
                  ".ex", ".exs", ".nim", ".cmake", ".ps1", ".tf"}
_DASH_COMMENTS = {".lua", ".sql", ".hs", ".elm", ".ada", ".vhd"}


def line_comment(uri: str, language: str | None = None) -> str:
    """The line-comment marker of a document's language (an LSP id, when the client named one whose comments
    syntax.py knows: a shell script with no extension), else of its file name: snippets go in commented out."""
    known = syntax_for(language).line_comments if language else ()
    if known:
        return known[0] + " "
    suffix = PurePosixPath(uri).suffix.lower()
    if suffix in _HASH_COMMENTS:
        return "# "
    if suffix in _DASH_COMMENTS:
        return "-- "
    return "// "


def clip_prompt(before: str, limit: int) -> str:
    """The tail of `before` the prompt holds: at most `limit` characters, cut at a line start that moves in
    steps of a quarter of the limit, so that consecutive prompts share a long head (an inference server's
    prefix cache then reuses it)."""
    excess = len(before) - limit
    if excess <= 0:
        return before
    step = max(1, limit // 4)
    start = -(-excess // step) * step
    newline = before.find("\n", start)
    return before[newline + 1:] if newline != -1 else before[start:]


def clip_below(below: str) -> str:
    """The lines below the cursor a FIM prompt sends: at most BELOW_CHARS, cut at a line end."""
    return below[:below.rfind("\n", 0, BELOW_CHARS + 1) + 1] if len(below) > BELOW_CHARS else below


def without_markers(text: str, template: str) -> str:
    """`text` with the template's markers taken out: an inference server reads a marker in a prompt's text as its
    special token (llama.cpp and vLLM parse them), so a document that holds one, such as code that builds FIM
    prompts, would lay the prompt out wrong (the local engine reads them as text)."""
    markers = [marker.strip() for marker in FIM_TEMPLATES[template]]
    if template in REPOSITORY_FORMATS:
        markers += REPOSITORY_FORMATS[template].markers
    while any(marker in text for marker in markers):  # removing one may join the text around it into another
        for marker in markers:
            text = text.replace(marker, "")
    return text


def snippet_head(snippets: Sequence[str], uri: str, limit: int = SNIPPET_CHARS, language: str | None = None) -> str:
    """The repository's snippets most like the code at the cursor, commented out in the document's language,
    each under a line that says what it is, within `limit` characters (each cut to the lines that fit)."""
    comment = line_comment(uri, language)
    parts: list[str] = []
    size = 0
    for snippet in snippets:
        block = fitted(f"{comment}A similar part of the repository:\n", snippet, limit - size, comment)
        if block is not None:
            parts.append(block)
            size += len(block)
    return "".join(parts)


@dataclass(frozen=True)
class PromptRequest:
    """One prompt for the endpoint, and what turns its completions into suggestions."""

    prompt: str
    before: str  # the text before the cursor, clipped as the engine clips it (typing through compares it)
    typed_line: str
    after: str  # the rest of the cursor's line, which a suggestion replaces
    context: LineContext
    comment: str = ""  # the comment `after` ends with, which a suggestion keeps (filters.kept_comment)
    answering: object = None  # the settings its answer depends on: typing through trims it under those alone


class RemoteAnswers:
    """The per-document state of the remote backend: the last answer, for typing through."""

    def __init__(self, documents_kept: int = DOCUMENTS_KEPT) -> None:
        self._last: collections.OrderedDict[str, LastAnswer] = collections.OrderedDict()
        self._documents_kept = documents_kept
        self._context: tuple[str, Syntax, LineContext] | None = None  # the last lines above a cursor's line, read

    def _line_context(self, head: str, syntax: Syntax) -> LineContext:
        """The filters' view of `head`, the lines above the cursor's line, read again only when they change (as the
        engine does): each keystroke on a line asked the endpoint anew read up to CONTEXT_LINES lines above it on
        the server's loop, 2.6 ms in a JavaScript file and 13 ms in one of data arrays."""
        if self._context is None or self._context[0] != head or self._context[1] is not syntax:
            lines = head[:-1].rsplit("\n", CONTEXT_LINES) if head else []
            self._context = (head, syntax, line_context(lines, syntax))
        return self._context[2]

    def prepare(self, uri: str, before: str, after: str, below: str = "", snippets: Sequence[str] = (),
                fim_template: str | None = None, prompt_chars: int = PROMPT_CHARS,
                repository: RepositoryContext | None = None, language: str | None = None, answering: object = None
                ) -> CompletionResult | PromptRequest:
        """The answer when no request is needed (typing through an answer of the same `answering` settings, a long
        line, binary text), else the prompt:
        fill-in-the-middle with the lines below when `fim_template` names one, else the text before the cursor.
        The snippets go first: as files of the `repository` where the template has a REPOSITORY_FORMATS entry and the
        document lies in a workspace folder, else commented out. `before`, `after` and `below` are cleaned as
        for the engine; the filters follow the rules of the document's `language` (syntax.py)."""
        typed_line = before[before.rfind("\n") + 1:]
        after = rest_of_line(after)
        if len(typed_line) + len(after) > MAX_LINE_CHARS:
            return CompletionResult(skipped=SKIPPED_LONG_LINE)
        before, _ = clip_before(before)
        last = self._last.get(uri)
        through = typed_through(last, before, after) if last is not None and last.settings == answering else None
        if through is not None:
            return through
        if looks_binary(before):
            return CompletionResult(skipped=SKIPPED_BINARY)
        head = before[:before.rfind("\n") + 1]
        context = self._line_context(head, syntax_for(language))
        if fim_template is not None and fim_template in REPOSITORY_FORMATS and repository is not None:
            prompt = repository_head(fim_template, repository) + fim_prompt(
                fim_template, document_opening(fim_template, repository) +
                without_markers(clip_prompt(before, prompt_chars), fim_template),
                without_markers(clip_below(below), fim_template))
        elif fim_template is not None:
            prompt = fim_prompt(fim_template, without_markers(snippet_head(snippets, uri, language=language) +
                                                              clip_prompt(before, prompt_chars), fim_template),
                                without_markers(clip_below(below), fim_template))
        else:
            prompt = snippet_head(snippets, uri, language=language) + clip_prompt(before, prompt_chars)
        return PromptRequest(prompt, before, typed_line, after, context, kept_comment(typed_line, after, context),
                             answering)

    def answer(self, uri: str, request: PromptRequest, texts: Sequence[str], limit: int) -> CompletionResult:
        """Suggestions from the endpoint's completions of `request.prompt`, best first as it ordered them: each
        cut at its first line break, then kept only if the filters let it through, at most `limit`."""
        suggestions: list[Suggestion] = []
        seen: set[str] = set()
        for text in texts:
            inserted = clean(LINE_BREAKS.split(text, 1)[0]).rstrip()
            if (not inserted.isprintable()  # control characters, terminal escapes
                    or len(inserted.encode("utf-8", "replace")) > MAX_INSERTED_BYTES):
                continue
            inserted = kept_insertion(request.typed_line, inserted, request.after, request.comment, request.context)
            if inserted is None or inserted in seen:
                continue
            seen.add(inserted)
            suggestions.append(at_cursor(request.typed_line, inserted, request.after, None, SOURCE_REMOTE))
            if len(suggestions) >= limit:
                break
        self._last[uri] = LastAnswer(request.before, request.after, suggestions, request.answering)
        self._last.move_to_end(uri)
        while len(self._last) > self._documents_kept:
            self._last.popitem(last=False)
        return CompletionResult(suggestions=suggestions)

    def forget(self, uri: str) -> None:
        self._last.pop(uri, None)
