"""Typing through: a keystroke that types the start of the last answer's suggestions is answered by trimming
them, with no model and no request. The local engine and the remote backend both answer this way."""
from __future__ import annotations

from dataclasses import dataclass, replace

from .types import SOURCE_PARTIAL_LINE, CompletionResult, Suggestion


@dataclass
class LastAnswer:
    """A document's last answer and the cursor it was given for: the text before it (clipped) and after it."""

    before: str
    after: str
    suggestions: list[Suggestion]
    settings: object = None  # what the answer depends on of the settings it was searched with (ahead.answering)


def typed_through(last: LastAnswer | None, before: str, after: str) -> CompletionResult | None:
    """The last answer's suggestions that the text typed since still begins, trimmed by it; or, when the
    typed text finished one of them (the user accepted it, or typed all of it), an empty answer with no
    search: a line just finished is not extended (`main(sys.stdout)` followed by `.close()`) until the next
    keystroke or Enter. The start of a longer line (completer/partial_lines.py) finishes nothing: the model is
    asked for the rest. None when the last answer does not apply: the model is asked."""
    if last is None or after != last.after or not before.startswith(last.before):
        return None
    typed = before[len(last.before):]
    if not typed or "\n" in typed:
        return None
    kept = [replace(s, text=s.text[len(typed):], start=s.start + len(typed), end=s.end + len(typed))
            for s in last.suggestions if s.text.startswith(typed) and not _only(s.text[len(typed):], after)]
    if kept:
        return CompletionResult(suggestions=kept)
    if typed.strip() and any(s.text.startswith(typed.rstrip()) and _only(s.text[len(typed.rstrip()):], after)
                             and s.source != SOURCE_PARTIAL_LINE for s in last.suggestions):
        return CompletionResult()
    return None


def _only(rest: str, after: str) -> bool:
    """Whether a suggestion's `rest` writes nothing the line does not have: whitespace, or the text after the
    cursor as it is (the comment there, which a suggestion keeps: filters.kept_comment)."""
    return not rest.strip() or rest.strip() == after.strip()
