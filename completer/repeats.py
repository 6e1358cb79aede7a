"""What the document itself predicts next: the tokens that followed, earlier in the document, the longest
run of tokens that ends the text so far (a cache language model over the document's own repeats).

Code repeats itself within a file (a call pattern, a block of asserts, a name defined above), and a
small model copies a long repeat less surely than the repeat deserves. It cannot copy at all what lies
before its window, so the matching looks back over all the text the engine keeps (MAX_CONTEXT_CHARS),
about ten times the window, and over the other files the user has open (a project repeats its own names
and patterns across files). The beam step mixes this distribution into the model's:
p = (1 - share) * p_model + share * p_repeat, with `share` growing with the length of the match, and
depending on where the longest matches lie: in the model's window, before it in the document (the model
has not seen it), or only in other open files. The shares were fitted on validation windows by
`scripts/fit_repeats.py`.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_MATCH = 64  # tokens compared backwards; longer repeats are as sure as this
IN_WINDOW, BEFORE_WINDOW, OTHER_FILES = 0, 1, 2
"""Where the longest matches lie: one of them in the model's window; all before it, one in the document
(or the lines below the cursor); all in other open files."""
SHARE_BY_MATCH = ((1, 0.02, 0.06, 0.01), (2, 0.02, 0.13, 0.02), (3, 0.05, 0.15, 0.02), (5, 0.08, 0.23, 0.05),
                  (8, 0.10, 0.32, 0.12), (12, 0.18, 0.41, 0.28), (16, 0.25, 0.51, 0.47), (24, 0.30, 0.63, 0.51),
                  (32, 0.48, 0.77, 0.60), (48, 0.60, 0.83, 0.60), (64, 0.82, 0.94, 0.60))
"""(longest match up to this many tokens, then the repeat distribution's share for each place the longest
matches may lie: IN_WINDOW, BEFORE_WINDOW, OTHER_FILES), as `python scripts/fit_repeats.py` fitted them
for the shipped weights on the first shard's validation windows (OTHER_FILES with `--open-files 4`). A
short match in another file is mostly a common idiom the model knows already: its share is a fraction of
one in the document's own text."""


def share_for(match: int, where: int = IN_WINDOW) -> float:
    """The repeat distribution's share for a longest match of `match` tokens (0: none) lying `where`."""
    if match <= 0:
        return 0.0
    for row in SHARE_BY_MATCH:
        if match <= row[0]:
            return row[1 + where]
    return SHARE_BY_MATCH[-1][1 + where]


class DocumentRepeats:
    """Built once per request from the document's token ids; asked once per beam step.

    A match of three tokens or more must end at a place whose last three tokens equal the tail's, so
    each question compares one precomputed code per place, then walks only those places back, three
    tokens per comparison: at a clipped document's ten thousand tokens a question costs about one pass
    over the array, and a file of one line repeated thousands of times (every place matching) stays
    within a few milliseconds per step."""

    def __init__(self, context: Sequence[int], vocab_size: int, window_start: int = 0, others_end: int = 0) -> None:
        """`context`: the token ids searched, ending with the document's before the cursor; the model's window
        begins at `window_start`, and the first `others_end` ids are other open files'."""
        self.context = context = np.asarray(context, dtype=np.int64)  # [N]
        self.vocab_size = vocab_size
        self.window_start = window_start
        self.others_end = others_end
        bigrams = context[1:-1] * vocab_size + context[:-2]  # [N-2] the two tokens ending at place 1.., coded
        self._codes = (context[:-1], bigrams, bigrams[1:] * vocab_size + context[:-3])  # ends at places 0, 1, 2..
        # (each stops before the last place: a match needs a token after it)

    def longest_match(self, generated: Sequence[int] = ()) -> tuple[int, np.ndarray, int]:
        """The length of the longest earlier match of the context followed by `generated`, the tokens that
        followed each such match in the context ([M], repeats kept: they are the counts), and where the
        matches lie (IN_WINDOW, BEFORE_WINDOW or OTHER_FILES: the latest place that holds one)."""
        context = self.context
        if len(generated) >= MAX_MATCH:
            tail = np.asarray(generated[-MAX_MATCH:], dtype=np.int64)
        else:
            tail = np.concatenate([context[-(MAX_MATCH - len(generated)):], np.asarray(generated, dtype=np.int64)])
        ends = tail[:0]
        for width in range(min(3, tail.size), 0, -1):  # the longest of 3, 2, 1 tokens that occurred before
            ends = np.flatnonzero(self._codes[width - 1] == self._code(tail, 0, width)) + (width - 1)  # [M]
            if ends.size:
                break
        if ends.size == 0:
            return 0, ends, IN_WINDOW
        longest, span = width, min(tail.size, MAX_MATCH)
        while width == 3 and longest < span:  # walk back up to three tokens at a time while some place matches
            for step in range(min(3, span - longest), 0, -1):  # fewer, once no place matches that many more
                first = ends - longest - (step - 1)  # [M] where the next `step` tokens back begin
                same = (first >= 0) & (self._codes[step - 1][np.maximum(first, 0)] == self._code(tail, longest, step))
                if same.any():
                    ends, longest = ends[same], longest + step
                    break
            else:
                break
            if step < 3:
                break  # a shorter step matched only because the longer one did not: no place goes further
        last = ends[-1]  # places ascend
        where = IN_WINDOW if last >= self.window_start else BEFORE_WINDOW if last >= self.others_end else OTHER_FILES
        return longest, context[ends + 1], where

    def _code(self, tail: np.ndarray, skip: int, width: int) -> int:
        """The code (as in `_codes`) of the `width` tokens of `tail` that end `skip` tokens before its end."""
        code = 0
        for back in range(skip + 1, skip + width + 1):
            code = code * self.vocab_size + int(tail[-back])
        return code

    def mixture(self, beams: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The beam step's `repeat_probs` [B, V] (share * p_repeat) and `model_share` [B] (1 - share),
        one row per beam's generated tokens; a single neutral row when no beam matches anything."""
        rows = [self.longest_match(generated) for generated in beams]
        if not any(longest for longest, _, _ in rows):
            return np.zeros((1, self.vocab_size), np.float32), np.ones(1, np.float32)
        probs = np.zeros((len(rows), self.vocab_size), np.float32)  # [B, V]
        model_share = np.ones(len(rows), np.float32)  # [B]
        for row, (longest, followers, where) in enumerate(rows):
            share = share_for(longest, where)
            if share:
                probs[row] = np.bincount(followers, minlength=self.vocab_size)[:self.vocab_size] * (
                    share / followers.size)
                model_share[row] = 1.0 - share
        return probs, model_share
