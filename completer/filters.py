"""Checks every suggestion passes before it is shown (JetBrains checks each one the same way).

A suggestion is dropped when it adds nothing but whitespace, only repeats the previous line or
the text already after the cursor, leaves the line's brackets or quotes broken, or is a Python
statement that cannot end there (`x = `, `self.`, `if x` without its colon). A line may end with
an opener or a comma (it starts a multi-line construct), and may close a bracket opened on an
earlier line when the previous line ends with an opener or a comma.
"""
from __future__ import annotations

PAIRS = {")": "(", "]": "[", "}": "{"}
OPENERS = set(PAIRS.values())
CONTINUES = "([{,\\"  # a line ending in one of these goes on below
DANGLING_OPERATORS = (".", "=", "+", "-", "*", "/", "%", "&", "|", "^", "<", ">", "@", "~", "!")
DANGLING_KEYWORDS = {"and", "or", "not", "in", "is", "if", "elif", "while", "for", "with", "from", "import", "as",
                     "def", "class", "lambda", "assert", "del", "async", "await"}
BLOCK_KEYWORDS = {"if", "elif", "else", "while", "for", "def", "class", "with", "try", "except", "finally", "async"}


def scan_line(line: str) -> tuple[list[str], int, bool]:
    """(unclosed openers, unmatched closers, ends inside a single-line string) for one line of Python.

    Brackets inside strings and comments are ignored; a triple-quoted string left open is allowed
    (docstrings span lines)."""
    stack, unmatched, open_string, _, _ = _scan(line)
    return stack, unmatched, open_string


def _scan(line: str) -> tuple[list[str], int, bool, bool, int]:
    """scan_line's result, whether a ':' occurs outside brackets and strings, and where code ends
    (the comment's '#', or the line's length)."""
    stack: list[str] = []
    unmatched = 0
    colon = False
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "#":
            return stack, unmatched, False, colon, i
        if ch == ":" and not stack:
            colon = True
        if ch in "\"'":
            triple = line[i:i + 3] == ch * 3
            quote = ch * 3 if triple else ch
            j = i + len(quote)
            while j < n and line[j:j + len(quote)] != quote:
                j += 2 if line[j] == "\\" else 1
            if j >= n:
                return stack, unmatched, not triple, colon, n
            i = j + len(quote)
            continue
        if ch in OPENERS:
            stack.append(ch)
        elif ch in PAIRS:
            if stack and stack[-1] == PAIRS[ch]:
                stack.pop()
            elif stack:
                return stack, unmatched + 1000, False, colon, n  # mismatched pair: never valid
            else:
                unmatched += 1
        i += 1
    return stack, unmatched, False, colon, n


def balanced_enough(line: str, previous_line: str) -> bool:
    stack, unmatched, open_string, colon, code_end = _scan(line)
    if open_string or unmatched >= 1000:
        return False
    tail = previous_line.rstrip()
    continuation = bool(tail) and tail[-1] in CONTINUES
    if unmatched and not continuation:
        return False
    code = line[:code_end].rstrip()
    if stack:
        return bool(code) and code[-1] in CONTINUES
    if unmatched or continuation:
        return True  # the end of a multi-line construct: its statement began above
    if not code:
        return any(ch.isalnum() for ch in line)  # a comment line, if it says something
    if code.endswith(DANGLING_OPERATORS) and not code.endswith("..."):
        return False
    words = code.split()
    if words and words[-1] in DANGLING_KEYWORDS and not code.endswith("\\"):
        return False
    first = words[0].rstrip(":") if words else ""
    if first in BLOCK_KEYWORDS and not colon and not code.endswith("\\"):
        return False
    return True


def keep_suggestion(line: str, inserted: str, after: str, previous_line: str) -> bool:
    if not inserted.strip():
        return False
    if inserted.strip() == after.strip():
        return False
    if previous_line.strip() and line.strip() == previous_line.strip():
        return False
    return balanced_enough(line, previous_line)
