"""An earlier line of the file that begins with what is typed on the cursor's line.

Code repeats whole lines (a call with the same arguments, a decorator, an assert), and the beam
search does not always reach a long one: it may need more than `max_tokens`, or shorter lines may
outscore it. So, as Vim's whole-line completion does, the engine also offers the nearest line above
that begins with the typed text and goes on past it, after the model's own lines. It costs no model
run; eval.py measures what it adds (docs/experiments/2026-11-23-model-history.md,
"Lines further up the file").
"""
from __future__ import annotations


def earlier_line(head: str, typed_line: str) -> str | None:
    """The nearest line of `head` (the text above the cursor's line) that begins with `typed_line` and
    goes on past it with more than whitespace; None when the typed line holds no code yet (at a line
    start every line of the same indentation would qualify) or no line does."""
    if not typed_line.strip() or "\n" in typed_line:
        return None
    text, start = "\n" + head, len(head) + 1
    while (start := text.rfind("\n" + typed_line, 0, start)) >= 0:  # from the nearest line up
        end = text.find("\n", start + 1)
        line = text[start + 1:end if end >= 0 else len(text)].rstrip()
        if line[len(typed_line):].strip():
            return line
    return None
