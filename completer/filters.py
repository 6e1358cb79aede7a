"""Checks every suggestion passes before it is shown (JetBrains checks each one the same way).

A suggestion is dropped when it adds nothing but whitespace, only repeats the previous line or
the text already after the cursor, breaks the brackets or quotes, or is a Python statement that
cannot start or end there (`: x`, an indented first line, `x = `, `self.`, `if x` without its
colon). The lines above the cursor decide what is allowed: inside an open bracket a line may close
it or go on; a line that opens a new bracket and leaves it open must end the way multi-line
constructs do (an opener, a comma, an operator); inside a triple-quoted string anything goes.
In another language (syntax.py) only the brackets and strings are checked, read past that language's
comments and strings, or nothing where its rules are not known here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from .syntax import PYTHON, Syntax
from .text import MAX_CONTEXT_CHARS

WHOLE_FILE_CHARS = MAX_CONTEXT_CHARS // 2
"""Text above the cursor shorter than this is the file's own start: the text is clipped to MAX_CONTEXT_CHARS
(text.context_slice, text.clip_before), which leaves far more than this unless a line is longer."""

PAIRS = {")": "(", "]": "[", "}": "{"}
PAIRS_OF = {opener: closer for closer, opener in PAIRS.items()}
OPENERS = set(PAIRS.values())
CONTINUES = ("(", "[", "{", ",", "\\")  # a line ending in one of these goes on below
DANGLING_OPERATORS = (".", "=", "+", "-", "*", "/", "%", "&", "|", "^", "<", ">", "@", "~", "!", ":")
DANGLING_KEYWORDS = {"and", "or", "not", "in", "is", "if", "elif", "while", "for", "with", "from", "import", "as",
                     "def", "class", "lambda", "assert", "del", "async", "await", "else"}
NEVER_FIRST = (":", ",", ";", "=", "%", "/", "|", "&", "^", "<", ">", "!", ".")
"""What no statement starts with, outside brackets and strings (`...`, the ellipsis, is the one exception)."""
BLOCK_KEYWORDS = {"if", "elif", "else", "while", "for", "def", "class", "with", "try", "except", "finally", "async"}
WORD = re.compile(r"\w+")
HEREDOC = "\0"
"""Scan.triple's first character when what it holds is the word that ends a here-document (the shell's <<EOF)."""
HEREDOC_AFTER = ");,."
"""What may follow a here-document's word on its last line: the rest of the statement it began (PHP's `EOT;`,
`EOT, $x);`; the shell's `EOF)` closing a command substitution)."""
QUOTED = "\1"
"""Scan.triple's first character inside the text of a quote-like operator (Perl's qw(...), s{...}{...}); then how
many parts follow this one, the part's opening and closing delimiters and how deep they nest (QUOTED + "0()1"
inside `qw(a b`), or, between two parts, the count alone (QUOTED + "1" after `s{a}`)."""
BLOCK = "\2"
"""Scan.triple's first character inside a block that a line starting with the word after it ends (Perl's POD, to
`=cut`); alone, nothing ends it (the data after Perl's __END__)."""
NESTED = "\3"
"""Scan.triple's first character inside a block comment of a language where they nest (Rust's /* a /* b */ c */);
then how deep, its opening and its closing, apart by spaces (NESTED + "2 /* */")."""
BRACKETING = {"(": ")", "[": "]", "{": "}", "<": ">"}  # delimiters of quoted text that nest
QUOTED_COMMANDS = {'"$(': ")", '"`': "`", "`${": "}"}
"""Scan.stack's entries for code opened inside a string: a command inside the shell's double quotes
("$(basename "$f")"), an expression inside JavaScript's template (`${f(`a`)}`); and what closes each. Closed, the
string goes on; its quote is the entry's first character."""
CONTEXT_LINES = 400  # how far up the bracket and string context is read, at most
ANCHORS = ("def ", "class ", "async def ", "@", "import ", "from ")  # top-level lines outside any string
DEFINITIONS = ("def ", "class ", "async def ", "@")  # indented, these start a method or nested class


