"""The inference worker: a child process that owns the Engine and answers msgpack frames.

Running the model here, not in the server, keeps the server's event loop free (it keeps answering
`shutdown`, `$/cancelRequest` and other documents while a beam search runs) and lets the server
survive a crash in native code by simply starting a new worker.

Protocol (one msgpack map per frame, see `lsp.framing`):
  server -> worker  {"id": n, "op": "hello", "version": str}  (the shared engine answers its version and pid)
                    {"id": n, "op": "init"|"configure", "settings": {EngineSettings fields}}
                    {"id": n, "op": "complete", "uri": str, "before": str, "after": str, "below": str,
                     "others": [str], "snippets": [str]}  (the heads of other open files, most recently edited
                     first; windows of the repository's files like the code at the cursor)
                    {"id": n, "op": "close", "uri": str}
                    {"id": n, "op": "prefill", "uri": str, "text": str}  (answered at once; run when idle)
                    {"id": n, "op": "info"}
                    {"op": "cancel", "id": n}        (no reply; the search for job n stops at its next beam step)
  worker -> server  {"id": n, "ok": value} or {"id": n, "err": {"kind": str, "message": str}}

Jobs run one at a time in arrival order. A reader thread drains each client's channel continuously so a
cancel arrives while a search is running; the search polls for it between beam steps.

A worker serves one server over its stdin and stdout (`--standalone`, and where there are no Unix sockets),
or, as the user's shared engine (`--listen SOCKET`, lsp/engine_socket.py), every server that connects to
its socket: one Engine per model, whichever window asked for it, documents kept apart per client, and
each client's settings applied to its own jobs. The shared engine exits IDLE_EXIT_S after its last client
leaves.

When a completion at the end of a line of code has been answered and no job comes for SEARCH_AHEAD_AFTER_S,
the worker searches the line after Enter ahead of time (Engine.search_next_line, at the likeliest
indentations), so that keystroke, whose search is the longest, is answered at once. Any job that arrives
stops that search at its next beam step.

A document just opened is prefilled the same way, after any search-ahead: the model runs over its context
in chunks (Engine.prefill) while no job waits, so the first keystroke in it costs only its own line, and a
job that arrives waits for one chunk at most. The first completion in the document ends its prefill: from then
on its own requests keep its cache, and the text it was opened with is stale.
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

    def document(self, uri: str) -> str:
        """The engine's key for the client's document: clients never share a document's cache."""
        return f"{self.id}:{uri}"


