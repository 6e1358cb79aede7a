"""The worker's jobs as scheduler tasks, against what an adversarial run found: each window's settings stay its
own, answers searched ahead survive another window's settings, a keystroke's prefill is not held behind another
document's, a batched graph that fails leaves searches their answers, and cancels of no job are not kept."""
from __future__ import annotations

import io
import json
import logging
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from completer.calls import ModelCall
from completer.engine import Engine
from completer.scheduler import Priority, Scheduler, Task
from completer.types import Cancelled, EngineSettings
from lsp import framing
from lsp import worker as worker_module
from lsp.worker import Client, Worker, model_key
from lsp_support import SAMPLE_TEXT

LINE_END = ("class Inventory:\n    def __init__(self, name):\n        self.name = name\n\n"
            "    def add(self, item, count=1):")


def replies(client: Client) -> list[dict]:
    data, out = client.out.getvalue(), []
    stream = io.BytesIO(data)
    while (frame := framing.read_frame(stream)) is not None:
        out.append(frame)
    return out


def worker_with(engine: Engine, *settings: EngineSettings) -> tuple[Worker, list[Client]]:
    """A worker whose clients (one per settings) share `engine`, as windows on the shared engine do."""
    worker = Worker(shared=True)
    clients = []
    for index, own in enumerate(settings, start=1):
        client = Client(index, io.BytesIO(), model_key=model_key(own), settings=own)
        worker.clients[client.id] = client
        clients.append(client)
    worker.engines[model_key(settings[0])] = engine
    return worker, clients


def complete(worker: Worker, client: Client, job: int, uri: str, before: str) -> None:
    client.last_job = max(client.last_job, job)
    worker._take(client, {"id": job, "op": "complete", "uri": uri, "before": before, "after": "", "below": ""})


def run_idle(worker: Worker) -> None:
    """Let the worker's idle work start (as after the user's pause) and run everything to the end."""
    worker._quiet_since = time.monotonic() - worker_module.SEARCH_AHEAD_AFTER_S
    worker._start_idle_work()
    while worker.scheduler.busy:
        worker.scheduler.iterate()


def test_each_windows_search_ahead_setting_is_its_own():
    """Window A has searchAhead off, window B on. A job of B's taken while A's completion runs applies B's settings
    to the engine; A still gets no search ahead, and B's own completion still gets one."""
    engine = Engine()
    off, on = replace(engine.settings, search_ahead=False), replace(engine.settings, search_ahead=True)
    worker, (a, b) = worker_with(engine, off, on)
    complete(worker, a, 1, "file:///a.py", LINE_END)
    worker.scheduler.iterate()
    worker._take(b, {"id": 1, "op": "info"})
    while worker.scheduler.busy:
        worker.scheduler.iterate()
    assert "ok" in replies(a)[-1] and worker._ahead is None, "A's completion started a search ahead"
    complete(worker, b, 2, "file:///b.py", LINE_END)
    worker.scheduler.iterate()
    worker._take(a, {"id": 2, "op": "info"})
    while worker.scheduler.busy:
        worker.scheduler.iterate()
    assert worker._ahead is not None and worker._ahead[0] is b, "B's completion lost its search ahead"


def test_answers_searched_ahead_survive_another_windows_settings():
    """Another window's settings applied to the shared engine in between do not throw away an answer searched
    ahead: Enter in the first window is still answered from it, without the model."""
    engine = Engine()
    mine = engine.settings
    engine.search_next_line("file:///kept.py", LINE_END)
    engine.configure(replace(mine, max_suggestions=1, beams=2))  # another window's job
    enter = engine.complete_text("file:///kept.py", LINE_END + "\n        ", "")
    assert enter.model_runs > 0, "answered from a search made with other settings"
    engine.search_next_line("file:///kept.py", LINE_END)  # searched ahead with the other window's settings...
    engine.configure(mine)  # ...and back to the first window's: a search of its own is needed
    engine.search_next_line("file:///kept.py", LINE_END)
    engine.configure(replace(mine, max_suggestions=1, beams=2))
    engine.configure(mine)
    enter = engine.complete_text("file:///kept.py", LINE_END + "\n        ", "")
    assert enter.model_runs == 0 and enter.suggestions


def test_a_small_memory_budget_of_a_window_joining_evicts_no_other_windows_document():
    engine = Engine()
    worker, (a,) = worker_with(engine, engine.settings)
    complete(worker, a, 1, "file:///big.py", SAMPLE_TEXT)
    while worker.scheduler.busy:
        worker.scheduler.iterate()
    assert a.document("file:///big.py") in engine.cache
    b = Client(2, io.BytesIO())
    worker.clients[b.id] = b
    worker._configure(b, {**engine.settings.__dict__, "memory_budget_mb": 1})
    assert a.document("file:///big.py") in engine.cache, "one window's small budget evicted another's document"
    assert b.settings.memory_budget_mb == 1


def test_cancels_of_no_job_sent_are_not_kept():
    """A client that sends cancels for ids it never used, or ids of other types, leaves nothing behind."""
    worker = Worker(shared=True)
    client = Client(1, io.BytesIO())
    worker.clients[client.id] = client
    frames = [{"op": "cancel", "id": n} for n in range(10, 5000)] + [{"op": "cancel", "id": "x"}]
    frames += [{"op": "cancel", "id": [1]}, {"id": 3, "op": "ping"}, {"op": "cancel", "id": 3},
               {"op": "cancel", "id": 4}]
    worker.read_loop(client, io.BytesIO(b"".join(framing.encode(f) for f in frames)))
    assert worker._cancelled == {(1, 3)}
    assert client.last_job == 3