@dataclass
class Scan:
    """The lexical state after some text: open brackets, an open multi-line string or comment."""

    stack: list[str] = field(default_factory=list)
    triple: str | None = None  # what ends the multi-line string (Python's triple quote) or comment the text is in
    broken: bool = False  # a mismatched or unmatched closer, or an unterminated one-line string
    overclosed: bool = False  # outside Python, a closer with nothing open (which `broken` is in Python)
    min_depth: int = 0  # the lowest bracket depth reached (below the start: closed brackets from above)
    top_colon: bool = False  # a ':' outside brackets and strings
    code_end: int = 0  # where the last line's code ends (its comment's '#', or its length)
    opened_at: list[int] = field(default_factory=list)  # per open bracket, its index in the text (-1: from `state`)
    heredoc: str | None = None  # the word ending a here-document opened on the last line, whose body is below


def scan(text: str, state: Scan | None = None, syntax: Syntax = PYTHON) -> Scan:
    """Continue `state` over `text` (one or more lines) in `syntax`'s language and return the new state: its
    line and block comments, its one-line strings and those that go on over lines (`triple` then holds what
    ends them), jumping from one character that matters to the next."""
    s = Scan(list(state.stack), state.triple) if state else Scan()
    s.min_depth = len(s.stack)
    s.opened_at = [-1] * len(s.stack)
    i, n = 0, len(text)
    s.code_end = n
    block_comments = syntax.block_comments
    regexes: _RegexEnds | None = None  # where regular expressions end on a line where one did not (`_RegexEnds`)
    if syntax.line_blocks and not s.triple:
        i = _past_block_start(text, 0, s, syntax)
    while i < n:
        if s.triple:
            if s.triple[0] == HEREDOC:
                i = _past_heredoc(text, i, s)
                continue
            if s.triple[0] == QUOTED:
                i = _past_quoted(text, i, s)
                continue
            if s.triple[0] == BLOCK:
                i = _past_block(text, i, s)
                continue
            if s.triple[0] == NESTED:
                i = _past_nested(text, i, s)
                continue
            if s.triple == '"' and syntax.quoted_commands and (command := _quoted_command(text, i)) is not None:
                s.stack.append(command[0])
                s.opened_at.append(command[1])
                s.triple = None
                i = command[1] + 1
                continue
            if s.triple == "`" and syntax.template_expressions and (opened := _template_expression(text, i)) != -1:
                s.stack.append("`${")
                s.opened_at.append(opened)
                s.triple = None
                i = opened + 1
                continue
            end = _closing(text, i, s.triple, escapes=syntax.long_escapes and s.triple[0] in "`\"'"
                           and s.triple not in syntax.raw_quotes, doubled=s.triple in syntax.doubled_quotes)
            if end == -1:
                return s
            i = end + len(s.triple)
            s.triple = None
            continue
        found = syntax.special.search(text, i)
        if found is None:
            break
        i = found.start()
        ch = text[i]
        if ch == "\n":
            s.code_end = n
            if s.heredoc:  # its body starts on the next line
                s.triple, s.heredoc = HEREDOC + s.heredoc, None
            elif syntax.line_blocks:
                i = _past_block_start(text, i + 1, s, syntax)
                continue
        elif syntax.quote_like and found.end() > i + 1:  # found at a quote-like operator, its delimiter last
            delimiter = text[found.end() - 1]
            parts = int(found.groupdict().get("twice") is not None)
            s.triple = f"{QUOTED}{parts}{delimiter}{BRACKETING.get(delimiter, delimiter)}1"
            i = found.end()
            continue
        elif ch in syntax.variable_marks and syntax.variable_at and (variable := syntax.variable_at.match(text, i)):
            i = variable.end()  # Perl's $", $], $#array; Elixir's ?(
            continue
        elif block_comments and (block := next((pair for pair in block_comments if text.startswith(pair[0], i) and (
                pair[0][0] != "=" or i == 0 or text[i - 1] == "\n")), None)):  # Ruby's =begin: first on its line
            s.triple = f"{NESTED}1 {block[0]} {block[1]}" if syntax.nested_comments else block[1]  # before line
            i += len(block[0])  # comments: Lua's `--[[`, Julia's `#=`
            continue
        elif any(text.startswith(marker, i) for marker in syntax.line_comments) and not (
                syntax.not_comment_at and syntax.not_comment_at.match(text, i)):
            newline = text.find("\n", i)
            if newline == -1:
                s.code_end = i
                return s
            i = newline
            continue
        elif s.stack and s.stack[-1] in QUOTED_COMMANDS and text.startswith(QUOTED_COMMANDS[s.stack[-1]], i):
            s.triple = s.stack.pop()[0]  # the command or expression ends; the string around it goes on
            s.opened_at.pop()
            s.min_depth = min(s.min_depth, len(s.stack))
            i += 1
            continue
        elif long := next((pair for pair in syntax.long_strings if text.startswith(pair[0], i)), None):
            s.triple = long[1]
            i += len(long[0])
            continue
        elif ch == "'" and syntax.char_literals:  # a lifetime, a prime, an adjoint, unless a literal: 'x'
            literal = None if _apostrophe(text, i, syntax) else _CHAR_LITERAL.match(text, i)
            i = literal.end() if literal else i + 1
            continue
        elif ch == '"' and syntax.delimited_raw and _word_before(text, i) in syntax.delimited_raw and (
                raw := _RAW_OPENING.match(text, i)):
            s.triple = ")" + raw.group("delimiter") + '"'  # no escape in it: _closing's escapes are for quotes
            i = raw.end()
            continue
        elif ch in syntax.quotes and not (syntax is not PYTHON and ch == "'" and _apostrophe(text, i, syntax)):
            j, escapes = i + 1, syntax.escaping_quotes or (ch not in syntax.raw_quotes and not (
                syntax.raw_prefixes and _word_before(text, i) in syntax.raw_prefixes))
            if ch == '"' and syntax.interpolation and escapes:
                j = _string_end(text, j, syntax)
            else:
                while j < n and text[j] != ch and text[j] != "\n":
                    j += 2 if text[j] == "\\" and escapes else 1
            if j >= n or text[j] == "\n":
                s.broken = True  # a one-line string left open
                if ch in syntax.multiline_quotes:  # or one that goes on below
                    s.triple = ch
                i = j
                continue
            i = j + 1
            continue
        elif ch == "/" and syntax.regex_literals:
            before = text[max(0, i - 40):i].rstrip(" \t") if syntax.regex_follows else ""
            if before and before[-1] != "\n":  # Perl's, not first on its line
                if syntax.regex_follows.search(before):  # type: ignore[union-attr]
                    s.triple = f"{QUOTED}0//1"  # m/.../, which may go on over lines
                i += 1
                continue
            end, regexes = _regex_end(text, i, regexes)
            i = _past_name(text, end) if syntax.quote_like and end > i + 1 else end  # Perl's flags: /x/s ? a : b
            continue
        elif ch in OPENERS:
            s.stack.append(ch)
            s.opened_at.append(i)
        elif ch in PAIRS:
            if s.stack and s.stack[-1] == PAIRS[ch]:
                s.stack.pop()
                s.opened_at.pop()
                s.min_depth = min(s.min_depth, len(s.stack))
            elif ch in syntax.stray_closers and not _in_expansion(text, s):
                pass  # a shell `case` pattern's `a)`
            elif s.stack or syntax is PYTHON:
                s.broken = True
            else:
                s.overclosed = True  # may close what opened above the lines scanned
        elif ch == ":" and not s.stack:
            s.top_colon = True
        elif ch == "<" and syntax.heredoc_at is not None:
            found = syntax.heredoc_at.match(text, i)
            if found is None or s.stack[-2:] == ["(", "("] and s.opened_at[-1] == s.opened_at[-2] + 1:
                # a shift, as in the shell's (( x << 2 )); not Perl's is(f(<<EOF)) nor Ruby's expect(f(<<~EOS))
                i += 1
                continue
            s.heredoc = next(word for name, word in found.groupdict().items() if word and name != "quote")
            i = found.end()
            continue
        elif ch == "\\" and syntax.bare_escapes:
            i += 2  # the shell's \' and \" outside strings are the characters themselves
            continue
        i += 1
    return s


