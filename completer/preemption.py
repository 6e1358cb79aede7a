"""Stopping a background model call when a request someone waits for arrives, so that request does not wait for it.

A background prefill (of a document just opened) runs in chunks between the scheduler's iterations, so a keystroke
waits for at most the chunk under way. It need not wait even that: onnxruntime checks a run's
`RunOptions.terminate` between operators, so a reader thread that sees a completion arrive sets it, and the chunk
ends within one operator (docs/benchmarks.md, "Background prefill chunks sized by time"). Nothing is lost but that
chunk's work: a call changes nothing until its output is taken, so the task keeps the same call and runs it again
once nothing urgent is left (completer/scheduler.py, which also lets a call run unstopped once it has been stopped
MAX_STOPS times, so a steady typist cannot starve a prefill).

A completion in the document being prefilled does not stop its chunk: that completion needs the chunk's tokens
too, and ends the prefill itself once the chunk is done.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

MAX_STOPS = 2  # a call stopped this many times runs to its end next time (a keystroke then waits for one chunk)


class Preempted(Exception):
    """A background call stopped for a request someone waits for; its task runs the same call again later."""


class Preemption:
    """Between the threads that read requests (`preempt`) and the one that runs background calls (`running`).

    A request that arrives just before a background call starts stops it too: `preempt` is remembered until the
    loop that takes requests has taken it (`clear`, before it takes them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._options: Any = None  # the run options of the background call under way
        self._documents: frozenset[str] = frozenset()  # the documents of the calls about to run or running
        self._requested: set[str | None] = set()  # the documents of the requests not yet taken (None: unknown)

    def preempt(self, document: str | None = None) -> None:
        """Any thread: a request for `document` arrived. Stop the background call under way, or the next one
        before it starts, unless it is that document's own."""
        with self._lock:
            self._requested.add(document)
            if self._options is not None and self._stops(document):
                self._options.terminate = True

    def clear(self) -> None:
        """The loop that takes requests is about to take every one that arrived: none needs a call stopped now."""
        with self._lock:
            self._requested.clear()

    @contextmanager
    def calls_of(self, documents: Iterable[str]) -> Iterator[None]:
        """Around the background calls of these documents (the scheduler's thread)."""
        with self._lock:
            self._documents = frozenset(documents)
        try:
            yield
        finally:
            with self._lock:
                self._documents = frozenset()

    @contextmanager
    def running(self, options: Any) -> Iterator[None]:
        """Around one background call made with `options` (onnxruntime's RunOptions, whose `terminate` ends the
        run): raises Preempted instead of starting it when a request is waiting, and when the run failed because
        `preempt` stopped it."""
        with self._lock:
            if any(self._stops(document) for document in self._requested):
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

    def _stops(self, document: str | None) -> bool:
        """Whether a request for `document` stops the calls under way (not when they are that document's own)."""
        return document is None or document not in self._documents
