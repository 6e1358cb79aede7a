"""What the document itself predicts next: the tokens that followed, earlier in the context, the longest
run of tokens that ends the text so far (a cache language model over the document's own repeats).

Code repeats itself within a file (a call pattern, a block of asserts, a name defined above), and a
small model copies a long repeat less surely than the repeat deserves. The beam step mixes this
distribution into the model's: p = (1 - share) * p_model + share * p_repeat, with `share` growing
with the length of the match (the longer the match, the surer the repeat). The shares were fitted on
validation windows by `scripts/fit_repeats.py`.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_MATCH = 64  # tokens compared backwards; longer repeats are as sure as this
SHARE_BY_MATCH = ((1, 0.02), (2, 0.02), (3, 0.04), (5, 0.04), (8, 0.11), (12, 0.18), (16, 0.18), (24, 0.26),
                  (32, 0.33), (48, 0.56), (64, 0.61))
"""(longest match up to this many tokens, share of the repeat distribution), as `python scripts/fit_repeats.py`
fitted them for the shipped weights on the first shard's validation windows."""


def share_for(match: int) -> float:
    """The repeat distribution's share for a longest match of `match` tokens (0: none)."""
    if match <= 0:
        return 0.0
    for upto, share in SHARE_BY_MATCH:
        if match <= upto:
            return share
    return SHARE_BY_MATCH[-1][1]


class DocumentRepeats:
    """Built once per request from the context's token ids; asked once per beam step."""

    def __init__(self, context: Sequence[int], vocab_size: int) -> None:
        self.context = np.asarray(context, dtype=np.int64)  # [N]
        self.vocab_size = vocab_size
        self._offsets = np.arange(MAX_MATCH)  # [MAX_MATCH]

    def longest_match(self, generated: Sequence[int] = ()) -> tuple[int, np.ndarray]:
        """The length of the longest earlier match of the context followed by `generated`, and the tokens
        that followed each such match in the context ([M], repeats kept: they are the counts)."""
        context = self.context
        if len(generated) >= MAX_MATCH:
            tail = np.asarray(generated[-MAX_MATCH:], dtype=np.int64)
        else:
            tail = np.concatenate([context[-(MAX_MATCH - len(generated)):], np.asarray(generated, dtype=np.int64)])
        if tail.size == 0:
            return 0, tail
        ends = np.flatnonzero(context[:-1] == tail[-1])  # [M] earlier places of the last token, each with a successor
        if ends.size == 0:
            return 0, ends
        width = min(tail.size, MAX_MATCH)
        back = ends[:, None] - self._offsets[None, :width]  # [M, W] positions compared, walking backwards
        same = (context[np.maximum(back, 0)] == tail[::-1][None, :width]) & (back >= 0)  # [M, W]
        lengths = np.cumprod(same, axis=1).sum(axis=1)  # [M] matched tokens before the first difference
        longest = int(lengths.max())
        return longest, context[ends[lengths == longest] + 1]

    def mixture(self, beams: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The beam step's `repeat_probs` [B, V] (share * p_repeat) and `model_share` [B] (1 - share),
        one row per beam's generated tokens; a single neutral row when no beam matches anything."""
        rows = [self.longest_match(generated) for generated in beams]
        if not any(longest for longest, _ in rows):
            return np.zeros((1, self.vocab_size), np.float32), np.ones(1, np.float32)
        probs = np.zeros((len(rows), self.vocab_size), np.float32)  # [B, V]
        model_share = np.ones(len(rows), np.float32)  # [B]
        for row, (longest, followers) in enumerate(rows):
            share = share_for(longest)
            if share:
                probs[row] = np.bincount(followers, minlength=self.vocab_size)[:self.vocab_size] * (
                    share / followers.size)
                model_share[row] = 1.0 - share
        return probs, model_share