_RAW_OPENING = re.compile(r'"(?P<delimiter>[^()\\\s"]{0,16})\(')  # C++'s R"delimiter(, at most 16 characters
_CHAR_LITERAL = re.compile(r"'(?:\\u\{[0-9A-Fa-f]{1,6}\}|\\x[0-9A-Fa-f]{2}|\\.|[^\\'\n])'")
_REGEX_AFTER = frozenset("(,=:[&|?{};+-*%~^")  # not `<` (JSX's `</a>`) nor `>`; `!` only as a prefix
_REGEX_KEYWORDS = re.compile(r"(?:^|[^\w$.])(?:return|typeof|case|in|of|new|delete|void|throw|yield|await|else|do)\s*$")
_POSTFIX_BANG = re.compile(r"[\w$)\]]!$")  # TypeScript's non-null assertion `x!`, after which `/` divides
_REGEX = re.compile(r"/(?:[^/\\\[\n]|\\.|\[(?:[^\]\\\n]|\\.)*\])+/")


def _closing(text: str, at: int, closer: str, escapes: bool, doubled: bool = False) -> int:
    """Where `closer` next stands in `text` from `at`; with `escapes`, not one a backslash escapes (a template
    literal's \\`), and if `doubled`, not one doubled (C#'s @"a ""b"" c"); -1 where none does."""
    end = text.find(closer, at)
    while doubled and end != -1 and text.startswith(closer, end + len(closer)):
        end = text.find(closer, end + 2 * len(closer))
    while escapes and end > 0:
        slash = end
        while slash and text[slash - 1] == "\\":
            slash -= 1
        if (end - slash) % 2 == 0:
            break
        end = text.find(closer, end + 1)
    return end


