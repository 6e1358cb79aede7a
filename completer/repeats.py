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
from typing import NamedTuple

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


class RepeatMix(NamedTuple):
    """The repeats as the beam step takes them, sparse: per beam row, the few tokens that followed its
    longest match, p = model_share * p_model + probs at those tokens and model_share * p_model elsewhere.
    A dense [B, V] row would cost the graph an Exp and a Log over the whole vocabulary at every step."""

    tokens: np.ndarray  # [1 or B, M] int64; a row shorter than M repeats its first entry
    probs: np.ndarray  # [1 or B, M] float32: share * p_repeat of each token (0: the model alone)
    model_share: np.ndarray  # [1 or B] float32: 1 - share

    def dense(self, vocab_size: int) -> np.ndarray:
        """The same probabilities as one [1 or B, V] row per beam (bundles exported before the sparse
        repeat inputs take the repeats this way)."""
        rows = np.zeros((len(self.tokens), vocab_size), np.float32)  # [B, V]
        np.put_along_axis(rows, self.tokens, self.probs, axis=1)  # padding writes its entry again
        return rows


_NEUTRAL_TOKENS = np.zeros(1, np.int64)
_NEUTRAL_PROBS = np.zeros(1, np.float32)
NO_REPEATS = RepeatMix(_NEUTRAL_TOKENS[None, :], _NEUTRAL_PROBS[None, :], np.ones(1, np.float32))
"""The model's distribution alone: token 0 with no weight, and all the weight on the model."""
for _shared in (_NEUTRAL_TOKENS, _NEUTRAL_PROBS, *NO_REPEATS):
    _shared.flags.writeable = False  # shared by every request: nothing may change them in place


class DocumentRepeats:
    """Built once per request from the document's token ids; asked once per beam step.

    A match of three tokens or more must end at a place whose last three tokens equal the tail's, so
    each question compares one precomputed code per place, then walks only those places back, three
    tokens per comparison: at a clipped document's ten thousand tokens a question costs about one pass
    over the array, and a file of one line repeated thousands of times (every place matching) stays
    within a few milliseconds per step. A beam grows by one token per step, so its question starts from
    the answer its parent got one step before: where some of those places go on with the new token, no
    search runs at all."""

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
        self._found: dict[tuple[int, ...], tuple[int, np.ndarray]] = {}  # generated tokens -> (longest, ends)

    def longest_match(self, generated: Sequence[int] = ()) -> tuple[int, np.ndarray, int]:
        """The length of the longest earlier match of the context followed by `generated`, the tokens that
        followed each such match in the context ([M], repeats kept: they are the counts), and where the
        matches lie (IN_WINDOW, BEFORE_WINDOW or OTHER_FILES: the latest place that holds one)."""
        key = tuple(generated)
        found = self._found.get(key)
        if found is None:
            found = self._extended(key) or self._searched(generated)
            self._found[key] = found
        longest, ends = found
        if longest == 0:
            return 0, ends, IN_WINDOW
        last = ends[-1]  # places ascend
        where = IN_WINDOW if last >= self.window_start else BEFORE_WINDOW if last >= self.others_end else OTHER_FILES
        return longest, self.context[ends + 1], where

    def _extended(self, key: tuple[int, ...]) -> tuple[int, np.ndarray] | None:
        """The matches of `key` from those of `key` less its last token, asked at the step before: a beam
        grows by one token per step, and where the places that matched it go on with that token, they are
        exactly the longest matches now, one token longer. None when none goes on (or nothing was kept)."""
        parent = self._found.get(key[:-1]) if key else None
        if parent is None or not 0 < parent[0] < MAX_MATCH:
            return None
        ends = parent[1] + 1  # [M] places one token on
        ends = ends[ends < self.context.size - 1]  # a match needs a token after it
        ends = ends[self.context[ends] == key[-1]]
        return (parent[0] + 1, ends) if ends.size else None

    def _searched(self, generated: Sequence[int]) -> tuple[int, np.ndarray]:
        """The longest match's length and every place it ends ([M], ascending), searched over the whole context."""
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
            return 0, ends
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
        return longest, ends

    def _code(self, tail: np.ndarray, skip: int, width: int) -> int:
        """The code (as in `_codes`) of the `width` tokens of `tail` that end `skip` tokens before its end."""
        code = 0
        for back in range(skip + 1, skip + width + 1):
            code = code * self.vocab_size + int(tail[-back])
        return code

    def mixture(self, beams: Sequence[Sequence[int]]) -> RepeatMix:
        """The beam step's repeats for each beam's generated tokens: one row per beam holding the tokens that
        followed its longest match and their shares; a single neutral row when no beam matches anything."""
        rows = [self.longest_match(generated) for generated in beams]
        if not any(longest for longest, _, _ in rows):
            return NO_REPEATS
        mixed: list[tuple[np.ndarray, np.ndarray]] = []  # per beam: (tokens [M_b], their share * p_repeat [M_b])
        model_share = np.ones(len(rows), np.float32)  # [B]
        for row, (longest, followers, where) in enumerate(rows):
            share = share_for(longest, where)
            if not share:
                mixed.append((_NEUTRAL_TOKENS, _NEUTRAL_PROBS))
                continue
            if followers.size == 1:  # a long match is mostly found once
                mixed.append((followers, np.full(1, share, np.float32)))
            else:
                followed, counts = np.unique(followers, return_counts=True)  # [M_b] each
                mixed.append((followed, (counts * (share / followers.size)).astype(np.float32)))
            model_share[row] = 1.0 - share
        width = max(len(followed) for followed, _ in mixed)
        tokens = np.empty((len(rows), width), np.int64)  # [B, M]
        probs = np.empty((len(rows), width), np.float32)  # [B, M]
        for row, (followed, weights) in enumerate(mixed):
            # Padding repeats the row's first entry: the graph's scatter then writes that token's value twice.
            tokens[row], probs[row] = followed[0], weights[0]
            tokens[row, :len(followed)], probs[row, :len(weights)] = followed, weights
        return RepeatMix(tokens, probs, model_share)
