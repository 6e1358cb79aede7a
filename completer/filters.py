"""Checks every suggestion passes before it is shown (JetBrains checks each one the same way).

A suggestion is dropped when it adds nothing but whitespace, only repeats the previous line or
the text already after the cursor, or leaves the line's brackets or quotes broken. A line may end
with an opener or a comma (it starts a multi-line construct), and may close a bracket opened on
an earlier line when the previous line ends with an opener or a comma.
"""
from __future__ import annotations

PAIRS = {")": "(", "]": "[", "}": "{"}
OPENERS = set(PAIRS.values())


def scan_line(line: str) -> tuple[list[str], int, bool]:
    """(unclosed openers, unmatched closers, ends inside a single-line string) for one line of Python.

    Brackets inside strings and comments are ignored; a triple-quoted string left open is allowed
    (docstrings span lines)."""
    stack: list[str] = []
    unmatched = 0
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "#":
            break
        if ch in "\"'":
            triple = line[i:i + 3] == ch * 3
            quote = ch * 3 if triple else ch
            j = i + len(quote)
            while j < n and line[j:j + len(quote)] != quote:
                j += 2 if line[j] == "\\" else 1
            if j >= n:
                return stack, unmatched, not triple
            i = j + len(quote)
            continue
        if ch in OPENERS:
            stack.append(ch)
        elif ch in PAIRS:
            if stack and stack[-1] == PAIRS[ch]:
                stack.pop()
            elif stack:
                return stack, unmatched + 1000, False  # mismatched pair: never valid
            else:
                unmatched += 1
        i += 1
    return stack, unmatched, False


def balanced_enough(line: str, previous_line: str) -> bool:
    stack, unmatched, open_string = scan_line(line)
    if open_string or unmatched >= 1000:
        return False
    if unmatched:
        tail = previous_line.rstrip()
        if not tail or tail[-1] not in "([{,\\":
            return False
    if stack:
        code = line.split("#", 1)[0].rstrip()
        if not code or code[-1] not in "([{,\\":
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