def _quoted_command(text: str, at: int) -> tuple[str, int] | None:
    r"""In double quotes from `at`: the stack entry of a `$(` or backquote that opens a command before the
    string's closing quote, and the index of its `(` or backquote, unescaped (`\$(` and `\`` are the characters);
    None when the string closes or the text ends first."""
    j = at
    while j < len(text):
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == '"':
            return None
        if ch == "`":
            return '"`', j
        if ch == "$" and text.startswith("$(", j):
            return '"$(', j + 1
        j += 1
    return None


def _string_end(text: str, at: int, syntax: Syntax, depth: int = 0) -> int:
    """Where the double-quoted string whose text starts at `at` ends on its line: the index of its closing quote,
    or of the line's end or the text's. Its interpolation (`syntax.interpolation`, Ruby's `#{`) holds code to the
    bracket that closes it, whose own strings are read as strings (`"#{h["a ("]}"`, `"${m['}']}"`)."""
    interpolation = syntax.interpolation
    n, opening = len(text), interpolation[-1]
    closing = PAIRS_OF[opening]
    while at < n:
        ch = text[at]
        if ch == '"' or ch == "\n":
            return at
        if ch == interpolation[0] and text.startswith(interpolation, at):  # before escapes: Swift's is `\(`
            if depth == MAX_INTERPOLATIONS:
                newline = text.find("\n", at)
                return n if newline == -1 else newline
            at, brackets = at + len(interpolation), 1
            while at < n and brackets and text[at] != "\n":
                ch = text[at]
                if ch == '"':
                    at = _string_end(text, at + 1, syntax, depth + 1)
                    if at >= n or text[at] == "\n":
                        return at
                elif ch == "'" and "'" in syntax.quotes and not _apostrophe(text, at, syntax):
                    at += 1
                    while at < n and text[at] not in "'\n":
                        at += 2 if text[at] == "\\" else 1
                    if at >= n or text[at] == "\n":
                        return at
                elif ch == opening:
                    brackets += 1
                elif ch == closing:
                    brackets -= 1
                at += 1
            continue
        at += 2 if ch == "\\" else 1
    return n


def _template_expression(text: str, at: int) -> int:
    """In a JavaScript template from `at`: the index of the `{` of a `${` that opens an expression before the
    template's closing backquote, unescaped (`\\${` is the characters); -1 when the template closes or the text
    ends first. Each character is looked at once, however many expressions a line's templates hold."""
    for found in _TEMPLATE_STOP.finditer(text, at):
        if found.group() == "`":
            return -1
        if found.group() == "${":
            return found.start() + 1
    return -1


_TEMPLATE_STOP = re.compile(r"\\.|`|\$\{", re.S)
MAX_INTERPOLATIONS = 8
"""How deep strings inside interpolations inside strings are read (`"#{"#{"a"}"}"`); deeper, the rest of the line
is the outermost string's, so that a line of thousands of `"#{` costs its length, not a recursion per quote."""


def _past_heredoc(text: str, at: int, s: Scan) -> int:
    """Where scanning goes on in `text` from `at`, a line's start inside a here-document: right after the word
    that ends it (first on its line, followed by nothing but what closes the statement: `EOF`, `EOT;`, `EOF)`;
    `s.triple` is then cleared), or the text's end."""
    word = s.triple[1:]  # type: ignore[index]
    while at < len(text):
        end = text.find("\n", at)
        end = len(text) if end == -1 else end
        line = text[at:end]
        start = at + len(line) - len(line.lstrip())
        rest = text[start + len(word):end]
        if text.startswith(word, start) and (not rest.strip() or rest[0] in HEREDOC_AFTER):
            s.triple = None
            return start + len(word)
        at = end + 1
    return len(text)


