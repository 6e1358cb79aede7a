"""Turn an editor document and cursor into the text the model sees.

The model was trained on LF-only, tab-free text with no NULs, so documents are normalised the same
way. Only the text before the cursor matters, clipped to whole lines at a line index that moves in
steps of CLIP_LINE_STEP lines, so the clipped text (and thus its tokens and KV cache) stays stable
while the user types.
"""
from __future__ import annotations

import re

CLIP_LINE_STEP = 64
MAX_CONTEXT_CHARS = 32768  # text kept before the cursor (and searched below it): far more than the window holds
CLIP_STEP_CHARS = 4096  # clip positions move in these steps, so the clipped text stays stable
OTHER_FILE_CHARS = 16384  # searched of each other open file: its head, where imports and definitions lie
MAX_LINE_CHARS = 4096  # no suggestions inside longer lines (minified or data; training dropped them)
# A suggestion adds at most this much: 0.03 % of validation lines are longer than 160 characters in all,
# and a beam past it is a run-on (a comment banner of `=` extending itself), not a line to offer.
MAX_INSERTED_BYTES = 160
BINARY_SAMPLE_CHARS = 4096
BINARY_SHARE = 0.3
"""Binary files decoded as text are 38-95 % control characters and U+FFFD (measured on .pyc, ELF,
PNG and gzip files); source text is near 0 %, and even a Latin-1 file read as UTF-8 stays below 20 %."""
_NON_TEXT = re.compile("[\x00-\x08\x0e-\x1f\x7f\ufffd]")  # tab, newlines, VT and FF are text


def looks_binary(before: str) -> bool:
    """True when the text just before the cursor is mostly control characters and undecodable
    bytes: a binary file opened as text, where a search would only suggest garbage."""
    sample = before[-BINARY_SAMPLE_CHARS:]
    return len(_NON_TEXT.findall(sample)) > BINARY_SHARE * len(sample)


TAB_SPACES = "    "
"""What `clean` puts for a tab, as the training corpus was cleaned."""


def clean(text: str) -> str:
    """Replace what the tokenizer and model cannot use: NULs, lone surrogates, tabs, CR."""
    if "\x00" in text:
        text = text.replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\t", TAB_SPACES)


def rest_of_line(after: str) -> str:
    """The text after the cursor up to its line's end (CR, LF or CRLF): what a suggestion of the line replaces."""
    return after.split("\n", 1)[0].split("\r", 1)[0]


def split_lines(text: str) -> list[str]:
    """Lines without their terminators; CRLF, CR and LF all end a line, as in LSP."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines_and_breaks(text: str) -> tuple[list[str], list[str]]:
    """`split_lines(text)`, and the terminator that ended each line ("" after the last): an editor that
    inserts "\n" after a lone "\r" has one line break there, not two. Text without a "\r" is split by `str.split`:
    a regular expression match per line cost 0.3 s for a megabyte of blank lines, at each open and, from a client
    that sends the whole text (ALE), twice at every keystroke."""
    if "\r" not in text:
        lines = text.split("\n")
        return lines, ["\n"] * (len(lines) - 1) + [""]
    lines, breaks, start = [], [], 0
    for match in LINE_BREAK.finditer(text):
        lines.append(text[start:match.start()])
        breaks.append(match.group())
        start = match.end()
    lines.append(text[start:])
    breaks.append("")
    return lines, breaks


def context_slice(lines: list[str], line: int, column: int, max_chars: int = MAX_CONTEXT_CHARS
                  ) -> tuple[str, str] | None:
    """Raw (text before the cursor, rest of the cursor's line), or None when the position is outside the document.

    A column past the end of an existing line is clamped to the line end, as LSP asks."""
    if line < 0 or line >= len(lines) or column < 0:
        return None
    current = lines[line]
    column = min(column, len(current))
    start = line
    size = column
    while start > 0 and size + len(lines[start - 1]) + 1 <= max_chars:
        start -= 1
        size += len(lines[start]) + 1
    if start > 0:  # clipped: snap forward to a stable line index
        start = min(line, -(-start // CLIP_LINE_STEP) * CLIP_LINE_STEP)
    before = "\n".join(lines[start:line] + [current[:column]])
    return before, current[column:]


def text_below(lines: list[str], line: int, max_chars: int = MAX_CONTEXT_CHARS) -> str:
    """The whole lines after `line`, as many as fit in `max_chars`: what the editor holds below the cursor,
    which the document's repeats may search too."""
    end, size = line + 1, 0
    while end < len(lines) and size + len(lines[end]) + 1 <= max_chars:
        size += len(lines[end]) + 1
        end += 1
    return "\n".join(lines[line + 1:end])


def head_of_file(text: str, max_chars: int = OTHER_FILE_CHARS) -> str:
    """The whole lines at the start of `text` that fit in `max_chars` (all of it when it fits): what the
    document's repeats search of another open file."""
    if len(text) <= max_chars:
        return text
    return text[:text.rfind("\n", 0, max_chars + 1) + 1]


def clip_before(before: str) -> tuple[str, bool]:
    """The tail of `before` from a line start, at a position that moves in coarse steps; and
    whether the result still starts at the document start."""
    excess = len(before) - MAX_CONTEXT_CHARS
    if excess <= 0:
        return before, True
    start = -(-excess // CLIP_STEP_CHARS) * CLIP_STEP_CHARS
    newline = before.find("\n", start)
    cut = newline + 1 if newline != -1 else start  # no line start after `start`: cut the long line itself
    return before[cut:], False
