"""An earlier line of the file that begins with what is typed on the cursor's line.

Code repeats whole lines (a call with the same arguments, a decorator, an assert), and the beam
search does not always reach a long one: it may need more than `max_tokens`, or shorter lines may
outscore it. So, as Vim's whole-line completion does, the engine also offers the nearest line above
that begins with the typed text and goes on past it, after the model's own lines; when the file has none,
a line of the workspace's snippets that does (a call written out in another file of the repository). And
where one line always follows the cursor's line above, in the file and in the repository's other files, that
line comes first (`following_line`); on a file's first line, the line most of the repository's files start
with (`header_line`). None of this costs a model run; eval.py measures what it adds
(docs/experiments/2026-11-23-model-history.md, "Lines further up the file", and docs/benchmarks.md, "The
workspace as context").
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

from .filters import CONTEXT_LINES, keep_suggestion, line_context
from .syntax import PYTHON, Syntax
from .text import MAX_LINE_CHARS, clean, split_lines

MIN_FOLLOWED_CHARS = 8  # at a line start, the line above must be this long to say which line comes next
ANCHOR_LINES = 3  # the lines above that may together say it, when the one above is too short


def earlier_line(head: str, typed_line: str, elsewhere: Sequence[str] = ()) -> str | None:
    """A line of the file that `file_line` finds, failing that one of the texts `elsewhere` that
    `workspace_line` finds; None when neither does."""
    return file_line(head, typed_line) or (workspace_line(head, typed_line, elsewhere) if elsewhere else None)


def following_line(head: str, typed_line: str, followers: Sequence[tuple[str, str]] = (), next_line: str = "",
                   syntax: Syntax = PYTHON) -> tuple[str, bool] | None:
    """The one line that follows the lines above the cursor (`anchor_above`) wherever a copy of them stands, in
    `head` (the text above the cursor's line) or in the repository's other files (`followers`: each copy's
    first line with code there and the line after the copy, completer/workspace.py, `WorkspaceIndex.followers`),
    moved to the depth the anchor has here; counting only those that begin with `typed_line` and go on past it.
    None when there are none or several, when it is `next_line` (the first line below the cursor that holds
    code: a line opened above it wants another), or when the filters refuse it. The flag says whether it comes
    from another file.
    On held-out packages such a line is the actual line about two times in three, far more often than the
    model's first line there, so it goes first (docs/benchmarks.md, "The workspace as context")."""
    anchor = anchor_above(head, typed_line)
    if anchor is None:
        return None
    reference_line = statement_start(_last_lines(head, len(anchor)), anchor)
    found: dict[str, bool] = {}
    for pairs, elsewhere in ((_copies_followed(head, anchor), False), (followers, True)):
        for copy, follower in pairs:
            line = reindented(follower, copy, reference_line)
            if line is None and follower.strip() and follower.lstrip().startswith(typed_line.lstrip()):
                return None  # a line that here would lie left of the margin: the code after it is not the same
            if line is not None and line.startswith(typed_line) and line[len(typed_line):].strip():
                found.setdefault(line, elsewhere)
            if len(found) > 1:
                return None
    if len(found) != 1:
        return None
    line, elsewhere = next(iter(found.items()))
    if next_line.strip() and line.strip() == next_line.strip():
        return None
    context = line_context(head[:-1].rsplit("\n", CONTEXT_LINES) if head else [], syntax)
    return (line, elsewhere) if keep_suggestion(line, line[len(typed_line):], "", context) else None


def header_line(head: str, typed_line: str, common_first: str | None, next_line: str = "",
                syntax: Syntax = PYTHON) -> str | None:
    """On a document's first line (`head`, the text above the cursor's line, is empty), the line most of the
    repository's other files start with (`WorkspaceIndex.common_first_line`: a licence header, a shebang), when
    it begins with `typed_line`, goes on past it, is no longer than a line the engine completes in
    (MAX_LINE_CHARS), is not already the next line with code (`next_line`) and the filters keep it; else None."""
    if head or not common_first or len(common_first) > MAX_LINE_CHARS or not common_first.startswith(typed_line) \
            or not common_first[len(typed_line):].strip() or common_first.strip() == next_line.strip():
        return None
    return common_first if keep_suggestion(common_first, common_first[len(typed_line):], "", line_context([], syntax)) \
        else None


def anchor_above(head: str, typed_line: str) -> tuple[str, ...] | None:
    """The lines above the cursor (stripped) that say which line comes next: the line above, or when it holds
    fewer than MIN_FOLLOWED_CHARS characters (blank, a closing bracket, `else:`), it and the lines before it, up
    to ANCHOR_LINES, until they hold that many with code in one of them; None where there are not enough, or the
    typed line spans lines."""
    if "\n" in typed_line or not head:
        return None
    anchor: list[str] = []
    for line in reversed(_last_lines(head, ANCHOR_LINES)):
        anchor.insert(0, line.strip())
        if sum(map(len, anchor)) >= MIN_FOLLOWED_CHARS and any(anchor):
            return tuple(anchor)
    return None


def _last_lines(head: str, count: int) -> list[str]:
    """The last `count` lines of `head` (fewer in a shorter head), split off its end only: this runs at every
    keystroke, and the head may hold thousands of lines."""
    return head.removesuffix("\n").rsplit("\n", count)[-count:]


def reindented(follower: str, copy: str, reference_line: str) -> str | None:
    """`follower`, the line after a copy of the anchor whose first line with code is `copy`, moved by as much as
    `reference_line` (that line here) is deeper than `copy`; None where it would go left of the margin."""
    depth = indentation(follower) + indentation(reference_line) - indentation(copy)
    return " " * depth + follower.lstrip() if depth >= 0 else None


def statement_start(lines: Sequence[str], anchor: Sequence[str]) -> str:
    """Of `lines` (a copy of `anchor`, unstripped), the first that holds code: where its statement starts
    places what follows (a closing bracket's or a continued line's own depth is a matter of style)."""
    return next(line for line, stripped in zip(lines, anchor) if stripped)


def indentation(line: str) -> int:
    return len(line) - len(line.lstrip())


def _copies_followed(text: str, anchor: Sequence[str]) -> Iterator[tuple[str, str]]:
    """For each copy of the `anchor` lines in `text` (the same but for the white space around each line), its
    first line with code and the line after it (right-stripped), nearest the end first; found by the text's own
    search for the anchor's longest line, then the lines around each hit. A line holds one hit at most that is
    the whole line, stripped: the search goes on above the line of each hit, so that a long line holding the
    anchor's line thousands of times (`aaaa...` above `aaaaaaaa`) is read once, not once for each."""
    longest = max(range(len(anchor)), key=lambda number: len(anchor[number]))
    needle, start = anchor[longest], len(text)
    while (start := text.rfind(needle, 0, start)) >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        lines = _lines_around(text, line_start, longest, len(anchor) - longest)
        start = line_start
        if lines is None or [line.strip() for line in lines[:-1]] != list(anchor):
            continue
        yield statement_start(lines, anchor), lines[-1].rstrip()


def _lines_around(text: str, line_start: int, back: int, forward: int) -> list[str] | None:
    """The `back` lines before the line that starts at `line_start`, that line, and the `forward` lines after it
    (each ended by a newline in `text`); None where `text` holds fewer."""
    first = line_start
    for _ in range(back):
        if first == 0:
            return None
        first = text.rfind("\n", 0, first - 1) + 1
    end = line_start
    for _ in range(forward + 1):
        end = text.find("\n", end) + 1
        if end == 0:
            return None
    return text[first:end - 1].split("\n")


def file_line(head: str, typed_line: str) -> str | None:
    """The nearest line of `head` (the text above the cursor's line) that begins with `typed_line` and goes on
    past it with more than whitespace. When the typed line holds no code yet (at a line start every line of the
    same indentation would qualify), only a line that followed a copy of the line above."""
    above = _line_above(head, typed_line)
    if above is None:
        return None
    if not typed_line.strip():
        return next(_lines_after(head, above, typed_line), None)
    return next(_lines_beginning(head, typed_line), None)


def workspace_line(head: str, typed_line: str, snippets: Sequence[str]) -> str | None:
    """Such a line of the workspace's `snippets` (best first: completer/workspace.py): one that follows a line
    equal to the cursor's line above if any does, else the best snippet's lowest; at a line start only one that
    follows a copy of the line above."""
    above = _line_above(head, typed_line)
    if above is None:
        return None
    texts = [_as_in_document(text) for text in snippets]
    if not typed_line.strip():
        return next((line for text in texts for line in _lines_after(text, above, typed_line)), None)
    candidates = [match for text in texts for match in _lines_beginning(text, typed_line, with_above=True)]
    following = next((line for line, before in candidates if above and before == above), None)
    return following or (candidates[0][0] if candidates else None)


def _line_above(head: str, typed_line: str) -> str | None:
    """The cursor's line above, stripped (blank or not); None where no line can be offered: a typed line that
    spans lines, or a line start under a line too short to say which line comes next."""
    if "\n" in typed_line:
        return None
    above = head.removesuffix("\n").rsplit("\n", 1)[-1].strip()
    return None if not typed_line.strip() and len(above) < MIN_FOLLOWED_CHARS else above


def _as_in_document(text: str) -> str:
    """A snippet as the document's text reaches the engine (completer/text.py): a file read from disk may end
    its lines with CRLF or a lone CR, which would keep its lines from matching or put a line break inside an
    offered line, and may indent with tabs, which the document's text has as spaces."""
    return clean("\n".join(split_lines(text)))


def _lines_after(text: str, above: str, typed_line: str) -> Iterator[str]:
    """The lines of `text` that begin with `typed_line`, go on past it, and follow a line that is `above` but
    for the white space around it, nearest the end first; found by the text's own search, not line by line."""
    needle, start = above + "\n" + typed_line, len(text)
    while (start := text.rfind(needle, 0, start)) >= 0:
        if text[text.rfind("\n", 0, start) + 1:start].strip():
            continue  # `above` is only the end of that line
        begin = start + len(above) + 1
        end = text.find("\n", begin)
        line = text[begin:end if end >= 0 else len(text)].rstrip()
        if line[len(typed_line):].strip():
            yield line


def _lines_beginning(text: str, typed_line: str, with_above: bool = False) -> Iterator:
    """The lines of `text` that begin with `typed_line` and go on past it, nearest the end first (with the
    stripped line above each when `with_above`)."""
    text, start = "\n" + text, len(text) + 1
    while (start := text.rfind("\n" + typed_line, 0, start)) >= 0:  # from the nearest line up
        end = text.find("\n", start + 1)
        line = text[start + 1:end if end >= 0 else len(text)].rstrip()
        if line[len(typed_line):].strip():
            yield (line, text[text.rfind("\n", 0, start) + 1:start].strip()) if with_above else line
