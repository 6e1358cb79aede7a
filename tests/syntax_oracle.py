"""Pygments as an oracle of where syntax.py's languages hold strings and comments (tests/test_syntax_oracle.py).

Each position between two characters of a sample is read two ways: by the filters' scan, as the filters read a
line (the lines above scanned one by one as line_context does, then the line's text before the position), and by
Pygments' tokens of the characters on both sides, where they agree; and after each line, the brackets left open
by the scan and by Pygments' code. Pygments runs here, in the tests, only."""
from __future__ import annotations

from dataclasses import dataclass

from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, String, Token

from completer.filters import BLOCK, HEREDOC, NESTED, QUOTED, Scan, scan
from completer.syntax import Syntax

CODE, STRING, COMMENT, TEXT = "code", "string", "comment", "text"  # TEXT: a string or a comment, either
LEXERS = {
    "javascript": "javascript", "javascriptreact": "jsx", "typescript": "typescript", "typescriptreact": "tsx",
    "go": "go", "java": "java", "groovy": "groovy", "swift": "swift", "kotlin": "kotlin", "scala": "scala",
    "csharp": "csharp", "dart": "dart", "c": "c", "objective-c": "objective-c", "d": "d", "cpp": "cpp",
    "cuda-cpp": "cuda", "objective-cpp": "objective-c++", "php": "php", "rust": "rust", "ruby": "ruby", "r": "r",
    "julia": "julia", "elixir": "elixir", "lua": "lua", "shellscript": "bash", "perl": "perl", "sql": "sql",
    "json": "json", "jsonc": "json", "css": "css", "scss": "scss", "less": "less", "haskell": "haskell",
    "elm": "elm", "python": "python",
}
"""Pygments' lexer of each LSP language id that syntax.py reads."""
_COMMENT_CLOSERS = ("*/", "-}", "=#", "=end", "<?")
_WORD_CHARS = {"rust", "julia", "haskell", "elm", "elixir"}  # char literals the scan passes over as it does a word
LAG = 8
"""How many positions the scan may read a string or comment late or early: those inside its opening or closing
(between the slashes of `//`, after the `r` of `r"`), which the scan reads once it has them whole."""


@dataclass(frozen=True)
class Difference:
    """A stretch of positions on one line that the scan and Pygments read differently."""

    line: int  # 1-based
    start: int  # 0-based columns of the positions, the first and the last
    end: int
    ours: str
    theirs: str

    def __str__(self) -> str:
        return f"{self.line}:{self.start}-{self.end} ours={self.ours} pygments={self.theirs}"


def pygments_reading(text: str, language: str, expressions: bool = False) -> list[str | None]:
    """Per character of `text`, what Pygments reads it as: CODE, STRING, COMMENT, TEXT (a documentation comment,
    which Pygments calls a string) or None (whitespace, which Pygments often gives no string's or comment's kind).
    An interpolation's code (`#{x}`, `$(x)`) is read as the string's, as the scan reads it, unless the scan
    reads its `expressions` (JavaScript's `${x}`), and then it is code; a preprocessor line
    is code; a character literal and a regular expression are None where the scan reads them as a word, not a
    string (Rust's 'x', JavaScript's /x/)."""
    lexer = get_lexer_by_name(LEXERS[language], stripnl=False, ensurenl=False,
                              startinline=not text.startswith("<?php"))  # PHP's tags, where a sample has them
    kinds: list[str | None] = []
    depth, dollar = 0, False  # brackets open in an interpolation; after Julia's `$` of `$(x)`
    symbol = ""  # the quote of a quoted symbol (Ruby's and Elixir's :"a b") being read
    for token, value in lexer.get_tokens(text):
        if token in String.Symbol and (symbol or value in (':"', ":'")):
            symbol = value[-1] if value in (':"', ":'") else "" if value.endswith(symbol) else symbol
            kinds.extend([STRING] * len(value))  # a string's text, with a colon
            continue
        inside = depth > 0 or dollar
        if token in String.Interpol or inside and token in Token.Punctuation:
            depth = max(0, depth + value.count("{") + value.count("(") - value.count("}") - value.count(")"))
        if token in String.Interpol or inside and not expressions:
            dollar = token in String.Interpol and value.endswith("$")
            kinds.extend([STRING] * len(value))
            continue
        dollar = False
        if token in Comment.Preproc or token in Comment.PreprocFile:
            kind: str | None = CODE
        elif token in Comment:
            kind = COMMENT
        elif token in String.Doc:
            kind = TEXT
        elif token in String.Regex and not language == "perl" or token in String.Char and language in _WORD_CHARS \
                or token in String.Escape:
            kind = None  # an escape outside quotes is a character too (the shell's it\'s)
        elif token in Token.Other and language == "php":
            kind = COMMENT  # the HTML around PHP's tags, which the scan reads as a comment's text
        elif token in Token.Name.Tag and language in ("json", "jsonc"):
            kind = STRING  # a key
        elif token in String and not (token in String.Symbol or token in String.Affix):
            kind = STRING
        else:
            kind = CODE
        kinds.extend(None if ch.isspace() else kind for ch in value)
    assert len(kinds) == len(text), (language, len(kinds), len(text))
    return _variables_in_strings(text, kinds)


