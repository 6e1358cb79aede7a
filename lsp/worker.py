"""The inference worker: a child process that owns the Engine and answers msgpack frames.

Running the model here, not in the server, keeps the server's event loop free (it keeps answering
`shutdown`, `$/cancelRequest` and other documents while a beam search runs) and lets the server
survive a crash in native code by simply starting a new worker.

Protocol (one msgpack map per frame, see `lsp.framing`):
  server -> worker  {"id": n, "op": "hello", "version": str, "source": str}
                    (the shared engine answers its version, pid and source: lsp/engine_socket.py's fingerprint of
                    the code it imported, which a server that runs other code refuses)
                    {"id": n, "op": "init"|"configure", "settings": {EngineSettings fields}}
                    {"id": n, "op": "complete", "uri": str, "before": str, "after": str, "below": str,
                     "others": [str], "snippets": [str], "repository": {"name": str, "path": str, "paths": [str]},
                     "language": str}
                     (the heads of other open files, most recently edited first; windows of the repository's files
                     like the code at the cursor; the workspace folder, the document's path in it and each
                     snippet's: completer/repository.py; the document's LSP language id, whose rules the
                     filters follow, Python where it is left out: completer/syntax.py)
                    {"id": n, "op": "close", "uri": str}
                    {"id": n, "op": "prefill", "uri": str, "text": str}  (answered at once; run when idle)
                    {"id": n, "op": "info"}
                    {"id": n, "op": "forget_ahead"}  (the client's searches run ahead are stopped and their answers
                     dropped: their snippets may hold a file the client no longer reads, lsp/server.py)
                    {"op": "cancel", "id": n}        (no reply; the search for job n stops at its next beam step)
  worker -> server  {"id": n, "ok": value} or {"id": n, "err": {"kind": str, "message": str}}

Completions are tasks of the engine's scheduler (completer/scheduler.py): every active search, of every client
and document, advances one beam step per iteration, in one batched call where the model has a batched graph,
and a long prefill runs in chunks between iterations. A completion joins at the next iteration and its reply
goes out as soon as it finishes; the other jobs are answered as they arrive. Each task names its client as its
owner, so the clients' live searches share the model's time: one that keeps the engine busy waits while another's
keystroke is searched (completer/scheduler.py). A reader thread drains each
client's channel continuously so a cancel arrives while a search is running; the scheduler asks for it at
every iteration.

A worker serves one server over its stdin and stdout (`--standalone`, and where there are no Unix sockets),
or, as the user's shared engine (`--listen SOCKET`, lsp/engine_socket.py), every server that connects to
its socket: one Engine per model, whichever window asked for it, documents kept apart per client, and
each client's settings applied to its own jobs. The shared engine exits IDLE_EXIT_S after its last client
leaves.

When a completion at the end of a line of code has been answered and no job comes for SEARCH_AHEAD_AFTER_S,
the worker searches the line after Enter ahead of time (Engine.search_next_line_steps, at the likeliest
indentations), so that keystroke, whose search is the longest, is answered at once. A search ahead keeps its
place among the live searches of other documents; a completion in its own document that it did not foresee
stops it, and one it foresaw waits for it.

A document just opened is prefilled in the background (Engine.prefill_steps, in chunks) while no completion or
search ahead is active, so the first keystroke in it costs only its own line. A completion in another document
that arrives stops the chunk under way (the reader thread sets its run's terminate flag, completer/preemption.py),
which runs again once nothing more urgent is left, so it waits for no chunk. The first completion in the
document ends its prefill: from then on its own requests keep its cache, and the text it was opened with is
stale.
"""
from __future__ import annotations

import argparse
import itertools
import logging
import os
import queue
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO

from lsp import __version__, framing
from lsp.engine_socket import CODE_CHANGED_EXIT, SOURCE_FINGERPRINT

log = logging.getLogger("lsp.worker")

SEARCH_AHEAD_AFTER_S = 0.15  # quiet time after an answer at a line's end before the next line is searched
STEP_DELAY_ENV = "COMPLETER_WORKER_STEP_DELAY_MS"
"""Debug/test hook: sleep this many ms at every cancellation poll, to make searches slow on purpose."""