def _past_quoted(text: str, at: int, s: Scan) -> int:
    """Where scanning goes on in `text` from `at`, inside a quote-like operator's text (`s.triple`, QUOTED): right
    after its last part's closing delimiter (`s.triple` is then cleared), or the text's end. Bracketing delimiters
    nest (q{a {b} c}); a backslash escapes the character after it; a second part starts at the delimiter that
    ends the first (s/a/b/), or after bracketing ones at the next character that is not a space (s{a} {b})."""
    state, n = s.triple, len(text)  # type: ignore[assignment]
    parts = int(state[1])
    if len(state) == 2:  # between two parts
        while at < n and text[at].isspace():
            at += 1
        if at == n:
            return n
        opener, closer, depth = text[at], BRACKETING.get(text[at], text[at]), 1
        at += 1
    else:
        opener, closer, depth = state[2], state[3], int(state[4:])
    while at < n:
        ch = text[at]
        if ch == "\\":
            at += 2
            continue
        at += 1
        if ch == closer:
            depth -= 1
            if depth:
                continue
            if not parts:
                s.triple = None
                return _past_name(text, at)  # and its flags: m/x/s ? a : b
            parts -= 1
            if opener != closer:
                s.triple = f"{QUOTED}{parts}"
                return _past_quoted(text, at, s)
            depth = 1
        elif ch == opener:
            depth += 1
    s.triple = f"{QUOTED}{parts}{opener}{closer}{depth}"
    return n


def _past_block_start(text: str, at: int, s: Scan, syntax: Syntax) -> int:
    """Where scanning goes on from `at`, a line's start outside strings: past the line, when it opens a block
    (Perl's `=head1`, which `s.triple` then holds, to the line's end) or ends the code (`__END__`); else `at`."""
    if text.startswith("=", at) and syntax.pod and text[at + 1:at + 2].isalpha():
        s.triple = BLOCK + "=cut"
    elif any(text.startswith(marker, at) and not _is_name(text, at + len(marker)) for marker in syntax.end_of_code):
        s.triple = BLOCK
    else:
        return at
    newline = text.find("\n", at)
    return len(text) if newline == -1 else newline


def _past_block(text: str, at: int, s: Scan) -> int:
    """Where scanning goes on in `text` from `at`, inside a block (`s.triple`, BLOCK): at the end of the line
    that starts with its word alone or followed by no name (`=cut`; `s.triple` is then cleared), or the text's end
    (`at` mid-line is the line that opened it, or a part of it)."""
    word, n = s.triple[1:], len(text)  # type: ignore[index]
    while word:
        if (at == 0 or text[at - 1] == "\n") and text.startswith(word, at) and not _is_name(text, at + len(word)):
            s.triple = None
            newline = text.find("\n", at)
            return n if newline == -1 else newline
        newline = text.find("\n", at)
        if newline == -1:
            break
        at = newline + 1
    return n


def _past_nested(text: str, at: int, s: Scan) -> int:
    """Where scanning goes on in `text` from `at`, inside a block comment that nests (`s.triple`, NESTED): right
    after the closing that ends the outermost (`s.triple` is then cleared), or the text's end, with the depth
    reached kept in `s.triple`."""
    depth_text, opening, closing = s.triple[1:].split(" ")  # type: ignore[index]
    depth, n = int(depth_text), len(text)
    opens, closes = text.find(opening, at), text.find(closing, at)
    while True:  # each found again only once passed: `/*/` holds no closing, `*/*` no opening
        if opens != -1 and opens < at:
            opens = text.find(opening, at)
        if closes != -1 and closes < at:
            closes = text.find(closing, at)
        if closes == -1:
            break
        if opens != -1 and opens < closes:  # another comment inside this one
            depth, at = depth + 1, opens + len(opening)
            continue
        depth, at = depth - 1, closes + len(closing)
        if depth == 0:
            s.triple = None
            return at
    while opens != -1:  # no closing left: the openings still count
        depth += 1
        opens = text.find(opening, opens + len(opening))
    s.triple = f"{NESTED}{depth} {opening} {closing}"
    return n


def _past_name(text: str, at: int) -> int:
    """Past the letters, digits and underscores from `at`."""
    while _is_name(text, at):
        at += 1
    return at


