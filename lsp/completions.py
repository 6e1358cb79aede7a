"""Turn engine suggestions into LSP CompletionItems and InlineCompletionItems.

Both kinds replace the whole cursor line, [(line, 0), (line, end)], with the suggested line, so
accepting yields exactly that line whatever the client's notion of a "word" is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from lsprotocol import types

from completer.types import SOURCE_PARTIAL_LINE

TRIGGER_CHARACTERS = [chr(c) for c in range(0x20, 0x7F)]
"""Every printable ASCII character: whole-line suggestions change with any keystroke."""


@dataclass(frozen=True)
class LineSuggestion:
    line: str  # the whole line once accepted
    score: float | None  # the model's log-probability; None for a line copied from further up the file
    partial: bool = False  # only the start of a line the search could not finish (completer/partial_lines.py)


def detail(suggestion: LineSuggestion) -> str:
    """What the client shows beside an item: the model's score, or that the line is one from above, or
    that it is the start of a longer line."""
    if suggestion.score is None:
        return "completer · a line further up the file"
    if suggestion.partial:
        return f"completer · the start of a longer line · score {suggestion.score:.2f}"
    return f"completer · score {suggestion.score:.2f}"


def suggested_lines(current: str, column: int, suggestions: Iterable[dict[str, Any]],
                    limit: int) -> list[LineSuggestion]:
    """Whole resulting lines, best first, without duplicates or no-op suggestions.

    The line is rebuilt as the user's own text before the cursor plus the inserted text, so
    accepting never rewrites what the user typed (the engine sees a normalised copy: tabs
    expanded, NULs removed)."""
    prefix = current[:column]
    seen: set[str] = set()
    out: list[LineSuggestion] = []
    for s in suggestions:
        text = s.get("text")
        if not isinstance(text, str):
            continue
        text = text.rstrip("\r\n")
        line = prefix + text
        if not text.strip() or line == current or line in seen:
            continue
        seen.add(line)
        score = s.get("score")
        out.append(LineSuggestion(line, float(score) if isinstance(score, (int, float)) else None,
                                  s.get("source") == SOURCE_PARTIAL_LINE))
        if len(out) >= limit:
            break
    return out


def line_range(line_no: int, end_units: int) -> types.Range:
    return types.Range(types.Position(line_no, 0), types.Position(line_no, end_units))


def completion_list(lines: list[LineSuggestion], line_no: int, end_units: int) -> types.CompletionList:
    """isIncomplete=True: the client must ask again on the next keystroke, not filter old lines."""
    rng = line_range(line_no, end_units)
    items = []
    for rank, s in enumerate(lines):
        items.append(types.CompletionItem(
            label=s.line.strip(),
            kind=types.CompletionItemKind.Text,
            detail=detail(s),
            sort_text=f"{rank:04d}",
            filter_text=s.line,
            preselect=rank == 0,
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(range=rng, new_text=s.line),
        ))
    return types.CompletionList(is_incomplete=True, items=items)


def inline_list(lines: list[LineSuggestion], line_no: int, end_units: int) -> types.InlineCompletionList:
    rng = line_range(line_no, end_units)
    return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=s.line, range=rng) for s in lines])