IDLE_EXIT_S = float(os.environ.get("COMPLETER_ENGINE_IDLE_EXIT_S") or 300)
"""The shared engine exits this long after its last client left (the env variable is for tests)."""

SEND_TIMEOUT_S = 2
"""A shared engine's client whose reply waits this long to be written is not reading (a server's event loop
reads its socket all the time; the socket's buffer holds many replies): it is cut off, and its queued jobs
are dropped, so it cannot stall the other windows. A server cut off by mistake reconnects, as after a crash."""

_GONE = object()  # a client's channel closed


@dataclass(eq=False)
class Client:
    """One server talking to this worker: its channel, its settings, and the model they chose."""

    id: int
    out: BinaryIO | None  # a standalone worker's stdout
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    settings: Any = None  # its EngineSettings, once it sent init
    model_key: tuple | None = None  # which of the worker's engines serves it
    gone: bool = False  # its channel closed: its search in progress stops at the next beam step
    sendall: Any = None  # a shared engine's client: its socket's sendall, which its send timeout bounds
    hang_up: Any = None  # closes its channel (the shared engine's clients), so its reader sees the end
    completions: set = field(default_factory=set)  # ids of its completion jobs not yet answered
    last_job: int = 0  # the highest integer job id its reader has queued: a cancel names one of those, or none
    context_epoch: int = 0  # moves at each forget_ahead: a completion sent before it starts no search ahead

    def document(self, uri: str) -> str:
        """The engine's key for the client's document: clients never share a document's cache."""
        return f"{self.id}:{uri}"


def model_key(settings: Any) -> tuple:
    """What loads a model: clients that agree on it share one Engine. The bundle's manifest as it is on disk is part
    of it: a bundle made again in place (`completer convert --force`) while a window still uses it is loaded anew
    for the next window that asks (a restarted one), not served from the copy loaded before."""
    return (settings.model_path, _manifest_stamp(settings.model_path), settings.device, settings.threads)


def _manifest_stamp(model_path: str | None) -> tuple[int, int, int] | None:
    """The identity of the bundle's manifest file (inode, size, modification time), which every conversion or copy
    writes anew; None where it cannot be read (loading then says why)."""
    from completer.bundle import bundle_dir

    try:
        found = (bundle_dir(model_path) / "manifest.json").stat()
    except (OSError, ValueError):
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


