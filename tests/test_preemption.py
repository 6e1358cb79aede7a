"""A completion that arrives while the engine prefills another document in the background stops the chunk under
way instead of waiting for it (completer/preemption.py): onnxruntime's terminate flag ends the real run, the
task keeps its call and runs it again, and the worker's reader thread is what stops it."""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from completer.calls import ModelCall
from completer.engine import Engine
from completer.preemption import Preempted, Preemption
from completer.scheduler import Priority, Scheduler, Task
from lsp import framing
from lsp import worker as worker_module
from lsp.worker import Worker, model_key
from lsp_support import SAMPLE_TEXT

TYPED = ("class Inventory:\n    def __init__(self, name):\n        self.name = name\n\n"
         "    def add(self, item, count=1):\n        ")


class StopsOnceStarted(Preemption):
    """Stops the call as a reader thread would once the run has started: onnxruntime must end it."""

    @contextmanager
    def running(self, options: Any) -> Iterator[None]:
        with super().running(options):
            self.preempt()
            yield


def prefill_call(engine: Engine, tokens: int = 200) -> ModelCall:
    ids = np.arange(10, 10 + tokens, dtype=np.int64)[None, :] % engine.runtime.vocab_size
    return ModelCall(ids, 0, engine.runtime.empty_prefix())


def test_onnxruntime_ends_a_run_its_preemption_stops_and_the_session_runs_on():
    engine = Engine()
    call = prefill_call(engine)
    expected = engine.runtime.run_batch([call])[0]
    with pytest.raises(Preempted):
        engine.runtime.run_batch([call], preemption=StopsOnceStarted())
    again = engine.runtime.run_batch([call], preemption=Preemption())  # nobody stops this one
    for (key, value), (key2, value2) in zip(expected.present, again[0].present):
        np.testing.assert_array_equal(key, key2)
        np.testing.assert_array_equal(value, value2)


class CountedRuns:
    """An onnxruntime session that counts its runs."""

    def __init__(self, session: Any) -> None:
        self.session, self.runs = session, 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.runs += 1
        return self.session.run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def test_a_request_waiting_before_the_call_starts_stops_it_before_it_runs():
    engine = Engine()
    engine.runtime.session = counted = CountedRuns(engine.runtime.session)
    preemption = Preemption()
    preemption.preempt()
    with pytest.raises(Preempted):
        engine.runtime.run_batch([prefill_call(engine, 1000)], preemption=preemption)
    assert counted.runs == 0
    preemption.clear()
    assert engine.runtime.run_batch([prefill_call(engine, 8)], preemption=preemption)[0].present
    assert counted.runs == 1


def test_a_stopped_prefetch_keeps_its_call_and_prefills_the_same_tokens_once_nothing_stops_it():
    engine = Engine()
    reference = Engine()
    reference.open("file:///opened.py", SAMPLE_TEXT)
    reference.prefill("file:///opened.py", SAMPLE_TEXT)
    scheduler = Scheduler()
    task = scheduler.submit(Task(engine.prefill_steps("file:///opened.py", SAMPLE_TEXT), Priority.PREFETCH,
                                 "file:///opened.py", engine.runtime))
    waiting = task.call
    scheduler.preemption.preempt()
    for _ in range(3):
        scheduler.iterate()
    assert task.call is waiting and not task.done, "a stopped call was lost or taken as run"
    live = scheduler.submit(Task(engine.complete_steps("file:///typed.py", TYPED, ""), Priority.LIVE,
                                 "file:///typed.py", engine.runtime))
    assert scheduler.run_until_done(live).suggestions, "a completion was stopped like a prefetch"
    scheduler.preemption.clear()
    assert scheduler.run_until_done(task) > 100
    ours, theirs = engine.cache.get_quietly("file:///opened.py"), reference.cache.get_quietly("file:///opened.py")
    assert ours.ids == theirs.ids
    for (key, value), (key2, value2) in zip(ours.prefix(), theirs.prefix()):
        np.testing.assert_allclose(key, key2, atol=1e-4)  # chunked differently (sized by time), same cache
        np.testing.assert_allclose(value, value2, atol=1e-4)


def test_a_completion_reaching_the_worker_stops_another_documents_prefill_chunk(monkeypatch):
    """Through the worker's threads: a prefill chunk that would run until stopped is stopped by the completion's
    arrival on the client's channel, the completion is answered, and the prefill then finishes."""
    monkeypatch.setattr(worker_module, "SEARCH_AHEAD_AFTER_S", 0.01)
    engine = Engine()
    run_batch = engine.runtime.run_batch
    started, stopped = threading.Event(), []

    def chunk_until_stopped(calls, preemption=None):
        if preemption is not None and not stopped:
            options = SimpleNamespace(terminate=False)  # what the runtime gives onnxruntime
            with preemption.running(options):
                started.set()
                deadline = time.monotonic() + 30
                while not options.terminate and time.monotonic() < deadline:
                    time.sleep(0.001)
                stopped.append(options.terminate)
                raise RuntimeError("Exiting due to terminate flag being set to true")  # as onnxruntime ends it
        return run_batch(calls, preemption)

    engine.runtime.run_batch = chunk_until_stopped
    worker = Worker(shared=True)
    to_worker_read, to_worker_write = os.pipe()
    from_worker_read, from_worker_write = os.pipe()
    with os.fdopen(to_worker_write, "wb") as requests, os.fdopen(from_worker_read, "rb") as replies:
        client = worker.add_client(os.fdopen(to_worker_read, "rb"), out=os.fdopen(from_worker_write, "wb"))
        client.settings, client.model_key = engine.settings, model_key(engine.settings)
        worker.engines[client.model_key] = engine
        threading.Thread(target=worker.serve, daemon=True).start()

        def send(message: dict) -> None:
            requests.write(framing.encode(message))
            requests.flush()

        send({"id": 1, "op": "prefill", "uri": "file:///opened.py", "text": SAMPLE_TEXT})
        assert framing.read_frame(replies) == {"id": 1, "ok": None}
        assert started.wait(30), "the background prefill never started"
        send({"id": 2, "op": "complete", "uri": "file:///typed.py", "before": TYPED, "after": "", "below": ""})
        answer = framing.read_frame(replies)
        assert answer["id"] == 2 and answer["ok"]["result"]["suggestions"], answer
        assert stopped == [True], "the chunk under way was not stopped by the completion's arrival"
        document = client.document("file:///opened.py")
        deadline = time.monotonic() + 30
        while not (document in engine.cache and len(engine.cache.get_quietly(document).ids) > 100):
            assert time.monotonic() < deadline, "the stopped prefill never finished"
            time.sleep(0.01)
        worker._stopping.set()
