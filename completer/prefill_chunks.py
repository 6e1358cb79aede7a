"""How many tokens a background prefill runs per model call: about as many as take CHUNK_BUDGET_MS here.

A keystroke that arrives while another document's background prefill runs waits for the call under way
(completer/scheduler.py runs a prefetch only while nothing more urgent is active, one chunk per iteration), so
that call's length is the keystroke's worst extra wait. A fixed token count makes it a few milliseconds for the
embedded model and 50 to 90 for a converted model of 135 million parameters; sizing chunks by their measured
time keeps the wait about the same for any model, at the cost of more calls, each reading all the weights again,
for large ones. A completion's own prefill, which someone is waiting for, keeps the engine's fixed chunks.

A call's time is a fixed part (the weights read once) and a part per token, so the size is steered by the last
chunk's time rather than a rate per token: a chunk well under the budget makes the next one longer by at least
one step, one over it makes the next shorter in proportion.
"""
from __future__ import annotations

from dataclasses import dataclass

CHUNK_BUDGET_MS = 20.0  # about the longest a background chunk should keep a keystroke waiting
FEWEST_TOKENS = 16  # the first chunk, and the shortest
TOKEN_STEP = 16  # chunk lengths are multiples of this
GROW_BELOW = 0.8  # a chunk that took less than this share of the budget makes the next one longer


@dataclass
class PrefillChunks:
    """The chunk length for a background prefill of one model on this machine, steered by the last chunk."""

    most: int  # never longer than this (the engine's fixed chunk)
    budget_ms: float = CHUNK_BUDGET_MS
    size: int = 0  # the next chunk's length; 0 until set from `most`

    def __post_init__(self) -> None:
        self.size = self.size or min(self.most, FEWEST_TOKENS)  # no model's first chunk is long

    def next_size(self) -> int:
        return self.size

    def record(self, tokens: int, seconds: float) -> None:
        """A chunk of `tokens` took `seconds`: steer the next one's length toward the budget."""
        if tokens <= 0 or seconds <= 0:
            return
        took_ms, shortest = seconds * 1000.0, min(self.most, FEWEST_TOKENS)
        fitting = int(tokens * self.budget_ms / took_ms) // TOKEN_STEP * TOKEN_STEP
        if took_ms > self.budget_ms:
            self.size = max(shortest, min(self.size, fitting))
        elif took_ms < GROW_BELOW * self.budget_ms and tokens >= self.size:  # a whole chunk, not a prefill's tail
            self.size = min(self.most, max(self.size + TOKEN_STEP, fitting))
