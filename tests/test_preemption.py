"""A completion that arrives while the engine prefills another document in the background stops the chunk under
way instead of waiting for it (completer/preemption.py): onnxruntime's terminate flag ends the real run (in every
kind of call the runtime makes), the task keeps its call and runs it again, a call stopped MAX_STOPS times runs
to its end, a completion in the prefilled document itself stops nothing, and the worker's reader thread is what
stops it."""
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
from completer.prefill_chunks import PrefillChunks
from completer.preemption import MAX_STOPS, Preempted, Preemption
from completer.scheduler import Priority, Scheduler, Task
from completer.types import EngineSettings
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


def assert_same_outputs(expected: list, outputs: list) -> None:
    for one, other in zip(expected, outputs, strict=True):
        for (key, value), (key2, value2) in zip(one.present, other.present, strict=True):
            np.testing.assert_array_equal(key, key2)
            np.testing.assert_array_equal(value, value2)


@pytest.mark.parametrize("kind", ["graph of one slot", "IO binding", "batched graph", "older graph, no slots"])
def test_onnxruntime_ends_a_run_its_preemption_stops_and_the_session_runs_on(kind):
    engine = Engine(EngineSettings(model_path="models/python-base")) if kind == "older graph, no slots" else Engine()
    assert engine.runtime.slotted == (kind != "older graph, no slots")
    engine.runtime.io_binding = kind == "IO binding"
    calls = [prefill_call(engine)] + ([prefill_call(engine, 120)] if kind == "batched graph" else [])
    if kind == "batched graph":  # a batch of one-token rows: what the batched graph runs
        calls = [ModelCall(c.input_ids[:, :1].repeat(2, axis=0), 0, c.prefix) for c in calls]
    expected = engine.runtime.run_batch(calls)
    ran = engine.runtime.calls
    with pytest.raises(Preempted):
        engine.runtime.run_batch(calls, preemption=StopsOnceStarted())
    assert engine.runtime.calls == ran + 1  # it started
    assert engine.runtime.batched_model is not None or kind == "older graph, no slots", "a stop disabled the batched graph"
    assert_same_outputs(expected, engine.runtime.run_batch(calls, preemption=Preemption()))  # nobody stops this one


def test_a_run_stopped_midway_from_another_thread_ends_and_runs_again_the_same():
    engine = Engine()
    call = prefill_call(engine, 1000)
    expected = engine.runtime.run_batch([call])
    preemption = Preemption()

    def stop_once_running() -> None:
        deadline = time.monotonic() + 30
        while preemption._options is None and time.monotonic() < deadline:  # the run has begun
            time.sleep(0.0002)
        time.sleep(0.002)
        preemption.preempt("file:///typed.py")

    stopper = threading.Thread(target=stop_once_running)
    stopper.start()
    with pytest.raises(Preempted):
        engine.runtime.run_batch([call], preemption=preemption)
    stopper.join()
    preemption.clear()
    assert_same_outputs(expected, engine.runtime.run_batch([call], preemption=preemption))


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
    assert counted.runs == 0 and engine.runtime.calls == 0, "a call that never ran was run or counted"
    preemption.clear()
    assert engine.runtime.run_batch([prefill_call(engine, 8)], preemption=preemption)[0].present
    assert counted.runs == 1


def _fixed_chunks(engine: Engine, tokens: int = 32) -> Engine:
    """`engine` with background chunks of one length whatever they take: INT8 quantizes each call's activations
    with one scale, so caches prefilled in chunks of other lengths (as a loaded machine times them) differ."""
    chunks = PrefillChunks(engine.background_chunks.most, size=tokens)
    chunks.record = lambda *_args, **_kwargs: None  # type: ignore[method-assign]
    engine.background_chunks = chunks
    return engine