def _is_name(text: str, at: int) -> bool:
    """Whether a letter, digit or underscore stands at `at`."""
    return at < len(text) and (text[at].isalnum() or text[at] == "_")


def _in_expansion(text: str, s: Scan) -> bool:
    """Whether the innermost open bracket is one no `case` pattern stands in: a `[`, or a `${` opened in `text`."""
    if not s.stack:
        return False
    opened = s.opened_at[-1]
    return s.stack[-1] == "[" or (s.stack[-1] == "{" and opened > 0 and text[opened - 1] == "$")


def _word_before(text: str, at: int) -> str:
    """The letters, digits and underscores right before `at`."""
    start = at
    while start and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return text[start:at]


def _apostrophe(text: str, at: int, syntax: Syntax) -> bool:
    """Whether the quote at `at` follows a letter or digit (`don't`, `1'000`, a prime `f'`) and so opens no string
    or character literal, unless what it follows is a string prefix of the language (Dart's r'...', C's L'x')."""
    word = _word_before(text, at)
    return bool(word) and word not in syntax.string_prefixes


def _regex_end(text: str, at: int, known: _RegexEnds | None = None) -> tuple[int, _RegexEnds | None]:
    """Where scanning goes on after the `/` at `at` in JavaScript: past a regular expression literal when one
    starts there (where an operand may stand: after an operator, an opening bracket, a keyword like `return`,
    or first on its line) and ends on its line; else just past the `/`, a division. Also the ends `known` for
    the rest of the line (`_RegexEnds`), worked out once a regular expression did not end on a long line."""
    before = text[max(0, at - 40):at].rstrip(" \t")
    operand_here = not before or before.endswith(("\n", "=>")) or before[-1] in _REGEX_AFTER or bool(
        _REGEX_KEYWORDS.search(before)) or (before[-1] == "!" and not _POSTFIX_BANG.search(before))
    if not operand_here:
        return at + 1, known
    if known is not None and known.covers(at):
        return known.end(at), known
    found = _REGEX.match(text, at)
    if found is not None:
        return found.end(), known
    return at + 1, _RegexEnds.after_failure(text, at) or known


RESCANNED_CHARS = 1024
"""A regular expression that does not end on its line is matched to the line's end. Past this many characters
left, each later `/` of the line would be matched to its end again (a line of thousands of `(/[`, each opening
a character class that never closes, took seconds): the ends of all of them are worked out in one pass instead."""


class _RegexEnds:
    """Where `_REGEX` matches at each `/` of a stretch of one line end, worked out in one pass from the stretch's
    end back: the pattern never has two ways to go on (each character is a character, an escape's start, or a
    class's bracket), so a line of many `/` costs its length once, not once for each."""

    def __init__(self, text: str, start: int, stop: int) -> None:
        self.text, self.start, self.stop = text, start, stop
        size = stop - start
        outside = [-1] * (size + 2)  # per offset: where a regular expression's text from there ends, past its `/`
        inside = [-1] * (size + 2)  # the same from inside a character class; -1: it does not end on the line
        for k in range(size - 1, -1, -1):
            ch = text[start + k]
            if ch == "\\":  # and the character after it, which must be on the line
                after = k + 2 if k + 1 < size else size
                outside[k], inside[k] = outside[after], inside[after]
            elif ch == "/":
                outside[k], inside[k] = start + k + 1, inside[k + 1]
            elif ch == "[":
                outside[k] = inside[k] = inside[k + 1]
            elif ch == "]":
                outside[k] = inside[k] = outside[k + 1]
            else:
                outside[k], inside[k] = outside[k + 1], inside[k + 1]
        self._outside = outside

    @classmethod
    def after_failure(cls, text: str, at: int) -> _RegexEnds | None:
        """The ends for the rest of the line from `at`, where no regular expression ended, when more than
        RESCANNED_CHARS are left; else None."""
        stop = text.find("\n", at)
        stop = len(text) if stop == -1 else stop
        return cls(text, at, stop) if stop - at > RESCANNED_CHARS else None

    def covers(self, at: int) -> bool:
        return self.start <= at < self.stop

    def end(self, at: int) -> int:
        """`_REGEX.match(text, at).end()` for the `/` at `at`, or at + 1 where it does not match."""
        body = at + 1  # a regular expression holds something between its slashes
        if body >= self.stop or self.text[body] == "/":
            return at + 1
        found = self._outside[body - self.start]
        return found if found != -1 else at + 1


