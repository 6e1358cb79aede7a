"""How many tokens a background prefill runs per model call: about as many as take CHUNK_BUDGET_MS here.

A keystroke that arrives while another document's background prefill runs stops the call under way
(completer/preemption.py), whose work is then thrown away and run again, and waits for the copy after a call
that has ended; a call stopped twice runs to its end, and that keystroke waits for all of it. So the chunk's
length bounds the work lost and the longest wait. A fixed token count makes a chunk a few milliseconds for the
embedded model and 50 to 90 for a converted model of 135 million parameters; sizing chunks by their measured
time keeps them about the same for any model, and short enough to run between a typist's keystrokes, at the cost
of more calls, each reading all the weights again, for large ones. A completion's own prefill, which someone is waiting for, keeps the engine's fixed chunks.

A call's time is a fixed part (the weights read once) and a part per token. Once chunks of two lengths have
been timed, the next is the longest whose time that line predicts within the budget; before that, a chunk
well under the budget makes the next one a step longer, and one over it makes the next shorter in proportion.
The time counted is the call and the copy that appends its keys and values to the document's cache, since a
waiting keystroke waits for both.
"""
from __future__ import annotations

from dataclasses import dataclass, field

CHUNK_BUDGET_MS = 25.0  # about the longest a background chunk should keep a keystroke waiting
FEWEST_TOKENS = 16  # the first chunk, and the shortest
TOKEN_STEP = 16  # chunk lengths are multiples of this
GROW_BELOW = 0.8  # a chunk that took less than this share of the budget makes the next one longer


@dataclass
class PrefillChunks:
    """The chunk length for a background prefill of one model on this machine, from the chunks timed so far."""

    most: int  # never longer than this (the engine's fixed chunk)
    budget_ms: float = CHUNK_BUDGET_MS
    size: int = 0  # the next chunk's length; 0 until set from `most`
    timed: dict[int, float] = field(default_factory=dict)  # each length's latest time in ms, the latest length last
    position: int = 0  # where in its document the last chunk began

    def __post_init__(self) -> None:
        if self.most < 1:
            raise ValueError(f"a prefill chunk holds at least one token, not {self.most}")
        self.size = self.size or min(self.most, FEWEST_TOKENS)  # no model's first chunk is long

    def next_size(self) -> int:
        return self.size

    def record(self, tokens: int, seconds: float, position: int = 0) -> None:
        """A chunk of `tokens` at `position` in its document took `seconds` (its call and its cache's append):
        choose the next one's length. A chunk costs more the longer the prefix before it, so the times taken
        late in another document say little of a new one's: they are forgotten when a prefill starts anew."""
        if position < self.position:
            self.timed.clear()
        self.position = position
        if tokens <= 0 or seconds <= 0 or tokens < self.size:  # nothing ran, or a prefill's short tail
            return
        self.timed.pop(tokens, None)  # re-inserted last: the dict's order is the order the lengths were timed in
        self.timed[tokens] = seconds * 1000.0
        shortest = min(self.most, FEWEST_TOKENS)
        if len(self.timed) >= 2:  # a line through the two latest lengths timed: fixed part + per-token part
            n1, n2 = list(self.timed)[-2:]
            per_token = max((self.timed[n2] - self.timed[n1]) / (n2 - n1), 1e-6)
            fixed = self.timed[n2] - per_token * n2
            fitting = int((self.budget_ms - fixed) / per_token) // TOKEN_STEP * TOKEN_STEP
            self.size = max(shortest, min(self.most, fitting))
            return
        took_ms = self.timed[tokens]
        fitting = int(tokens * self.budget_ms / took_ms) // TOKEN_STEP * TOKEN_STEP
        if took_ms > self.budget_ms:
            self.size = max(shortest, min(self.size, fitting))
        elif took_ms < GROW_BELOW * self.budget_ms:
            self.size = min(self.most, max(self.size + TOKEN_STEP, fitting))