class Worker:
    """Holds the engines and serves the jobs of its clients, one at a time, until the last one leaves (a
    standalone worker) or has been gone IDLE_EXIT_S (the shared engine)."""

    def __init__(self, shared: bool = False) -> None:
        self.shared = shared
        self.jobs: queue.Queue[Any] = queue.Queue()
        self.clients: dict[int, Client] = {}
        self._clients_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._cancelled: set[tuple[int, Any]] = set()  # (client id, job id)
        self._cancel_lock = threading.Lock()
        self._stopping = threading.Event()
        self.engines: dict[tuple, Any] = {}  # by model_key
        from completer.scheduler import Scheduler

        self.scheduler = Scheduler()
        self._ahead: tuple[Client, dict[str, Any]] | None = None  # the last completion at a line's end
        self._prefills: dict[str, tuple[Client, str, str]] = {}  # engine document -> (client, uri, text)
        self._prefill_turns: dict[int, int] = {}  # client id -> when its last background prefill started
        self._prefill_counter = itertools.count(1)
        self._idle_since = time.monotonic()
        self._quiet_since = time.monotonic()  # the last job taken or completion answered
        self._ahead_tasks: dict[str, Any] = {}  # document -> its search ahead under way (a scheduler Task)
        self._waiting_for_ahead: dict[Any, tuple] = {}  # live Task -> (engine, request) a search ahead foresaw
        self._step_delay = float(os.environ.get(STEP_DELAY_ENV) or 0) / 1000.0

    # -- clients and their reader threads -------------------------------------------------------
    def add_client(self, stream: BinaryIO, out: BinaryIO | None = None, sendall: Any = None,
                   hang_up: Any = None) -> Client:
        """A client reading from `stream`; its replies go to `out` (pipes) or through `sendall` (a socket)."""
        client = Client(next(self._ids), out, sendall=sendall, hang_up=hang_up)
        with self._clients_lock:
            self.clients[client.id] = client
        threading.Thread(target=self.read_loop, args=(client, stream), name=f"worker-reader-{client.id}",
                         daemon=True).start()
        return client

    def read_loop(self, client: Client, stream: BinaryIO) -> None:
        """Drain a client's channel: cancels are recorded at once, everything else is queued in order."""
        try:
            while True:
                message = framing.read_frame(stream)
                if message is None:
                    break
                if not isinstance(message, dict):
                    log.warning("ignoring non-map frame %r", type(message).__name__)
                    continue
                job_id = message.get("id")
                if message.get("op") == "cancel":
                    if isinstance(job_id, int) and not isinstance(job_id, bool) and job_id <= client.last_job:
                        with self._cancel_lock:  # a cancel of no job sent so far is ignored: the set stays small
                            self._cancelled.add((client.id, job_id))
                    continue
                if isinstance(job_id, int) and not isinstance(job_id, bool):
                    client.last_job = max(client.last_job, job_id)
                self.jobs.put((client, message))
                if message.get("op") == "complete":  # after the put: the loop clears the request before taking jobs
                    # a background prefill's chunk under way stops for it, unless it is that document's own
                    self.scheduler.preemption.preempt(client.document(str(message.get("uri"))))
        except Exception as exc:  # a broken channel means the server is gone or confused: drop it
            log.warning("client %d's channel failed, dropping it: %s", client.id, exc)
        finally:
            client.gone = True
            self.jobs.put((client, _GONE))

    def _drop_client(self, client: Client) -> None:
        """A client left: forget its documents, and the engines no other client uses."""
        with self._clients_lock:
            self.clients.pop(client.id, None)
            remaining = list(self.clients.values())
        if self._ahead is not None and self._ahead[0] is client:
            self._ahead = None
        for task in self.scheduler.active():
            if task.document.startswith(client.document("")):
                self.scheduler.cancel(task)
        for document in [d for d, (owner, _, _) in self._prefills.items() if owner is client]:
            del self._prefills[document]
        self._prefill_turns.pop(client.id, None)
        self._close_documents(client, self.engines.get(client.model_key) if client.model_key else None)
        for key in [k for k in self.engines if all(c.model_key != k for c in remaining)]:
            del self.engines[key]
        with self._cancel_lock:
            self._cancelled = {c for c in self._cancelled if c[0] != client.id}
        if not remaining:
            self._idle_since = time.monotonic()
            if not self.shared:  # a standalone worker's server is gone
                self._stopping.set()
        log.info("client %d left; %d remain", client.id, len(remaining))

    @staticmethod
    def _close_documents(client: Client, engine: Any) -> None:
        """Forget the client's documents in `engine` (their text, caches and searches run ahead)."""
        if engine is None:
            return
        prefix = client.document("")
        for document in {d for d in [*engine.documents, *engine.cache.uris()] if d.startswith(prefix)}:
            engine.close(document)

    def is_cancelled(self, client: Client, job_id: Any) -> bool:
        if self._step_delay:
            time.sleep(self._step_delay)
        return self._stopping.is_set() or client.gone or (client.id, job_id) in self._cancelled

    # -- main loop ------------------------------------------------------------------------------
    def serve(self) -> None:
        """Take the jobs that have arrived, start idle work when the user has paused, run one iteration of the
        scheduler; block only while nothing is active."""
        while not self._stopping.is_set():
            self.scheduler.preemption.clear()  # the completions that stopped a prefill's chunk are taken next
            try:
                client, message = self.jobs.get(timeout=self._wait_time())
            except queue.Empty:
                if self.shared and not self.clients and time.monotonic() >= self._idle_since + IDLE_EXIT_S:
                    log.info("no client for %.0f s: the shared engine exits", IDLE_EXIT_S)
                    return
            else:
                self._take(client, message)
                while True:  # every job that has arrived joins this iteration
                    try:
                        client, message = self.jobs.get_nowait()
                    except queue.Empty:
                        break
                    self._take(client, message)
            self._start_idle_work()
            if self.scheduler.busy:
                self.scheduler.iterate()
                self._release_foreseen()

    def _wait_time(self) -> float | None:
        """How long the loop may block for a job: not at all while tasks are active, until the quiet time for
        idle work has passed while some is pending, and until the shared engine's exit without clients."""
        if self.scheduler.busy:
            return 0
        timeout = None
        if self._ahead or self._prefills:
            timeout = max(0.0, self._quiet_since + SEARCH_AHEAD_AFTER_S - time.monotonic())
        if self.shared and not self.clients:
            until_exit = max(0.0, self._idle_since + IDLE_EXIT_S - time.monotonic())
            timeout = until_exit if timeout is None else min(timeout, until_exit)
        return timeout

    def _take(self, client: Client, message: Any) -> None:
        """One job from a client: a completion becomes a scheduler task (answered when it finishes); every
        other job is answered now."""
        if message is _GONE:
            self._drop_client(client)
            return
        if client.id not in self.clients or client.gone:
            return  # queued before its client left or was cut off
        if message.get("op") != "prefill":  # a note to the worker, not a change of what the user is doing
            self._ahead = None
            self._quiet_since = time.monotonic()
        job_id = message.get("id")
        try:
            if message.get("op") == "complete":
                self._submit_completion(client, message)
                return
            reply = {"id": job_id, "ok": self.handle(client, message)}
        except Exception as exc:  # every job gets an answer, whatever went wrong
            reply = self._error_reply(job_id, message.get("op"), exc)
        self._forget_cancels(client, job_id)
        self.send(client, reply)

    @staticmethod
    def _error_reply(job_id: Any, op: Any, exc: BaseException) -> dict[str, Any]:
        reply = {"id": job_id, "err": _error(exc)}
        if reply["err"]["kind"] == "internal":
            log.error("job %s (%s) failed", job_id, op, exc_info=exc)
        return reply

    def _forget_cancels(self, client: Client, job_id: Any) -> None:
        """A job ended: its cancel, and those of the client's older jobs no longer active, no longer matter."""
        if not isinstance(job_id, int):
            return  # never recorded (read_loop)
        with self._cancel_lock:
            self._cancelled = {(c, i) for c, i in self._cancelled if c != client.id or not isinstance(i, int)
                               or i > job_id or i in client.completions}

    def _submit_completion(self, client: Client, message: dict[str, Any]) -> None:
        """A completion as a live task of the scheduler. A search ahead in the same document that foresaw it is
        let finish (the task waits for it, then answers from it); one that did not is stopped."""
        from completer.repository import RepositoryContext
        from completer.scheduler import Priority, Task
        from completer.types import Cancelled

        engine = self._require_engine(client)
        job_id = message.get("id")
        if (client.id, job_id) in self._cancelled:
            raise Cancelled("cancelled before it started")
        uri = str(message["uri"])
        document = client.document(uri)
        request = {"uri": uri, "before": str(message["before"]), "below": str(message.get("below") or ""),
                   "others": [text for text in message.get("others") or () if isinstance(text, str)],
                   "snippets": [text for text in message.get("snippets") or () if isinstance(text, str)]}
        request["repository"] = RepositoryContext.from_message(message.get("repository"), request["snippets"])
        after = str(message["after"])
        language = message.get("language")
        engine.set_language(document, language if isinstance(language, str) else None)
        epoch = client.context_epoch
        self._prefills.pop(document, None)  # typed in: its own requests keep its cache from now on
        foreseen = False
        for task in self.scheduler.active(document=document):
            if task.priority == Priority.PREFETCH:
                self.scheduler.cancel(task)  # the chunks it ran stay in the cache
            elif task is self._ahead_tasks.get(document):
                foreseen = engine.foresees(document, request["before"], after, request["below"], request["others"])
                if foreseen:
                    self.scheduler.promote(task, Priority.LIVE)
                else:
                    self.scheduler.cancel(task)

        def steps():  # the client's settings apply when the task starts, not when it was queued
            engine = self._require_engine(client)
            return (yield from engine.complete_steps(document, request["before"], after, request["below"],
                                                     request["others"], request["snippets"], request["repository"]))

        def done(task: Task) -> None:
            client.completions.discard(job_id)
            self._waiting_for_ahead.pop(task, None)
            if task.error is not None:
                reply = self._error_reply(job_id, "complete", task.error)
            else:
                result = task.result
                reply = {"id": job_id, "ok": {"result": result.to_dict(), "model_runs_total": int(engine.model_runs)}}
                if client.settings.search_ahead and not after.strip() and not result.skipped \
                        and epoch == client.context_epoch:  # its snippets are still ones the client reads
                    self._ahead = (client, request)  # searched once the worker has been idle a moment
            self._quiet_since = time.monotonic()
            self._forget_cancels(client, job_id)
            self.send(client, reply)

        client.completions.add(job_id)
        task = Task(steps(), Priority.LIVE, document, engine.runtime,
                    is_cancelled=lambda: self.is_cancelled(client, job_id), on_done=done, owner=client.id)
        if foreseen:
            self._waiting_for_ahead[task] = (engine, (request["before"], after, request["below"], request["others"]))
        self.scheduler.submit(task)

    def _release_foreseen(self) -> None:
        """A live completion waiting for the search ahead of its document: once that search has found its answer,
        the rest of it (other indentations) is stopped, so the answer goes out now."""
        for task, (engine, request) in list(self._waiting_for_ahead.items()):
            ahead = self._ahead_tasks.get(task.document)
            if task.started or ahead is None or ahead.done:
                del self._waiting_for_ahead[task]
            elif engine.answers_from_ahead(task.document, *request):
                self.scheduler.cancel(ahead)

    def _start_idle_work(self) -> None:
        """Once the user has paused SEARCH_AHEAD_AFTER_S with no live completion: the search ahead for the last
        completion at a line's end, else the background prefill of the oldest document opened."""
        from completer.scheduler import Priority

        if self.scheduler.active(priority=Priority.LIVE) or time.monotonic() < self._quiet_since + SEARCH_AHEAD_AFTER_S:
            return
        if self._ahead is not None:
            (client, request), self._ahead = self._ahead, None
            if self._engine_of(client) is not None:
                self._search_ahead(client, request)
                return
        if self._prefills and not self.scheduler.active(priority=Priority.PREFETCH):
            self._prefill_next()

    def _search_ahead(self, client: Client, request: dict[str, Any]) -> None:
        """The searches of the line after Enter for the client's last completion, as a task of the scheduler."""
        from completer.scheduler import Priority, Task

        engine = self._engine_of(client)
        document = client.document(request["uri"])

        def ahead_steps():
            engine = self._engine_of(client)
            return (yield from engine.search_next_line_steps(document, request["before"], request["below"],
                                                             request["others"], request["snippets"],
                                                             request["repository"]))

        def ahead_done(task: Task) -> None:
            if self._ahead_tasks.get(document) is task:
                del self._ahead_tasks[document]
            _log_failure(task)

        task = self._ahead_tasks[document] = Task(ahead_steps(), Priority.AHEAD, document, engine.runtime,
                                                  is_cancelled=lambda: self.is_cancelled(client, None),
                                                  on_done=ahead_done, owner=client.id)
        self.scheduler.submit(task)

    def _prefill_next(self) -> None:
        """The background prefill of the oldest document opened, as a task of the scheduler. Clients of a shared
        engine take turns: a window that opens thirty files at once (a session restored) would otherwise hold
        the file another window just opened behind all thirty prefills."""
        from completer.scheduler import Priority, Task

        document = min(self._prefills, key=lambda d: self._prefill_turns.get(self._prefills[d][0].id, 0))
        client, uri, text = self._prefills.pop(document)
        self._prefill_turns[client.id] = next(self._prefill_counter)
        engine = self._engine_of(client)
        if engine is None:  # no model (a failed load): nothing to prefill with
            return

        def prefill_steps():
            engine = self._engine_of(client)
            return (yield from engine.prefill_steps(document, text))

        self.scheduler.submit(Task(prefill_steps(), Priority.PREFETCH, document, engine.runtime,
                                   is_cancelled=lambda: self.is_cancelled(client, None), on_done=_log_failure,
                                   owner=client.id))

    def send(self, client: Client, reply: dict[str, Any]) -> None:
        """Write a reply. A shared engine's client that stops reading is cut off once a write has waited
        SEND_TIMEOUT_S (the socket's send timeout), so one window can never stall the others."""
        if client.gone:
            return
        data = framing.encode(reply)
        try:
            with client.write_lock:
                if client.sendall is not None:
                    client.sendall(data)
                else:
                    assert client.out is not None
                    client.out.write(data)
                    client.out.flush()
        except OSError as exc:  # the client went away mid-reply, or does not read
            if not self.shared:
                raise
            client.gone = True
            log.warning("client %d does not take its replies (%s): cutting it off", client.id, exc)
            if client.hang_up is not None:
                client.hang_up()

    def _engine_of(self, client: Client) -> Any:
        """The client's engine, set to the client's settings (other clients of the same model may differ), but
        with the largest memory budget of the clients that share it: the caches are the engine's, and one
        window's small budget must not evict the others' documents (answers never depend on the budget)."""
        engine = self.engines.get(client.model_key) if client.model_key else None
        if engine is None or client.settings is None:
            return engine
        with self._clients_lock:
            budgets = [c.settings.memory_budget_mb for c in self.clients.values()
                       if c.model_key == client.model_key and c.settings is not None]
        settings = replace(client.settings, memory_budget_mb=max(budgets, default=client.settings.memory_budget_mb))
        if engine.settings != settings:
            engine.configure(settings)
        return engine

    def handle(self, client: Client, message: dict[str, Any]) -> Any:
        op = message.get("op")
        if op == "close":
            document = client.document(str(message["uri"]))
            self._prefills.pop(document, None)
            for task in self.scheduler.active(document=document):
                self.scheduler.cancel(task)
            engine = self.engines.get(client.model_key) if client.model_key else None
            if engine is not None:
                engine.close(document)
            return None
        if op == "prefill":
            uri = str(message["uri"])
            document = client.document(uri)
            self._prefills.pop(document, None)
            self._prefills[document] = (client, uri, str(message["text"]))  # after those opened before it
            return None
        if op in ("init", "configure"):
            return self._configure(client, message.get("settings") or {})
        if op == "info":
            return self._info(client)
        if op == "forget_ahead":
            self._forget_searches_ahead(client)
            return None
        if op in ("ping", "hello"):
            return {"pid": os.getpid(), "version": __version__, "source": SOURCE_FINGERPRINT,
                    "clients": len(self.clients)}
        raise ValueError(f"unknown op {op!r}")

    def _forget_searches_ahead(self, client: Client) -> None:
        """Stop the client's searches run ahead and drop their answers (the one not started yet was dropped as
        this job arrived, `_take`), so that its next requests are searched with the context they bring."""
        client.context_epoch += 1
        prefix = client.document("")
        for document, task in list(self._ahead_tasks.items()):
            if document.startswith(prefix):
                self.scheduler.cancel(task)
        engine = self.engines.get(client.model_key) if client.model_key else None
        if engine is not None:
            engine.forget_searches_ahead(prefix)

    def _require_engine(self, client: Client) -> Any:
        engine = self._engine_of(client)
        if engine is None:
            raise RuntimeError("no model is loaded")
        return engine

    def _configure(self, client: Client, raw: dict[str, Any]) -> dict[str, Any]:
        """The client's settings: its model's engine, loaded unless another client loaded it already. On any
        error the client keeps its engine and settings."""
        from completer.engine import Engine
        from completer.types import EngineSettings

        if not isinstance(raw, dict):
            raise ValueError(f"settings must be a map, not {type(raw).__name__}")
        known = set(EngineSettings.field_names())
        settings = EngineSettings(**{k: v for k, v in raw.items() if k in known})
        settings.validate()
        started = time.perf_counter()
        key = model_key(settings)
        engine = self.engines.get(key)
        if engine is None:
            engine = Engine(settings)
            self.engines[key] = engine
        else:  # with the largest budget of the windows on this model (_engine_of): a small one evicts nobody
            with self._clients_lock:
                budgets = [c.settings.memory_budget_mb for c in self.clients.values()
                           if c is not client and c.model_key == key and c.settings is not None]
            engine.configure(replace(settings, memory_budget_mb=max([settings.memory_budget_mb, *budgets])))
        old_key, client.model_key, client.settings = client.model_key, key, settings
        if old_key is not None and old_key != key:  # the old model's engine goes unless another client uses it
            for task in self.scheduler.active():
                if task.document.startswith(client.document("")):
                    self.scheduler.cancel(task)
            self._close_documents(client, self.engines.get(old_key))
            with self._clients_lock:
                others = [c for c in self.clients.values() if c is not client]
            if all(c.model_key != old_key for c in others):
                self.engines.pop(old_key, None)
        log.info("engine ready in %.0f ms for client %d: %s", (time.perf_counter() - started) * 1000, client.id,
                 settings)
        return self._info(client)

    def _info(self, client: Client) -> dict[str, Any]:
        engine = self._require_engine(client)
        info = dict(engine.info())
        info["engine"] = {"shared": self.shared, "clients": len(self.clients), "models": len(self.engines)}
        return {"info": info, "model_runs_total": int(engine.model_runs), "pid": os.getpid()}