def test_a_stopped_prefetch_keeps_its_call_and_prefills_the_same_tokens_once_nothing_stops_it():
    engine = _fixed_chunks(Engine())
    reference = _fixed_chunks(Engine())
    reference.open("file:///opened.py", SAMPLE_TEXT)
    reference.prefill("file:///opened.py", SAMPLE_TEXT)
    scheduler = Scheduler()
    task = scheduler.submit(Task(engine.prefill_steps("file:///opened.py", SAMPLE_TEXT), Priority.PREFETCH,
                                 "file:///opened.py", engine.runtime))
    waiting = task.call
    scheduler.preemption.preempt("file:///typed.py")  # and never cleared: a typist who never pauses
    for _ in range(MAX_STOPS):
        scheduler.iterate()
    assert task.call is waiting and not task.done, "a stopped call was lost or taken as run"
    assert task.stops == MAX_STOPS
    scheduler.iterate()
    assert task.call is not waiting and task.stops == 0, "a call stopped MAX_STOPS times did not run to its end"
    live = scheduler.submit(Task(engine.complete_steps("file:///typed.py", TYPED, ""), Priority.LIVE,
                                 "file:///typed.py", engine.runtime))
    assert scheduler.run_until_done(live).suggestions, "a completion was stopped like a prefetch"
    while not task.done:  # each call at most MAX_STOPS times stopped, then run: the prefill ends all the same
        scheduler.iterate()
    assert task.error is None and task.result > 100
    ours, theirs = engine.cache.get_quietly("file:///opened.py"), reference.cache.get_quietly("file:///opened.py")
    assert ours.ids == theirs.ids
    for (key, value), (key2, value2) in zip(ours.prefix(), theirs.prefix()):
        np.testing.assert_allclose(key, key2, atol=1e-4)  # stopped and run again: the same cache
        np.testing.assert_allclose(value, value2, atol=1e-4)


def test_a_request_in_the_prefilled_document_stops_none_of_its_calls():
    """That completion needs the chunk's tokens too; a request in another document (or of no known one) stops it."""
    preemption = Preemption()
    with preemption.calls_of(["1:file:///opened.py"]):
        own = SimpleNamespace(terminate=False)
        with preemption.running(own):
            preemption.preempt("1:file:///opened.py")
        assert not own.terminate
        other = SimpleNamespace(terminate=False)
        with pytest.raises(Preempted):
            with preemption.running(other):
                preemption.preempt("1:file:///typed.py")
                raise RuntimeError("Exiting due to terminate flag being set to true")
        assert other.terminate
        with pytest.raises(Preempted):  # still requested: the next call does not start
            with preemption.running(SimpleNamespace(terminate=False)):
                pass
        preemption.clear()
        preemption.preempt("1:file:///opened.py")
        with preemption.running(SimpleNamespace(terminate=False)):  # requested before it began, for its own document
            pass
    preemption.clear()
    preemption.preempt()
    with pytest.raises(Preempted), preemption.calls_of(["1:file:///opened.py"]), \
            preemption.running(SimpleNamespace(terminate=False)):
        pass


@pytest.mark.parametrize("typed_in", ["another document", "the document being prefilled"])
def test_a_completion_reaching_the_worker_stops_another_documents_prefill_chunk(typed_in, monkeypatch):
    """Through the worker's threads: a prefill chunk that would run until stopped (or until released) is stopped
    by a completion's arrival on the client's channel when the completion is for another document, and not when
    it is for the document being prefilled, which needs the chunk's tokens; either completion is answered, and
    the other document's prefill then finishes."""
    monkeypatch.setattr(worker_module, "SEARCH_AHEAD_AFTER_S", 0.01)
    engine = Engine()
    run_batch = engine.runtime.run_batch
    started, released, stopped = threading.Event(), threading.Event(), []

    def chunk_until_stopped(calls, preemption=None):
        if preemption is not None and not stopped:
            options = SimpleNamespace(terminate=False)  # what the runtime gives onnxruntime
            with preemption.running(options):
                started.set()
                deadline = time.monotonic() + 30
                while not options.terminate and not released.is_set() and time.monotonic() < deadline:
                    time.sleep(0.001)
                stopped.append(options.terminate)
                if options.terminate:
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
        if typed_in == "another document":
            send({"id": 2, "op": "complete", "uri": "file:///typed.py", "before": TYPED, "after": "", "below": ""})
        else:
            send({"id": 2, "op": "complete", "uri": "file:///opened.py", "before": SAMPLE_TEXT, "after": "",
                  "below": ""})
            time.sleep(0.3)  # time enough for the reader to have stopped it, were it to
            assert not stopped, "a completion in the document being prefilled stopped the chunk it needs"
            released.set()
        answer = framing.read_frame(replies)
        assert answer["id"] == 2 and "ok" in answer, answer
        if typed_in == "the document being prefilled":
            assert stopped == [False]
            worker._stopping.set()
            return
        assert answer["ok"]["result"]["suggestions"], answer
        assert stopped == [True], "the chunk under way was not stopped by the completion's arrival"
        document = client.document("file:///opened.py")
        deadline = time.monotonic() + 30
        while not (document in engine.cache and len(engine.cache.get_quietly(document).ids) > 100):
            assert time.monotonic() < deadline, "the stopped prefill never finished"
            time.sleep(0.01)
        worker._stopping.set()
