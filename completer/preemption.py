"""Stopping a background model call when a request someone waits for arrives, so that request does not wait for it.

A background prefill (of a document just opened) runs in chunks between the scheduler's iterations, so a keystroke
waits for at most the chunk under way. It need not wait even that: onnxruntime checks a run's
`RunOptions.terminate` between operators, so a reader thread that sees a completion arrive sets it, and the chunk
ends within one operator (under a millisecond for the models measured, docs/architecture.md section 5). Nothing
is lost but that chunk's work: a call changes nothing until its output is taken, so the task keeps the same call
and runs it again once nothing urgent is left.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Preempted(Exception):
    """A background call stopped for a request someone waits for; its task runs the same call again later."""


class Preemption:
    """Between the threads that read requests (`preempt`) and the one that runs background calls (`running`).

    A request that arrives just before a background call starts stops it too: `preempt` is remembered until the
    loop that takes requests has taken it (`clear`, before it takes them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._options: Any = None  # the run options of the background call under way
        self._requested = False

    def preempt(self) -> None:
        """Any thread: stop the background call under way, or the next one before it starts."""
        with self._lock:
            self._requested = True
            if self._options is not None:
                self._options.terminate = True

    def clear(self) -> None:
        """The loop that takes requests is about to take every one that arrived: none needs a call stopped now."""
        with self._lock:
            self._requested = False

    @property
    def requested(self) -> bool:
        return self._requested

    @contextmanager
    def running(self, options: Any) -> Iterator[None]:
        """Around one background call made with `options` (onnxruntime's RunOptions, whose `terminate` ends the
        run): raises Preempted instead of starting it when a request is waiting, and when the run failed because
        `preempt` stopped it."""
        with self._lock:
            if self._requested:
                raise Preempted("a request arrived before the call started")
            self._options = options
        try:
            yield
        except Exception:
            if options.terminate:
                raise Preempted("a request arrived during the call") from None
            raise
        finally:
            with self._lock:
                self._options = None