def _log_failure(task: Any) -> None:
    """Work nobody asked for (a search ahead, a prefill) must never cost the worker: a failure is one log line."""
    from completer.types import Cancelled

    if task.error is not None and not isinstance(task.error, Cancelled):
        log.error("background work on %s failed", task.document, exc_info=task.error)


def _error(exc: BaseException) -> dict[str, str]:
    """Name the failure so the server can tell a cancel from a bad setting from a bug."""
    from completer.types import Cancelled, ModelError

    if isinstance(exc, Cancelled):
        kind = "cancelled"
    elif isinstance(exc, ModelError):
        kind = "model"
    elif isinstance(exc, ValueError):
        kind = "value"
    elif isinstance(exc, RuntimeError) and str(exc) == "no model is loaded":
        kind = "nomodel"
    else:
        kind = "internal"
    return {"kind": kind, "message": str(exc) or type(exc).__name__}


def _accept_loop(worker: Worker, listener: Any) -> None:
    """The shared engine: every connection to its socket is a client."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:  # the listener was closed: the engine is exiting
            return
        # Only sends time out (a client that stops reading); reads wait as long as the client stays.
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(SEND_TIMEOUT_S), 0))
        worker.add_client(connection.makefile("rb", buffering=0), sendall=connection.sendall,
                          hang_up=lambda connection=connection: _hang_up(connection))


def _hang_up(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lsp.worker", description=__doc__.split("\n")[0])
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-file", default=None)
    parser.add_argument("--listen", default=None, help="serve as the user's shared engine on this Unix socket")
    parser.add_argument("--source", default=None,
                        help="the fingerprint of the server's code (lsp/engine_socket.py): refuse to run other code")
    args = parser.parse_args(argv)
    if args.source is not None and args.source != SOURCE_FINGERPRINT:
        print(f"completer worker: the code on disk (source {SOURCE_FINGERPRINT}) is not the server's "
              f"({args.source}): it changed since the server started; exiting", file=sys.stderr, flush=True)
        return CODE_CHANGED_EXIT

    # Our stdout is the reply channel. Keep a private copy of it and point fd 1 at stderr, so a
    # stray print() or a native library's message cannot corrupt the frames.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)

    from lsp.logs import setup_worker_logging

    setup_worker_logging(args.log_level, args.log_file)
    listener = None
    if args.listen:
        from lsp.engine_socket import listen

        worker = Worker(shared=True)
        listener, inode = listen(args.listen)  # refuses a directory that is not the user's own
        threading.Thread(target=_accept_loop, args=(worker, listener), name="engine-accept", daemon=True).start()
        log.info("shared engine %d listening on %s", os.getpid(), args.listen)
    else:
        worker = Worker()
        worker.add_client(stdin, out)
        log.info("worker %d started", os.getpid())
    try:
        worker.serve()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # the server went away mid-reply
        pass
    finally:
        if listener is not None:
            from lsp.engine_socket import unlisten

            unlisten(listener, args.listen, inode)
    log.info("worker %d exiting", os.getpid())
    return 0


if __name__ == "__main__":
    sys.exit(main())
