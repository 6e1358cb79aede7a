"""The order of the lines an answer shows, after the search: a line that finishes the word at the cursor as a
name the file or the workspace already uses goes before one that invents it; the line that follows copies of the
lines above (in the file or the repository), or on a first line the line most of the workspace's files start
with, goes first. Each only reorders (or adds that one line), so the search's own suggestions are never lost."""
from __future__ import annotations

import asyncio
from typing import Callable

from completer.earlier_lines import following_line, header_line
from completer.known_names import known_word_first, used_in
from completer.syntax import PYTHON, Syntax
from completer.text import MAX_CONTEXT_CHARS, clean
from lsp.completions import LineSuggestion, Target, with_tabs, writes_indentation

FOLLOWERS_WAIT = 0.05
"""How long an answer waits, after its search, for the lines after the lines above to be found in the repository."""


def known_names_first(lines: list[LineSuggestion], target: Target, document: list[str],
                      in_workspace: Callable[[str], bool] | None) -> list[LineSuggestion]:
    """`lines` with those that finish the word at the cursor as a name the document (its other lines) or
    another file of the workspace (`in_workspace`, when there is an index) uses first
    (completer/known_names.py)."""
    other_lines: str | None = None  # the document's lines but the cursor's, joined only if a name needs them

    def is_known(name: str) -> bool:
        nonlocal other_lines
        if in_workspace is not None and in_workspace(name):
            return True
        if other_lines is None:
            other_lines = "\n".join(document[:target.line_no]) + "\n" + "\n".join(document[target.line_no + 1:])
        return used_in(other_lines, name)

    order = known_word_first([s.line for s in lines], target.current[:target.column], is_known)
    if order == [s.line for s in lines]:
        return lines
    by_line = {s.line: s for s in lines}
    return [by_line[line] for line in order]


async def following_first(following: asyncio.Future | None, lines: list[LineSuggestion], target: Target,
                          before: str, document: list[str], most: int, syntax: Syntax = PYTHON,
                          indents_with_tabs: Callable[[], bool] = lambda: False) -> list[LineSuggestion]:
    """`lines` with the one line that follows the lines above the cursor in the file and the repository
    (completer/earlier_lines.py, `following_line`) first, when there is one. A lookup of the repository
    still running FOLLOWERS_WAIT after the search (a slow disk) puts nothing first this time. Its indentation
    is given back as the engine's is (`put_first`)."""
    followers: list[tuple[str, str]] = []
    if following is not None:
        try:
            followers = await asyncio.wait_for(asyncio.shield(following), FOLLOWERS_WAIT)
        except asyncio.TimeoutError:
            return lines
    cut = before.rfind("\n") + 1
    found = following_line(before[:cut], before[cut:], followers, clean(next_code_line(document, target.line_no + 1)),
                           syntax)
    if found is None:
        return lines
    return put_first(lines, target, found[0][len(before) - cut:], found[1], most, indents_with_tabs)


async def header_first(header: asyncio.Future, lines: list[LineSuggestion], target: Target,
                       document: list[str], most: int, syntax: Syntax = PYTHON,
                       indents_with_tabs: Callable[[], bool] = lambda: False) -> list[LineSuggestion]:
    """`lines` with the line most of the workspace's files start with first (completer/earlier_lines.py,
    `header_line`), on a document's first line, when it begins with the typed text. A lookup still running
    FOLLOWERS_WAIT after the search puts nothing first this time."""
    try:
        common = await asyncio.wait_for(asyncio.shield(header), FOLLOWERS_WAIT)
    except asyncio.TimeoutError:
        return lines
    typed = clean(target.current[:target.column])
    found = header_line("", typed, common, clean(next_code_line(document, 1)), syntax)
    if found is None:
        return lines
    return put_first(lines, target, found[len(typed):], True, most, indents_with_tabs)


def next_code_line(document: list[str], start: int) -> str:
    """The first line from line `start` on that holds code, among the lines the engine reads below the cursor
    (whole lines within MAX_CONTEXT_CHARS: completer/text.py, `text_below`); "" when none does. Looked for in
    place, not in a copy of a long document's tail: past a million blank lines it took 125 ms of the server's loop
    at every keystroke above them."""
    size = 0
    for number in range(start, len(document)):
        line = document[number]
        if line.strip():
            return line
        size += len(line) + 1
        if size > MAX_CONTEXT_CHARS:
            break
    return ""


def put_first(lines: list[LineSuggestion], target: Target, rest: str, workspace: bool, most: int,
              indents_with_tabs: Callable[[], bool] = lambda: False) -> list[LineSuggestion]:
    """`lines` with the user's typed text and `rest` first (at most `most` lines), unless that is the line as
    it stands. `rest` is read from text with tabs as spaces (completer/text.py's `clean`): indentation it starts
    with goes back as tabs where the document indents with them, as the engine's does (`suggested_lines`)."""
    typed = target.current[:target.column]
    if writes_indentation(typed, rest) and indents_with_tabs():
        rest = with_tabs(rest)
    line = typed + rest  # the user's own typed text
    if line == target.current:
        return lines
    first = LineSuggestion(line, None, workspace=workspace)
    same = clean(line)  # the engine's copy of it, tabs given back (`with_document_tabs`), is the same line
    return [first, *(s for s in lines if clean(s.line) != same)][:most]
