"""Which line comes first when the cursor is inside a word: one that finishes the word as a name the code
already uses, before one that finishes it as a name used nowhere.

A small model finishes `except Valu` as `ValuationError` as readily as `ValueError`, and `retur` as
`retured_args`; a name that neither the document, the workspace nor the language has is almost always such an
invention. The lines are only reordered, never dropped: a new name is sometimes what the user is writing, and it
stays among the lines shown (docs/benchmarks.md, "The workspace as context", measures the reordering).
"""
from __future__ import annotations

import builtins
import keyword
import re
from typing import Callable

WORD_AT_END = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
LANGUAGE_NAMES = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) \
    | {"self", "cls", "args", "kwargs"}
"""Python's own names, known without being written anywhere."""
DUNDER = re.compile(r"__[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*__")
"""`__repr__`, `__enter__` and the like: the language's protocol, known too."""


def known_word_first(lines: list[str], typed: str, is_known: Callable[[str], bool]) -> list[str]:
    """`lines` (whole lines that begin with `typed`, best first), the ones whose word at the cursor is a known
    name first, each group in its own order. Unchanged when the cursor does not end a word, or when the first
    line's word is known, or no line's is."""
    at_end = WORD_AT_END.search(typed)
    if at_end is None or len(lines) < 2:
        return lines
    verdicts: dict[str, bool] = {}

    def known(line: str) -> bool:
        word = WORD.match(line, at_end.start())
        name = word.group(0) if word else ""
        if name not in verdicts:
            verdicts[name] = bool(name) and (name in LANGUAGE_NAMES or DUNDER.fullmatch(name) is not None
                                             or is_known(name))
        return verdicts[name]

    if known(lines[0]):
        return lines
    kept = [line for line in lines if known(line)]
    if not kept:
        return lines
    return kept + [line for line in lines if not known(line)]


def used_in(text: str, name: str) -> bool:
    """Whether `text` holds `name` as a whole word (next to no letter, digit or underscore: `\\w` is exactly
    those). One regular expression search, the name first so that it is looked for as fast as `str.find` does
    (the character before it is asked after it): a step of Python per place that held it inside a longer word
    took a third of a second per name in a megabyte of `zabczabc...`, on the server's loop, at every keystroke."""
    escaped = re.escape(name)
    return re.search(rf"{escaped}(?<!\w{escaped})(?!\w)", text) is not None
