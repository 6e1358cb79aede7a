"""Iteration-level scheduling: every active request of the engine advances together, one model call at a time.

A request is a generator of model calls (completer/calls.py): a live completion, a search run ahead of the user,
or a background prefill of a document just opened. Each iteration

1. asks every running task whether it was cancelled, and stops those that were (Cancelled is thrown at the call
   it waits on, so its own cleanup runs);
2. runs one *step* for all the tasks whose next call is a beam step (one new token per row), in one batched call
   where the bundle has a batched graph (Runtime.run_batch: dense layers over all rows, attention per search);
3. runs at most one *prefill chunk* (several new tokens), the most urgent one, equally urgent ones taking turns,
   so a keystroke waits for at most one chunk, however long another document's prefill is (and a background
   prefill's chunk it stops, completer/preemption.py);
4. starts the tasks that were waiting for an earlier task of the same document.

Live tasks of different *owners* (the shared engine's clients: editor windows) share the model's time, not its
iterations: an owner whose live tasks have used more than FAIR_SHARE_S of model time beyond the owner that used
least sits out the iterations until that one catches up (`_held`). An iteration's cost is mostly the work of
one owner (a prefill chunk of a whole context costs a dozen beam steps), so without that a window that keeps
the engine busy, with requests it never cancels, would make each keystroke of another window wait for a chunk
of the other's at every beam step. An owner that starts asking counts from NEW_OWNER_CREDIT_S below the least
used of the others, so a keystroke's search, which needs less, runs alone until it is answered, and an owner
that has kept the engine busy a long time is held no longer than that. Waiting changes no task's result: a
call is computed the same whenever it runs.

A task joins at the next iteration and leaves as soon as it finishes or is cancelled. Live requests come before
searches run ahead, and those before prefetching: a prefetch runs only while no live request or search ahead is
active, and a request that arrives meanwhile stops its call (`preemption`, completer/preemption.py), which runs
again later: unstopped once it has been stopped MAX_STOPS times, so a prefill progresses however fast the user
types. The tasks of one document run one after another, in the order they came, since they share its cache.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from .calls import ModelCall, Steps, advance
from .preemption import MAX_STOPS, Preempted, Preemption
from .types import CancelCheck, Cancelled


FAIR_SHARE_S = 0.01
"""How much more model time one owner's live tasks may have used than another owner's before they wait for it."""
NEW_OWNER_CREDIT_S = 0.1
"""The model time an owner that starts asking may use before the owners already at work run again beside it: more
than a keystroke's search takes (the typing replay's p95 is under 50 ms on two CPUs, scripts/bench_lsp.py), and
a few of a whole context's prefill chunks."""


class Priority(IntEnum):
    LIVE = 0  # a request someone is waiting for
    AHEAD = 1  # a search run ahead of the user, for a request that may come
    PREFETCH = 2  # a background prefill, for the first request in a document


@dataclass(eq=False)
class Task:
    """One request's calls, and where its result goes."""

    steps: Steps[Any]
    priority: Priority
    document: str  # the engine's document key: its tasks run one at a time
    runtime: Any  # the Runtime its calls run on; tasks on the same runtime share batched calls
    is_cancelled: CancelCheck | None = None
    on_done: Callable[[Task], None] | None = None  # told once, when the task finished, failed or was cancelled
    call: ModelCall | None = None  # the call it waits on; None before it starts and after it ends
    result: Any = None
    error: BaseException | None = None
    started: bool = False
    done: bool = False
    order: int = 0  # submission order
    last_chunk: int = -1  # when it last ran a prefill chunk (the scheduler's counter), for turns among prefills
    stops: int = 0  # how many times its call under way was stopped (a prefetch's, completer/preemption.py)
    submitted_at: float = field(default_factory=time.perf_counter)
    owner: Hashable | None = None  # who asked (a shared engine's client): owners' live tasks share the model's time

    @property
    def steps_next(self) -> bool:
        """Its next call is a beam step or a one-token prefill, which can share a batched call."""
        return self.call is not None and self.call.input_ids.shape[1] == 1