@dataclass(frozen=True)
class LineContext:
    """What the lines above say about the cursor's line."""

    start: Scan  # the state at the start of the line
    previous_line: str
    continued: bool  # the previous line ends with a backslash
    top_of_file: bool = False  # nothing but blank lines above: the line may not be indented
    syntax: Syntax = PYTHON  # the document's language's rules
    whole_file: bool = True  # the lines scanned start at the top of the file: a closer with nothing open is wrong


def line_context(before_lines: list[str], syntax: Syntax = PYTHON) -> LineContext:
    """Context from the lines above the cursor's line.

    In Python, scanning starts at the last top-level `def`, `class`, decorator or import (never
    inside a string or bracket), so a docstring's closing quotes are not mistaken for opening ones.
    Deep in a long class the window holds none; it then starts at the last method or decorator
    instead, which is outside a string unless a docstring quotes code. Other languages are scanned
    from the start of the window (CONTEXT_LINES)."""
    recent = before_lines[-CONTEXT_LINES:]
    start = None
    if syntax is PYTHON:
        start = _last(recent, lambda line: line.startswith(ANCHORS))
        if start is None and len(before_lines) > len(recent):
            start = _last(recent, lambda line: line.lstrip().startswith(DEFINITIONS))
    whole_file = len(before_lines) <= len(recent) and not start and sum(map(len, recent)) < WHOLE_FILE_CHARS
    state = Scan(triple=syntax.file_opens_in if whole_file else None)
    if syntax.lexical:
        for line in recent[start or 0:]:  # line by line, so one broken line does not poison the rest
            state = scan(line + "\n", state, syntax)
            state.broken = False
    previous = before_lines[-1] if before_lines else ""
    top = len(before_lines) == len(recent) and not any(line.strip() for line in reversed(recent))
    return LineContext(Scan(state.stack, state.triple), previous, previous.rstrip().endswith("\\"), top, syntax,
                       whole_file=whole_file)


def _last(lines: list[str], matches: Callable[[str], bool]) -> int | None:
    return next((i for i in range(len(lines) - 1, -1, -1) if matches(lines[i])), None)


def statement_can_end(code: str, top_colon: bool) -> bool:
    """A complete statement's last line: no dangling operator, keyword or missing block colon."""
    if code.endswith("\\"):
        return True
    if code.endswith(DANGLING_OPERATORS) and not code.endswith("...") and not (code.endswith(":") and top_colon):
        return False
    words = code.split()
    if words and words[-1] in DANGLING_KEYWORDS:
        return False
    first = words[0].rstrip(":") if words else ""
    return not (first in BLOCK_KEYWORDS and not top_colon)


def statement_can_start(code: str) -> bool:
    """A statement's first line: it does not begin with an operator or separator. The model writes a bare `:`
    at the top of a file it has no code of, and the end checks let a line ending in `:` through."""
    first = code.lstrip()
    return not first.startswith(NEVER_FIRST) or first.startswith("...")


def well_formed(line: str, context: LineContext) -> bool:
    start, syntax = context.start, context.syntax
    if not syntax.lexical or start.triple:
        return True  # a language whose rules are not known here; inside a docstring or comment: prose
    end = scan(line, start, syntax)
    if end.broken or (end.overclosed and context.whole_file):
        return False
    if end.triple and syntax.forgotten_quotes and line.rstrip().endswith(";") and end.triple[0] != BLOCK:
        return False  # a string that goes on over lines, opened on a line that ends as a statement: `die "no;`
    if end.triple or end.heredoc:
        return True  # opens a multi-line string or a here-document
    code = line[:end.code_end].rstrip()
    if not code:
        return any(ch.isalnum() for ch in line)  # a comment line, if it says something
    if len(end.stack) > end.min_depth:  # opened brackets it leaves open: must look like it goes on
        return not syntax.open_ends or _goes_on(code, end.stack[-1], syntax)
    if end.stack or start.stack or context.continued or not syntax.statements:
        return True  # inside, or closing, a construct that began above; no statement rules known
    return statement_can_start(code) and statement_can_end(code, end.top_colon)


def _goes_on(code: str, innermost: str, syntax: Syntax) -> bool:
    """Whether a line's `code` that leaves brackets open (`innermost` last) ends as a construct that goes on below
    does: an opener, a comma, an operator, Python's `and`; elsewhere `a ?`, `a ??`, the language's word operators
    (Perl's `or`), and where a block may hold statements on its first line, a `;` inside a `{`."""
    if code.endswith(CONTINUES) or code.endswith(DANGLING_OPERATORS):
        return True
    last = code.split()[-1]
    if syntax.statements:
        return last in DANGLING_KEYWORDS
    return code.endswith("?") or last in syntax.dangling_words or (
        syntax.braced_statements and innermost == "{" and code.endswith(";"))


