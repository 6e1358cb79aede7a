"""The inference worker: a child process that owns the Engine and answers msgpack frames.

Running the model here, not in the server, keeps the server's event loop free (it keeps answering
`shutdown`, `$/cancelRequest` and other documents while a beam search runs) and lets the server
survive a crash in native code by simply starting a new worker.

Protocol (one msgpack map per frame, see `lsp.framing`):
  server -> worker  {"id": n, "op": "init"|"configure", "settings": {EngineSettings fields}}
                    {"id": n, "op": "complete", "uri": str, "before": str, "after": str, "below": str,
                     "others": [str], "snippets": [str]}  (the heads of other open files, most recently edited
                     first; windows of the repository's files like the code at the cursor)
                    {"id": n, "op": "close", "uri": str}
                    {"id": n, "op": "prefill", "uri": str, "text": str}  (answered at once; run when idle)
                    {"id": n, "op": "info"}
                    {"op": "cancel", "id": n}        (no reply; the search for job n stops at its next beam step)
  worker -> server  {"id": n, "ok": value} or {"id": n, "err": {"kind": str, "message": str}}

Jobs run one at a time in arrival order. A reader thread drains stdin continuously so a cancel
arrives while a search is running; the search polls for it between beam steps.

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
import logging
import os
import queue
import sys
import threading
import time
from typing import Any, BinaryIO

from lsp import framing

log = logging.getLogger("lsp.worker")

SEARCH_AHEAD_AFTER_S = 0.15  # quiet time after an answer at a line's end before the next line is searched
STEP_DELAY_ENV = "COMPLETER_WORKER_STEP_DELAY_MS"
"""Debug/test hook: sleep this many ms at every cancellation poll, to make searches slow on purpose."""

_EOF = object()


class Worker:
    """Holds the engine and serves jobs from `jobs` until the server closes our stdin."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._write_lock = threading.Lock()
        self.jobs: queue.Queue[Any] = queue.Queue()
        self._cancelled: set[int] = set()
        self._cancel_lock = threading.Lock()
        self._eof = threading.Event()
        self.engine: Any = None
        self._ahead: dict[str, Any] | None = None  # the last completion at a line's end, not yet searched past
        self._prefills: dict[str, str] = {}  # documents opened and not yet prefilled: uri -> text, oldest first
        self._step_delay = float(os.environ.get(STEP_DELAY_ENV) or 0) / 1000.0

    # -- reader thread -------------------------------------------------------------------------
    def read_loop(self, stream: BinaryIO) -> None:
        """Drain stdin: cancels are recorded at once, everything else is queued in order."""
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
                        self._cancelled.add(message.get("id"))
                    continue
                self.jobs.put(message)
        except Exception:  # a broken channel means the server is gone or confused: stop
            log.exception("worker input channel failed")
        finally:
            self._eof.set()
            self.jobs.put(_EOF)

    def is_cancelled(self, job_id: int) -> bool:
        if self._step_delay:
            time.sleep(self._step_delay)
        return self._eof.is_set() or job_id in self._cancelled

    # -- main loop ------------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            try:
                idle_work = self._ahead or self._prefills
                message = self.jobs.get(timeout=SEARCH_AHEAD_AFTER_S if idle_work else None)
            except queue.Empty:
                if self._ahead:
                    self._search_ahead()
                else:
                    self._prefill_next()
                continue
            if message is _EOF:
                return
            if message.get("op") != "prefill":  # a note to the worker, not a change of what the user is doing
                self._ahead = None
            job_id = message.get("id")
            try:
                reply = {"id": job_id, "ok": self.handle(message)}
            except Exception as exc:  # every job gets an answer, whatever went wrong
                reply = {"id": job_id, "err": _error(exc)}
                if reply["err"]["kind"] == "internal":
                    log.exception("job %s (%s) failed", job_id, message.get("op"))
            finally:
                with self._cancel_lock:  # jobs run in id order: older cancels can no longer matter
                    if isinstance(job_id, int):
                        self._cancelled = {i for i in self._cancelled if isinstance(i, int) and i > job_id}
            self.send(reply)

    def _search_ahead(self) -> None:
        """Search the line after Enter for the last completion at a line's end, until a job arrives."""
        ahead, self._ahead = self._ahead, None
        if ahead is None or self.engine is None:
            return
        from completer.types import Cancelled

        try:
            self.engine.search_next_line(ahead["uri"], ahead["before"], ahead["below"], ahead["others"],
                                         is_cancelled=lambda: not self.jobs.empty() or self._eof.is_set(),
                                         snippets=ahead["snippets"])
        except Cancelled:
            pass
        except Exception:  # a search nobody asked for must never cost the worker
            log.exception("searching the next line of %s failed", ahead["uri"])

    def _prefill_next(self) -> None:
        """Prefill the oldest document opened, until a job arrives (it is then put back, to go on later)."""
        if self.engine is None:  # no model (a failed load): nothing to prefill with, and no reason to wake for it
            self._prefills.clear()
            return
        if not self._prefills:
            return
        uri = next(iter(self._prefills))
        text = self._prefills.pop(uri)
        from completer.types import Cancelled

        try:
            self.engine.prefill(uri, text, is_cancelled=lambda: not self.jobs.empty() or self._eof.is_set())
        except Cancelled:
            self._prefills.setdefault(uri, text)
        except Exception:  # a prefill nobody waits for must never cost the worker
            log.exception("prefilling %s failed", uri)

    def send(self, reply: dict[str, Any]) -> None:
        data = framing.encode(reply)
        with self._write_lock:
            self._out.write(data)
            self._out.flush()

    def handle(self, message: dict[str, Any]) -> Any:
        op = message.get("op")
        job_id = message.get("id")
        if op == "complete":
            engine = self._require_engine()
            if job_id in self._cancelled:
                from completer.types import Cancelled

                raise Cancelled("cancelled before it started")
            self._prefills.pop(str(message["uri"]), None)  # typed in: its own requests keep its cache from now on
            request = {"uri": str(message["uri"]), "before": str(message["before"]),
                       "below": str(message.get("below") or ""),
                       "others": [text for text in message.get("others") or () if isinstance(text, str)],
                       "snippets": [text for text in message.get("snippets") or () if isinstance(text, str)]}
            after = str(message["after"])
            result = engine.complete_text(request["uri"], request["before"], after,
                                          is_cancelled=lambda: self.is_cancelled(job_id), below=request["below"],
                                          others=request["others"], snippets=request["snippets"])
            if engine.settings.search_ahead and not after.strip() and not result.skipped:
                self._ahead = request  # searched once the worker has been idle a moment
            return {"result": result.to_dict(), "model_runs_total": int(engine.model_runs)}
        if op == "close":
            self._prefills.pop(str(message["uri"]), None)
            if self.engine is not None:
                self.engine.close(str(message["uri"]))
            return None
        if op == "prefill":
            uri = str(message["uri"])
            self._prefills.pop(uri, None)
            self._prefills[uri] = str(message["text"])  # the newest text, run after those opened before it
            return None
        if op in ("init", "configure"):
            return self._configure(message.get("settings") or {}, fresh=(op == "init"))
        if op == "info":
            return self._info()
        if op == "ping":
            return {"pid": os.getpid()}
        raise ValueError(f"unknown op {op!r}")

    def _require_engine(self) -> Any:
        if self.engine is None:
            raise RuntimeError("no model is loaded")
        return self.engine

    def _configure(self, raw: dict[str, Any], fresh: bool) -> dict[str, Any]:
        from completer.engine import Engine
        from completer.types import EngineSettings

        known = set(EngineSettings.field_names())
        settings = EngineSettings(**{k: v for k, v in raw.items() if k in known})
        settings.validate()
        started = time.perf_counter()
        if fresh or self.engine is None:
            self.engine = Engine(settings)
        else:
            self.engine.configure(settings)
        log.info("engine ready in %.0f ms: %s", (time.perf_counter() - started) * 1000, settings)
        return self._info()

    def _info(self) -> dict[str, Any]:
        engine = self._require_engine()
        return {"info": dict(engine.info()), "model_runs_total": int(engine.model_runs), "pid": os.getpid()}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lsp.worker", description=__doc__.split("\n")[0])
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-file", default=None)
    args = parser.parse_args(argv)

    # Our stdout is the reply channel. Keep a private copy of it and point fd 1 at stderr, so a
    # stray print() or a native library's message cannot corrupt the frames.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)

    from lsp.logs import setup_worker_logging

    setup_worker_logging(args.log_level, args.log_file)
    worker = Worker(out)
    reader = threading.Thread(target=worker.read_loop, args=(stdin,), name="worker-reader", daemon=True)
    reader.start()
    log.info("worker %d started", os.getpid())
    try:
        worker.serve()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # the server went away mid-reply
        pass
    log.info("worker %d exiting", os.getpid())
    return 0


if __name__ == "__main__":
    sys.exit(main())