def model_key(settings: Any) -> tuple:
    """What loads a model: clients that agree on it share one Engine."""
    return (settings.model_path, settings.device, settings.threads)


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
        self._ahead: tuple[Client, dict[str, Any]] | None = None  # the last completion at a line's end
        self._prefills: dict[str, tuple[Client, str, str]] = {}  # engine document -> (client, uri, text)
        self._idle_since = time.monotonic()
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
                if message.get("op") == "cancel":
                    with self._cancel_lock:
                        self._cancelled.add((client.id, message.get("id")))
                    continue
                self.jobs.put((client, message))
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
        for document in [d for d, (owner, _, _) in self._prefills.items() if owner is client]:
            del self._prefills[document]
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

    def _waiting(self) -> bool:
        """A job waits (or the worker is stopping): idle work yields to it."""
        return not self.jobs.empty() or self._stopping.is_set()

    # -- main loop ------------------------------------------------------------------------------
    def serve(self) -> None:
        while not self._stopping.is_set():
            idle_work = self._ahead or self._prefills
            timeout = SEARCH_AHEAD_AFTER_S if idle_work else None
            if self.shared and not self.clients:
                timeout = max(0.0, self._idle_since + IDLE_EXIT_S - time.monotonic())
            try:
                client, message = self.jobs.get(timeout=timeout)
            except queue.Empty:
                if self.shared and not self.clients and time.monotonic() >= self._idle_since + IDLE_EXIT_S:
                    log.info("no client for %.0f s: the shared engine exits", IDLE_EXIT_S)
                    return
                if self._ahead:
                    self._search_ahead()
                else:
                    self._prefill_next()
                continue
            if message is _GONE:
                self._drop_client(client)
                continue
            if client.id not in self.clients or client.gone:
                continue  # queued before its client left or was cut off
            if message.get("op") != "prefill":  # a note to the worker, not a change of what the user is doing
                self._ahead = None
            job_id = message.get("id")
            try:
                reply = {"id": job_id, "ok": self.handle(client, message)}
            except Exception as exc:  # every job gets an answer, whatever went wrong
                reply = {"id": job_id, "err": _error(exc)}
                if reply["err"]["kind"] == "internal":
                    log.exception("job %s (%s) failed", job_id, message.get("op"))
            finally:
                with self._cancel_lock:  # a client's jobs run in id order: its older cancels no longer matter
                    if isinstance(job_id, int):
                        self._cancelled = {(c, i) for c, i in self._cancelled
                                           if c != client.id or (isinstance(i, int) and i > job_id)}
            self.send(client, reply)

    def _search_ahead(self) -> None:
        """Search the line after Enter for the last completion at a line's end, until a job arrives."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return
        client, request = ahead
        engine = self._engine_of(client)
        if engine is None:
            return
        from completer.types import Cancelled

        try:
            engine.search_next_line(client.document(request["uri"]), request["before"], request["below"],
                                    request["others"], is_cancelled=self._waiting, snippets=request["snippets"])
        except Cancelled:
            pass
        except Exception:  # a search nobody asked for must never cost the worker
            log.exception("searching the next line of %s failed", request["uri"])

    def _prefill_next(self) -> None:
        """Prefill the oldest document opened, until a job arrives (it is then put back, to go on later)."""
        if not self._prefills:
            return
        document = next(iter(self._prefills))
        client, uri, text = self._prefills.pop(document)
        engine = self._engine_of(client)
        if engine is None:  # no model (a failed load): nothing to prefill with
            return
        from completer.types import Cancelled

        try:
            engine.prefill(document, text, is_cancelled=self._waiting)
        except Cancelled:
            self._prefills.setdefault(document, (client, uri, text))
        except Exception:  # a prefill nobody waits for must never cost the worker
            log.exception("prefilling %s failed", uri)

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
        job_id = message.get("id")
        if op == "complete":
            engine = self._require_engine(client)
            if (client.id, job_id) in self._cancelled:
                from completer.types import Cancelled

                raise Cancelled("cancelled before it started")
            uri = str(message["uri"])
            document = client.document(uri)
            self._prefills.pop(document, None)  # typed in: its own requests keep its cache from now on
            request = {"uri": uri, "before": str(message["before"]), "below": str(message.get("below") or ""),
                       "others": [text for text in message.get("others") or () if isinstance(text, str)],
                       "snippets": [text for text in message.get("snippets") or () if isinstance(text, str)]}
            after = str(message["after"])
            result = engine.complete_text(document, request["before"], after,
                                          is_cancelled=lambda: self.is_cancelled(client, job_id),
                                          below=request["below"], others=request["others"],
                                          snippets=request["snippets"])
            if engine.settings.search_ahead and not after.strip() and not result.skipped:
                self._ahead = (client, request)  # searched once the worker has been idle a moment
            return {"result": result.to_dict(), "model_runs_total": int(engine.model_runs)}
        if op == "close":
            document = client.document(str(message["uri"]))
            self._prefills.pop(document, None)
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
        if op in ("ping", "hello"):
            return {"pid": os.getpid(), "version": __version__, "clients": len(self.clients)}
        raise ValueError(f"unknown op {op!r}")

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
        else:
            engine.configure(settings)
        old_key, client.model_key, client.settings = client.model_key, key, settings
        if old_key is not None and old_key != key:  # the old model's engine goes unless another client uses it
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
    args = parser.parse_args(argv)

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