def only_indentation(typed: str) -> bool:
    """The typed part of the line is indentation alone: what follows must not indent deeper. The beam
    search's first-token mask and `keep_suggestion` both apply this rule."""
    return bool(typed) and not typed.strip()


def keep_suggestion(line: str, inserted: str, after: str, context: LineContext) -> bool:
    if not inserted.strip():
        return False
    typed = line[:len(line) - len(inserted)]
    if only_indentation(typed) and inserted[:1] in (" ", "\t"):
        return False  # the indentation is typed (or auto-indented): do not indent deeper than it
    if context.top_of_file and line[:1] in (" ", "\t") and context.syntax.statements:
        return False  # the file's first statement: indented, it is an IndentationError
    if inserted.strip() == after.strip():
        return False
    if context.previous_line.strip() and line.strip() == context.previous_line.strip() and (
            context.syntax.statements or len(WORD.findall(line)) > 1):
        return False  # the line above again; outside Python a block's end (`}`, `end`, `#endif`) often is
    if after.strip() and _leaves_open(line, context) and not _leaves_open(typed + after, context):
        return False  # `"""Return the |"""`: the text after the cursor ends the string; the line replaces it
    return well_formed(line, context)


def _leaves_open(line: str, context: LineContext) -> bool:
    """Whether `line` ends inside a string or comment that goes on over lines, as the language's rules read it;
    not in the text a file is written in around its code (PHP's HTML after `?>`), where a line may always end."""
    syntax = context.syntax
    return syntax.lexical and scan(line, context.start, syntax).triple not in (None, syntax.file_opens_in)


def kept_comment(typed_line: str, after: str, context: LineContext) -> str:
    """The line comment that ends the text `after` the cursor, with the space before it: what a suggestion keeps
    of that text. A suggestion is a whole line written without reading the text after the cursor, which it
    replaces (a closing bracket the editor put there is written again), but accepting it must not delete the
    user's comment (`x = |  # the count`). "" when the text after the cursor has no comment, when the cursor is
    inside one, in a multi-line string, or in a language whose comments are not known here; "" too for a marker
    glued to the code before it, which is rarely a comment and often a construct the scan does not read (Ruby's
    regular expressions `/^\\s*#/` and `/#{name}/`, `%w[# a]`): kept, it wrote `next if x #/`."""
    syntax = context.syntax
    if not after.strip() or not syntax.lexical or not syntax.line_comments or context.start.triple:
        return ""
    line = typed_line + after
    end = scan(line, context.start, syntax)
    if end.triple or end.heredoc or not len(typed_line) <= end.code_end < len(line) or \
            not line[end.code_end - 1:end.code_end].isspace() and end.code_end:
        return ""
    code = after[:end.code_end - len(typed_line)]
    comment = after[len(code.rstrip()):]
    return comment if comment[:1] in (" ", "\t") else ("  " if syntax is PYTHON else " ") + comment  # PEP 8's gap


def kept_insertion(typed_line: str, inserted: str, after: str, comment: str, context: LineContext) -> str | None:
    """What `inserted`, a line's text after the cursor, puts there if the filters let it through: itself and the
    user's `comment` that ends `after` (`kept_comment`); None when they refuse it, or it only writes `after` again.
    The filters compare it with the text after the cursor that it replaces, the comment left out."""
    if inserted.strip() == after.strip():
        return None
    replaced = after[:len(after) - len(comment)]
    if not keep_suggestion(typed_line + inserted, inserted, replaced, context):
        return None
    return with_comment(typed_line, inserted, comment, context)


def with_comment(typed_line: str, inserted: str, comment: str, context: LineContext) -> str:
    """`inserted` with the user's `comment` after it (`kept_comment`), unless the line ends without room for one:
    it has a comment of its own, goes on in a multi-line string, or ends in a line continuation."""
    if not comment:
        return inserted
    line = typed_line + inserted
    end = scan(line, context.start, context.syntax)
    if end.triple or end.heredoc or end.code_end < len(line) or line.rstrip().endswith("\\"):
        return inserted
    return inserted + comment