def test_a_keystrokes_prefill_is_not_held_behind_another_documents_long_one():
    engine = Engine()
    scheduler = Scheduler()
    pasted = scheduler.submit(Task(engine.complete_steps("file:///pasted.py", SAMPLE_TEXT * 6, ""), Priority.LIVE,
                                   "pasted", engine.runtime))
    scheduler.iterate()  # the paste's first chunk
    engine.prefill("file:///typed.py", SAMPLE_TEXT)
    typed = scheduler.submit(Task(engine.complete_steps("file:///typed.py", SAMPLE_TEXT + "\nimport os\nimport sy",
                                                        ""), Priority.LIVE, "typed", engine.runtime))
    assert typed.call is not None and typed.call.is_prefill
    iterations = 0
    while typed.call is not None and typed.call.is_prefill:
        scheduler.iterate()
        iterations += 1
    assert iterations <= 2 and not pasted.done, "the keystroke's prefill waited for the paste's"
    while scheduler.busy:
        scheduler.iterate()
    assert typed.result.suggestions and pasted.result.new_tokens > 500


def test_a_failing_batched_graph_leaves_searches_their_answers(tmp_path: Path, model_dir: Path, caplog):
    """A batched graph that cannot load (here: modified after the bundle was verified) is given up with one log
    line; the searches that would have shared it run one at a time and get the answers they get alone."""
    bundle = tmp_path / "bundle"
    shutil.copytree(model_dir, bundle, ignore=shutil.ignore_patterns("training"))
    engine = Engine(EngineSettings(model_path=str(bundle)))
    batched = json.loads((bundle / "manifest.json").read_text())["batched_model"]["file"]
    (bundle / batched).write_bytes(b"not a graph")  # after the bundle was verified and loaded
    alone = [engine.complete_text(f"file:///alone{k}.py", SAMPLE_TEXT[:300 + 100 * k], "") for k in range(3)]
    scheduler = Scheduler()
    with caplog.at_level(logging.WARNING, logger="completer.runtime"):
        tasks = [scheduler.submit(Task(engine.complete_steps(f"file:///shared{k}.py", SAMPLE_TEXT[:300 + 100 * k],
                                                             ""), Priority.LIVE, f"s{k}", engine.runtime))
                 for k in range(3)]
        while scheduler.busy:
            scheduler.iterate()
    assert [[s.line for s in t.result.suggestions] for t in tasks] == [[s.line for s in a.suggestions]
                                                                        for a in alone]
    assert engine.runtime.batched_model is None
    assert len([r for r in caplog.records if "batched graph" in r.getMessage()]) == 1


class _FailingOnce:
    """A runtime whose first batch fails and whose later calls answer with their input ids."""

    def __init__(self) -> None:
        self.batches = 0

    def run_batch(self, calls, preemption=None):
        self.batches += 1
        if self.batches == 1:
            raise RuntimeError("the batch failed")
        return [call.input_ids for call in calls]


def test_a_request_that_survives_a_failed_batch_gets_its_next_call_run():
    def steps():
        try:
            yield ModelCall(np.array([[1]]), 0, [])
        except RuntimeError:
            pass
        output = yield ModelCall(np.array([[7]]), 0, [])
        return int(output[0, 0])

    runtime = _FailingOnce()
    scheduler = Scheduler()
    task = scheduler.submit(Task(steps(), Priority.LIVE, "doc", runtime))
    while scheduler.busy:
        scheduler.iterate()
    assert task.error is None and task.result == 7 and runtime.batches == 2


def test_a_cancelled_task_is_answered_once_with_cancelled():
    engine = Engine()
    worker, (a,) = worker_with(engine, engine.settings)
    complete(worker, a, 1, "file:///c.py", SAMPLE_TEXT)
    worker._cancelled.add((a.id, 1))
    while worker.scheduler.busy:
        worker.scheduler.iterate()
    answers = [r for r in replies(a) if r.get("id") == 1]
    assert len(answers) == 1 and answers[0]["err"]["kind"] == "cancelled"
    assert not worker._cancelled and not a.completions
    assert isinstance(Cancelled(), Exception)


def test_a_window_that_forgets_its_searches_ahead_drops_its_own_and_those_its_running_completion_would_start():
    """forget_ahead (the window's excludeFiles or workspaceContext changed): its answers searched ahead with the
    snippets of before are dropped, and its completion still running starts no search ahead with them; another
    window's answers on the shared engine stay."""
    engine = Engine()
    worker, (a, b) = worker_with(engine, engine.settings, engine.settings)
    enter = LINE_END + "\n        "
    for client in (a, b):
        complete(worker, client, 1, "file:///x.py", LINE_END)
        while worker.scheduler.busy:
            worker.scheduler.iterate()
        run_idle(worker)
        assert engine.answers_from_ahead(client.document("file:///x.py"), enter, ""), "nothing was searched ahead"
    complete(worker, a, 2, "file:///y.py", LINE_END)
    worker.scheduler.iterate()
    assert worker.scheduler.active(document=a.document("file:///y.py")), "the completion is over already"
    worker._take(a, {"id": 3, "op": "forget_ahead"})
    while worker.scheduler.busy:
        worker.scheduler.iterate()
    answered = {reply["id"]: reply for reply in replies(a)}
    assert answered[3] == {"id": 3, "ok": None} and "result" in answered[2]["ok"], answered
    assert worker._ahead is None, "a completion sent before forget_ahead started a search ahead"
    assert not engine.answers_from_ahead(a.document("file:///x.py"), enter, "")
    assert engine.answers_from_ahead(b.document("file:///x.py"), enter, ""), "another window's answers were dropped"
