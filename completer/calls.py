"""A model call as a value. A search or a prefill is written as a generator that yields the calls it needs and
receives each one's output, so the same code runs a single request call by call (`drive`) or, in the engine's
scheduler (completer/scheduler.py), beside many other requests whose beam steps share one batched call.
"""
from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from .repeats import RepeatMix
from .types import CancelCheck, Cancelled

KV = list[tuple[np.ndarray, np.ndarray]]  # per layer (key, value)


@dataclass
class ModelCall:
    """One run of the decoder: a prefill (`past` None: one row of new tokens after the prefix) or a beam step
    (one token per live beam, each with its own suffix KV `past`). Shapes as in Runtime.run."""

    input_ids: np.ndarray  # [B, S]
    position: int  # the position of the first new token
    prefix: KV  # the document's KV: key [1, KV, D, P], value [1, KV, P, D]
    past: KV | None = None  # per layer [B, KV, T, D]; None for a prefill
    scores: np.ndarray | None = None  # [B] cumulative log-probabilities
    allowed: np.ndarray | None = None  # [1 or B, V] the token-healing mask; None: every token
    num_beams: int = 1  # candidates wanted
    repeats: RepeatMix | None = None  # the document's repeats per row; None: the model alone

    @property
    def is_prefill(self) -> bool:
        return self.past is None

    @property
    def rows(self) -> int:
        return int(self.input_ids.shape[0])


T = TypeVar("T")
Steps = Generator[ModelCall, object, T]
"""Yields the calls a request needs, is sent each call's StepOutput, and returns the request's result."""


def advance(steps: Steps[T], output: object = None, cancel: bool = False) -> tuple[ModelCall | None, T | None]:
    """Resume `steps` with the last call's output (or with Cancelled raised at its yield, so its own handlers
    and `finally` blocks run): the next call, or (None, the result) once it has returned. Whatever the steps
    raise, Cancelled included, propagates."""
    try:
        call = steps.throw(Cancelled()) if cancel else steps.send(output)
    except StopIteration as done:
        return None, done.value
    return call, None


def drive(steps: Steps[T], runtime, is_cancelled: CancelCheck | None = None) -> T:
    """Run one request's calls one after another on `runtime`, asking `is_cancelled` before each: a request
    that turns cancelled gets Cancelled at the call it waits on."""
    call, result = advance(steps)
    while call is not None:
        if is_cancelled is not None and is_cancelled():
            call, result = advance(steps, cancel=True)
            continue
        call, result = advance(steps, runtime.run_call(call))
    return result  # type: ignore[return-value]
