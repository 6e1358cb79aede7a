"""Where the line after Enter starts: the indentation an editor gives it, and the likeliest others.

The worker searches that line ahead while the user pauses at the end of a line (Engine.search_next_line),
and the search pays only when the guess is the indentation the editor then really gives the new line.
Editors indent after a colon and dedent after `return`; under a bracket left open, code is aligned with
the bracket's contents or hangs one or two levels deeper.
"""
from __future__ import annotations

from .filters import scan

DEDENTING = ("return", "pass", "raise", "break", "continue")  # editors dedent the line after these


def next_line_indent(line: str) -> str:
    """The indentation an editor gives a new line when Enter is pressed at the end of `line`: under a bracket
    it leaves open, see `continuation_indents`; otherwise one level deeper after a colon, one level shallower
    after a statement that ends its block, the same otherwise."""
    continued = continuation_indents(line)
    if continued:
        return continued[0]
    indent = line[:len(line) - len(line.lstrip(" "))]
    code = line.strip()
    if code.endswith(":"):
        return indent + "    "
    if code.split(" ", 1)[0].rstrip(";") in DEDENTING:
        return indent[:-4]
    return indent


def continuation_indents(line: str) -> list[str]:
    """Where the line after `line` starts when `line` leaves a bracket open (outside strings and comments),
    likeliest first; [] when it leaves none open. With code after the bracket, under that code's first
    character (PEP 8's aligned continuation line, the stdlib's usual style), else at `line`'s own
    indentation (an editor that does not align). With nothing after it, a hanging indent: one level deeper
    (PEP 8), else two (Vim's default for an open bracket)."""
    state = scan(line)
    if state.triple or not state.opened_at:
        return []
    opened = state.opened_at[-1]
    indent = line[:len(line) - len(line.lstrip(" "))]
    if line[opened + 1:state.code_end].strip():
        return [" " * (opened + 1), indent]
    return [indent + "    ", indent + "        "]


STATEMENT_LINES = 40  # how far up a statement continued over several lines is looked for


def statement_line(above: str, line: str) -> str:
    """`line` as one line of the statement it ends: when it closes brackets opened on lines above (the
    `metavar=None):` that ends a long signature), the statement's first line (code only) joined to it, so
    its indentation and first word are the statement's and its ending is `line`'s; else `line` itself."""
    if not scan(line).broken:
        return line
    lines = above.split("\n")[-STATEMENT_LINES:]
    for start in range(len(lines) - 1, -1, -1):
        state = scan("\n".join(lines[start:] + [line]))
        if not state.broken and not state.stack and not state.triple:
            first = lines[start]
            return first[:scan(first).code_end].rstrip() + " " + line.strip()
    return line


def next_line_indents(line: str, above: str = "") -> list[str]:
    """The indentations the line after `line` most likely starts at, likeliest first: the editor's
    (`next_line_indent`, of the whole statement `line` ends when it closes brackets opened in `above`, the
    text before it), then a second guess: under an open bracket, the other of `continuation_indents`;
    elsewhere, unless the statement opens a block, one level shallower, where the user goes when the block
    ends without a `return` (the keystroke that dedents asks again)."""
    continued = continuation_indents(line)
    if continued:
        return continued
    line = statement_line(above, line)
    indent = next_line_indent(line)
    return [indent] if line.rstrip().endswith(":") or not indent else [indent, indent[:-4]]
