"""Where the line after Enter starts: the indentation an editor gives it, and the likeliest others.

The worker searches that line ahead while the user pauses at the end of a line (Engine.search_next_line),
and the search pays only when the guess is the indentation the editor then really gives the new line.
Editors indent after a colon and dedent after `return`; under a bracket left open, code is aligned with
the bracket's contents or hangs one or two levels deeper. In another language (syntax.py) only the brackets
count, and a level is the document's own step (two spaces, four, a tab).
"""
from __future__ import annotations

from collections import Counter

from .filters import scan
from .syntax import PYTHON, Syntax

DEDENTING = ("return", "pass", "raise", "break", "continue")  # editors dedent the line after these
PYTHON_LEVEL = "    "
UNIT_LINES = 200  # how far up the document's indentation step is read


def indent_unit(above: str, last: str = "") -> str:
    """One level of the document's indentation, from the last UNIT_LINES lines of `above` and the line `last`
    after them: a tab where they are indented with tabs, else the commonest step by which a line is indented
    deeper than the line before it; four spaces where none is."""
    steps: Counter[int] = Counter()
    before = 0
    for line in [*above.rsplit("\n", UNIT_LINES)[-UNIT_LINES:], last]:  # not the whole text above, split
        if not line.strip():
            continue
        if line.startswith("\t"):
            return "\t"
        width = len(line) - len(line.lstrip(" "))
        if width > before:
            steps[width - before] += 1
        before = width
    return " " * steps.most_common(1)[0][0] if steps else PYTHON_LEVEL


def _indentation(line: str, syntax: Syntax) -> str:
    """The spaces `line` starts with; in a language other than Python, its tabs too."""
    return line[:len(line) - len(line.lstrip(" " if syntax is PYTHON else " \t"))]


def next_line_indent(line: str, syntax: Syntax = PYTHON, level: str = PYTHON_LEVEL) -> str:
    """The indentation an editor gives a new line when Enter is pressed at the end of `line`: under a bracket
    it leaves open, see `continuation_indents`; otherwise, in Python, one level deeper after a colon, one level
    shallower after a statement that ends its block; the same otherwise."""
    continued = continuation_indents(line, syntax, level)
    if continued:
        return continued[0]
    indent = _indentation(line, syntax)
    code = line.strip()
    if not syntax.statements:
        return indent + level if opens_block(line, syntax) else indent
    if code.endswith(":"):
        return indent + level
    if code.split(" ", 1)[0].rstrip(";") in DEDENTING:
        return indent[:-len(level)]
    return indent


def continuation_indents(line: str, syntax: Syntax = PYTHON, level: str = PYTHON_LEVEL,
                          hanging_from: str | None = None) -> list[str]:
    """Where the line after `line` starts when `line` leaves a bracket open (outside strings and comments),
    likeliest first; [] when it leaves none open. With code after the bracket, under that code's first
    character (PEP 8's aligned continuation line, the stdlib's usual style), else at `line`'s own
    indentation (an editor that does not align). With nothing after it, a hanging indent: one level deeper
    (PEP 8), else two (Vim's default for an open bracket), than `line`, or than `hanging_from` where given (the
    indentation of the statement `line` ends: `    b) {` after `if (a &&`)."""
    state = scan(line, syntax=syntax)
    if state.triple or state.heredoc or not state.opened_at:  # a here-document's body is text
        return []
    opened = state.opened_at[-1]
    indent = _indentation(line, syntax)
    if line[opened + 1:state.code_end].strip():
        if "\t" in indent or level == "\t":  # tabs do not align under a column: one more level (gofmt's)
            return [indent + level, indent]
        return [" " * (opened + 1), indent]
    indent = indent if hanging_from is None else hanging_from
    return [indent + level, indent + level * 2]


def opens_block(line: str, syntax: Syntax) -> bool:
    """Whether `line`'s code (outside its comment) ends with a keyword of `syntax` that opens a block (Lua's
    `then`, the shell's `do`); Python's colon is read by `next_line_indent` itself."""
    if syntax.opens_block is None:
        return False
    return syntax.opens_block.search(line[:scan(line, syntax=syntax).code_end].strip()) is not None


STATEMENT_LINES = 40  # how far up a statement continued over several lines is looked for
STATEMENT_CHARS = 4096  # and at most this long with the line it ends: each line further up is read again with all
# those below it, and forty lines of a thousand brackets each took more than a second after each keystroke


def statement_line(above: str, line: str, syntax: Syntax = PYTHON) -> str:
    """`line` as one line of the statement it ends: when it closes brackets opened on lines above (the
    `metavar=None):` that ends a long signature), the statement's first line (code only) joined to it, so
    its indentation and first word are the statement's and its ending is `line`'s; else `line` itself.
    Outside Python a closer with nothing open is `overclosed`, not `broken`, and the statement may leave a
    bracket open (`    b) {` after `if (a &&`)."""
    closes_above = scan(line, syntax=syntax)
    if not (closes_above.broken or closes_above.overclosed):
        return line
    lines = above[-STATEMENT_CHARS:].split("\n")[-STATEMENT_LINES:]
    size = len(line)
    for start in range(len(lines) - 1, -1, -1):
        size += len(lines[start]) + 1
        if size > STATEMENT_CHARS:
            break
        state = scan("\n".join(lines[start:] + [line]), syntax=syntax)
        if not state.broken and not state.overclosed and not state.triple and (
                not state.stack or not syntax.statements):
            first = lines[start]
            return first[:scan(first, syntax=syntax).code_end].rstrip() + " " + line.strip()
    return line


def next_line_indents(line: str, above: str = "", syntax: Syntax = PYTHON) -> list[str]:
    """The indentations the line after `line` most likely starts at, likeliest first: the editor's
    (`next_line_indent`, of the whole statement `line` ends when it closes brackets opened in `above`, the
    text before it), then a second guess: under an open bracket, the other of `continuation_indents`;
    elsewhere, unless the statement opens a block, one level shallower, where the user goes when the block
    ends without a `return` (the keystroke that dedents asks again)."""
    if not syntax.lexical:
        return [_indentation(line, syntax)]  # the same indentation, which every editor gives
    level = PYTHON_LEVEL if syntax.statements else indent_unit(above, line)
    statement = None if syntax.statements else statement_line(above, line, syntax)  # Python's: after its brackets
    hanging_from = None if statement is None else _indentation(statement, syntax)
    continued = continuation_indents(line, syntax, level, hanging_from)
    if continued:
        return continued
    line = statement or statement_line(above, line, syntax)
    indent = next_line_indent(line, syntax, level)
    if opens_block(line, syntax):
        return [indent, indent[:-len(level)]]  # a one-line block (`if a then b() end` read wrong): the same
    block = line.rstrip().endswith(":") and syntax.statements
    return [indent] if block or not indent else [indent, indent[:-len(level)]]