class Scheduler:
    """Holds the active tasks and runs their calls, an iteration at a time (`iterate`)."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []
        self._order = itertools.count()
        self.preemption = Preemption()  # the threads that read requests stop a prefetch's call through it
        self.used: dict[Hashable, float] = {}  # model seconds of each owner with live tasks, since it has had them

    def submit(self, task: Task) -> Task:
        """Add a task; it starts at once unless an earlier task of its document is still active. A task that needs
        no model call (typing through, an answer found ahead) is finished when this returns."""
        task.order = next(self._order)
        self.tasks.append(task)
        self._start_ready()
        return task

    def active(self, priority: Priority | None = None, document: str | None = None) -> list[Task]:
        """The tasks not yet finished, oldest first, optionally of one priority or one document."""
        return [t for t in self.tasks if (priority is None or t.priority == priority)
                and (document is None or t.document == document)]

    @property
    def busy(self) -> bool:
        return bool(self.tasks)

    def cancel(self, task: Task) -> None:
        """Stop a task now: Cancelled is thrown at the call it waits on (its cleanup runs), or it never starts."""
        if task.done:
            return
        if task.started:
            self._advance(task, cancel=True)
        else:
            self._finish(task, error=Cancelled("cancelled before it started"))
        self._start_ready()

    def promote(self, task: Task, priority: Priority) -> None:
        task.priority = min(task.priority, priority)

    def iterate(self) -> int:
        """One iteration: stop the cancelled tasks, one batched step for every task at a step, one prefill chunk.
        Returns how many model calls the iteration asked for (0: nothing could run)."""
        for task in [t for t in self.tasks if t.started and t.is_cancelled is not None]:
            if not task.done and task.is_cancelled():
                self._advance(task, cancel=True)
        self._start_ready()
        urgent = any(t.priority < Priority.PREFETCH for t in self.tasks)  # then no prefetch runs
        held = self._held()
        runnable = sorted((t for t in self.tasks if t.call is not None and not (urgent and t.priority ==
                                                                                 Priority.PREFETCH)
                           and not (t.priority == Priority.LIVE and t.owner in held)),
                          key=lambda t: (t.priority, t.order))
        stepping = [t for t in runnable if t.steps_next]
        # The most urgent prefill chunk; among equally urgent ones, the task that ran one least recently, so a
        # keystroke's short prefill is not held behind every chunk of another document's long one.
        chunk = min((t for t in runnable if not t.steps_next), key=lambda t: (t.priority, t.last_chunk, t.order),
                    default=None)
        for runtime in dict.fromkeys(t.runtime for t in stepping):  # one batch per model
            group = [t for t in stepping if t.runtime is runtime]
            outputs = self._timed_run(runtime, group)
            for task, output in zip(group, outputs or ()):
                self._advance(task, output)
        if chunk is not None:
            chunk.last_chunk = next(self._order)
            outputs = self._timed_run(chunk.runtime, [chunk])
            if outputs:
                self._advance(chunk, outputs[0])
        self._start_ready()
        return len(stepping) + (chunk is not None)

    def run_until_done(self, task: Task) -> Any:
        """Iterate until `task` has finished (with every other task alongside); its result, or its error raised."""
        while not task.done:
            self.iterate()
        if task.error is not None:
            raise task.error
        return task.result

    # -- internals --------------------------------------------------------------------------------
    def _held(self) -> set[Hashable]:
        """The owners whose live tasks sit out this iteration: those that have used more than FAIR_SHARE_S of model
        time beyond the owner with runnable live tasks that used least. An owner new to live work starts
        NEW_OWNER_CREDIT_S below the least used one; one with none left is forgotten."""
        owners = {t.owner for t in self.tasks if t.priority == Priority.LIVE and t.owner is not None}
        for owner in [o for o in self.used if o not in owners]:
            del self.used[owner]
        start = min(self.used.values(), default=0.0) - NEW_OWNER_CREDIT_S
        for owner in owners:
            self.used.setdefault(owner, start)
        running = {t.owner for t in self.tasks if t.priority == Priority.LIVE and t.owner is not None
                   and t.call is not None}
        if len(running) < 2:
            return set()
        least = min(self.used[owner] for owner in running)
        return {owner for owner in running if self.used[owner] > least + FAIR_SHARE_S}

    def _timed_run(self, runtime: Any, tasks: list[Task]) -> list[Any] | None:
        """`_run`, its time counted to the owners of the live tasks among `tasks`, in equal shares."""
        started = time.perf_counter()
        try:
            return self._run(runtime, tasks)
        finally:
            share = (time.perf_counter() - started) / len(tasks)
            for task in tasks:
                if task.priority == Priority.LIVE and task.owner in self.used:
                    self.used[task.owner] += share

    def _run(self, runtime: Any, tasks: list[Task]) -> list[Any] | None:
        """The tasks' calls in one batch; None when it failed, which fails each of these tasks (the reason thrown
        at the call each waits on), not the scheduler, or when a request stopped a prefetch's call, which the
        tasks keep to run again."""
        calls = [t.call for t in tasks]
        try:
            if all(t.priority == Priority.PREFETCH and t.stops < MAX_STOPS for t in tasks):
                with self.preemption.calls_of(t.document for t in tasks):
                    outputs = runtime.run_batch(calls, preemption=self.preemption)
            else:
                outputs = runtime.run_batch(calls)
        except Preempted:
            for task in tasks:
                task.stops += 1
            return None
        except Exception as exc:  # onnxruntime refused the batch: each task fails with the reason
            for task in tasks:
                self._advance(task, error=exc)
            return None
        for task in tasks:
            task.stops = 0
        return outputs

    def _start_ready(self) -> None:
        """Start every task that is first among its document's active tasks."""
        while True:
            ready = [t for t in self.tasks if not t.started and not t.done
                     and next(u for u in self.tasks if u.document == t.document and not u.done) is t]
            if not ready:
                return
            for task in ready:
                task.started = True
                self._advance(task)

    def _advance(self, task: Task, output: Any = None, cancel: bool = False, error: BaseException | None = None
                 ) -> None:
        """Resume the task with its call's output (or Cancelled, or the call's failure); record what it asks next."""
        if task.done:
            return
        try:
            if error is not None:
                task.call = task.steps.throw(error)
                return
            task.call, result = advance(task.steps, output, cancel=cancel)
        except StopIteration as stop:  # returned after an error thrown in
            self._finish(task, result=stop.value)
            return
        except Exception as exc:  # Cancelled, or whatever the request raised
            self._finish(task, error=exc)
            return
        if task.call is None:
            self._finish(task, result=result)

    def _finish(self, task: Task, result: Any = None, error: BaseException | None = None) -> None:
        task.done, task.call, task.result, task.error = True, None, result, error
        if task in self.tasks:
            self.tasks.remove(task)
        if task.started:
            task.steps.close()
        if task.on_done is not None:
            task.on_done(task)