def bracket_differences(text: str, language: str, syntax: Syntax) -> list[tuple[int, int, int]]:
    """Per line where they differ, (line, the scan's open brackets after it, Pygments'): Pygments' count is its
    code's brackets, set to the scan's after each difference so that one is met once."""
    kinds = pygments_reading(text, language, syntax.template_expressions)
    found: list[tuple[int, int, int]] = []
    depth, state, at = 0, Scan(), 0
    for number, line in enumerate(text.split("\n"), 1):
        code = [ch for k, ch in enumerate(line) if kinds[at + k] == CODE]
        depth += sum(ch in "([{" for ch in code) - sum(ch in ")]}" for ch in code)
        at += len(line) + 1
        state = scan(line + "\n", state, syntax)
        state.broken = False
        if len(state.stack) != depth:
            found.append((number, len(state.stack), depth))
            depth = len(state.stack)
    return found


def _variables_in_strings(text: str, kinds: list[str | None]) -> list[str | None]:
    """`kinds` with a `$` variable that stands between two parts of a string read as the string's (`"a $x b"`),
    as Pygments reads it as code."""
    at = text.find("$")
    while at != -1:
        end = at + 1
        while end < len(text) and kinds[end] == CODE and (text[end].isalnum() or text[end] in "_{}"):
            end += 1
        before = next((kinds[k] for k in range(at - 1, -1, -1) if kinds[k] is not None), None)
        after = next((kinds[k] for k in range(end, len(text)) if kinds[k] is not None), None)
        if before == STRING and after == STRING:
            kinds[at:end] = [STRING] * (end - at)
        at = text.find("$", end)
    return kinds


def _triple_kind(triple: str) -> str:
    if triple[0] in (NESTED, BLOCK):
        return COMMENT
    if triple[0] in (HEREDOC, QUOTED):
        return STRING
    if triple in _COMMENT_CLOSERS:
        return COMMENT
    if triple.startswith("]") and triple.endswith("]"):
        return TEXT  # Lua's ]], which closes both long strings and long comments
    return STRING


def scan_reading(text: str, syntax: Syntax) -> list[str]:
    """Per position of `text` (before its character), what the scan reads there: CODE, STRING, COMMENT or TEXT."""
    readings: list[str] = []
    state = Scan()
    for line in text.split("\n"):
        start = Scan(list(state.stack), state.triple)
        for column in range(len(line) + 1):
            readings.append(_reading(line[:column], start, syntax))
        state = scan(line + "\n", state, syntax)
        state.broken = False
    return readings[:len(text)]


def _reading(prefix: str, start: Scan, syntax: Syntax) -> str:
    """The scan's reading at the end of `prefix`, the start of a line (whose state is `start`) to a position: in a
    one-line string where the prefix is broken (a string left open, or a bracket) and a character and a quote
    after it mend it (close the string)."""
    end = scan(prefix, Scan(list(start.stack), start.triple), syntax)
    if end.triple:
        return _triple_kind(end.triple)
    if end.code_end < len(prefix):
        return COMMENT
    if end.broken and any(not scan(prefix + "x" + quote, Scan(list(start.stack), start.triple), syntax).broken
                          for quote in syntax.quotes):
        return STRING
    return CODE


def differences(text: str, language: str, syntax: Syntax) -> list[Difference]:
    """Where the scan and Pygments disagree, at positions between two characters that Pygments reads as one kind
    and that the scan does not come to read as that kind within LAG positions on."""
    theirs = pygments_reading(text, language, syntax.template_expressions)
    ours = scan_reading(text, syntax)
    found: list[Difference] = []
    line, column = 1, 0
    for position in range(1, len(text)):
        column += 1
        if text[position - 1] == "\n":
            line, column = line + 1, 0
        kind = theirs[position - 1] if theirs[position - 1] == theirs[position] else None
        if kind is None or any(_agrees(ours[later], kind) for later in range(position, min(
                position + LAG, len(ours))) if all(theirs[k] in (kind, None) for k in range(position, later))):
            continue
        mine = ours[position]
        last = found[-1] if found else None
        if last and last.line == line and last.end == column - 1 and (last.ours, last.theirs) == (mine, kind):
            found[-1] = Difference(line, last.start, column, mine, kind)
        else:
            found.append(Difference(line, column, column, mine, kind))
    return found


def _agrees(mine: str, theirs: str) -> bool:
    return mine == theirs or CODE not in (mine, theirs) and TEXT in (mine, theirs)
