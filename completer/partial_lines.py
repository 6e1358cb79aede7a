"""The start of a line too long for the search, offered when it found no whole line.

The search stops at `max_tokens` (24). A line longer than that never ends in time, and when every beam
is cut off there the answer would be empty: nothing at all for the long calls, asserts and regular
expressions whose first half the model often has right. Then the likeliest cut-off beam is offered as
it stands, up to the end of its last whole word (never in the middle of a name), without a run of one
token repeated at its end (a beam that loops, such as a regular expression's `\\|\\|\\|`). It is offered
only when the cursor ends its line: replacing text after the cursor with half a line would lose it.
"""
from __future__ import annotations

import re
from functools import lru_cache

from .filters import only_indentation
from .syntax import PYTHON, Syntax
from .tokens import Tokens

LOOP_TOKENS = 3  # one token this many times in a row at a beam's end: the beam loops there


@lru_cache(maxsize=None)
def _word_end(name_chars: str) -> re.Pattern[str]:
    """The name or number a text ends with, in a language whose names also hold `name_chars` ($name, --gap)."""
    return re.compile(r"[\w" + re.escape(name_chars) + r"]+$")


def partial_line(tokens: Tokens, generated: list[int], healed: bytes, typed_line: str,
                 syntax: Syntax = PYTHON) -> str | None:
    """What to insert from a beam cut off at `max_tokens` (`generated`, re-spelling the `healed` typed bytes
    first), or None when too little of it is left."""
    text = tokens.after_healed(_without_loop(generated), healed)
    if text is None:
        return None
    text = _word_end(syntax.name_chars).sub("", text).rstrip()  # a name or number the beam had not finished
    if not text.strip():
        return None
    if only_indentation(typed_line) and text[:1] in (" ", "\t"):
        return None  # deeper than the typed indentation, as for whole lines
    return text


def _without_loop(generated: list[int]) -> list[int]:
    """`generated` without a run of one token repeated LOOP_TOKENS times or more at its end."""
    end = len(generated)
    while end > 0 and generated[end - 1] == generated[-1]:
        end -= 1
    return generated[:end] if len(generated) - end >= LOOP_TOKENS else generated
