"""The server's side of the worker: spawn it, talk msgpack frames to it, restart it when it dies.

Everything here runs on the server's asyncio loop and never blocks it: requests are futures
resolved by a reader task, and a dead worker is replaced at once (with back-off only when it
keeps dying), so the next request is served by a fresh process within a couple of seconds.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

from lsp import framing

log = logging.getLogger(__name__)

RESTART_DELAYS = (0.0, 0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Delay before the n-th restart within CRASH_WINDOW seconds: immediate at first, then backing off."""
CRASH_WINDOW = 60.0
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
WORKER_BOOT = "import sys; sys.path[0] = {root!r}; from lsp.worker import main; sys.exit(main(sys.argv[1:]))"
"""The worker's entry. `python -m lsp.worker` would put the working directory (the user's project)
first on the import path, and a project with its own `lsp/` or `completer/` would run instead."""
INIT_TIMEOUT = 120.0
"""Loading a model takes well under a second on the CPU; a worker silent this long is hung (a driver,
a disk) and is killed, so it cannot hold the settings lock forever. Its replacement backs off."""


class WorkerError(Exception):
    """A job failed in the worker; `kind` is cancelled, model, value, nomodel, internal or died."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class WorkerDied(WorkerError):
    def __init__(self, message: str = "the inference worker exited") -> None:
        super().__init__("died", message)


MMAP_THRESHOLD_BYTES = 64 * 1024
"""glibc's malloc serves allocations above this from mmap and returns them to the system when freed. By
default it raises the threshold to the largest block freed so far, so the KV caches' megabyte arrays, made
and freed on every prefill, end up in the heap and fragment it, and the worker's memory grows with every
keystroke (scripts/soak.py; docs/benchmarks.md, "Memory over a long session")."""


def worker_environment() -> dict[str, str]:
    """The server's environment, plus a fixed mmap threshold for glibc unless the user chose one."""
    env = dict(os.environ)
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(MMAP_THRESHOLD_BYTES))
    return env


class WorkerClient:
    """One live worker process at a time, plus the futures of the jobs it has not answered yet."""

    def __init__(self, engine_settings: Callable[[], dict[str, Any]], log_level: str = "INFO",
                 log_file: str | None = None) -> None:
        self._engine_settings = engine_settings
        self._log_level = log_level
        self._log_file = log_file
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._ready: asyncio.Event | None = None
        self._stopping = False
        self._deaths: collections.deque[float] = collections.deque(maxlen=len(RESTART_DELAYS))
        self._tasks: set[asyncio.Task[Any]] = set()
        self.info: dict[str, Any] = {}
        self.model_error: str | None = None
        self.model_runs_total = 0
        self.restarts = 0
        self.cancelled_in_worker = 0
        self.started_at = 0.0

    # -- lifecycle --------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    def _event(self) -> asyncio.Event:
        if self._ready is None:
            self._ready = asyncio.Event()
        return self._ready

    async def start(self) -> str | None:
        """Spawn a worker and load the model; returns the model error message, if any."""
        ready = self._event()
        ready.clear()
        cmd = [sys.executable, "-c", WORKER_BOOT.format(root=str(PACKAGE_ROOT)), "--log-level", self._log_level]
        if self._log_file:
            cmd += ["--log-file", self._log_file]
        started = time.perf_counter()
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                limit=framing.MAX_FRAME_BYTES, env=worker_environment(),
            )
        except OSError as exc:  # nothing will exit, so nothing would restart it: retry from here
            self.model_error = f"cannot start the inference worker ({sys.executable}): {exc}"
            log.error("%s", self.model_error)
            if not self._stopping:
                self._spawn(self._start_later())
            return self.model_error
        self._proc = proc
        self.started_at = time.monotonic()
        self._spawn(self._read_loop(proc))
        log.info("started inference worker pid %d", proc.pid)
        try:
            reply = await asyncio.wait_for(self._call_on(proc, "init", settings=self._engine_settings()),
                                           INIT_TIMEOUT)
        except asyncio.TimeoutError:
            self.model_error = f"the inference worker did not load the model within {INIT_TIMEOUT:.0f} s"
            log.error("%s; killing pid %d", self.model_error, proc.pid)
            proc.kill()  # its reader sees the exit and starts a replacement, with back-off
            return self.model_error
        except WorkerError as exc:
            self.info = {}
            self.model_error = exc.message
            if exc.kind != "died":
                ready.set()  # the process works; requests get a quick "no model" instead of waiting
            log.error("inference worker has no model: %s", exc.message)
            return exc.message
        self._accept(reply)
        ready.set()
        log.info("worker pid %d ready in %.0f ms", proc.pid, (time.perf_counter() - started) * 1000)
        return None

    async def refresh_info(self, timeout: float) -> None:
        """Fetch engine.info() again (cache sizes change); keeps the cached copy if the worker is busy."""
        try:
            reply = await asyncio.wait_for(self.call("info", timeout=timeout), timeout)
        except (asyncio.TimeoutError, WorkerError):
            return
        if isinstance(reply, dict):
            self.info = dict(reply.get("info") or {})
            self.model_runs_total = int(reply.get("model_runs_total") or 0)

    async def configure(self, settings: dict[str, Any]) -> str | None:
        """Apply engine settings; returns the error message (the worker keeps its old state) or None."""
        try:
            reply = await self.call("configure", settings=settings)
        except WorkerError as exc:
            if exc.kind in ("model", "value") and not self.info:
                self.model_error = exc.message
            return exc.message
        self._accept(reply)
        return None

    def _accept(self, reply: Any) -> None:
        if isinstance(reply, dict):
            self.info = dict(reply.get("info") or {})
            self.model_runs_total = int(reply.get("model_runs_total") or 0)
        self.model_error = None

    async def stop(self, grace: float = 1.0) -> None:
        """Close the worker's stdin (it abandons any search and exits); kill it after `grace` s."""
        self._stopping = True
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            await asyncio.wait_for(proc.wait(), grace)
        except (asyncio.TimeoutError, ProcessLookupError, OSError):
            self.kill()

    def kill(self) -> None:
        """Synchronous last resort (exit paths where the loop may be gone)."""
        self._stopping = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            try:
                os.kill(proc.pid, getattr(signal, "SIGKILL", signal.SIGTERM))  # SIGTERM = TerminateProcess on Windows
            except (ProcessLookupError, OSError):
                pass

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read_loop(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        try:
            while True:
                message = await framing.read_frame_async(proc.stdout)
                if message is None:
                    break
                self._resolve(message)
        except Exception:
            log.exception("worker pid %d sent garbage; killing it", proc.pid)
            try:
                proc.kill()
            except ProcessLookupError:
                pass
        finally:
            await self._on_exit(proc)

    def _resolve(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        err = message.get("err")
        if isinstance(err, dict) and err.get("kind") == "cancelled":
            self.cancelled_in_worker += 1  # the engine really stopped (the request may be long answered)
        future = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
        if future is None or future.done():
            return
        if "err" in message:
            err = message["err"] or {}
            future.set_exception(WorkerError(str(err.get("kind", "internal")), str(err.get("message", ""))))
        else:
            ok = message.get("ok")
            if isinstance(ok, dict) and "model_runs_total" in ok:
                self.model_runs_total = int(ok["model_runs_total"])
            future.set_result(ok)

    async def _on_exit(self, proc: asyncio.subprocess.Process) -> None:
        if proc is not self._proc:
            return
        self._event().clear()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(WorkerDied())
        try:
            code = await asyncio.wait_for(proc.wait(), 5)
        except asyncio.TimeoutError:
            proc.kill()
            code = await proc.wait()
        if self._stopping:
            log.info("worker pid %d exited (%s)", proc.pid, code)
            return
        delay = self._next_restart_delay()
        log.warning("inference worker pid %d died (exit code %s); restarting%s", proc.pid, code,
                    f" in {delay:.1f} s" if delay else "")
        if delay:
            await asyncio.sleep(delay)
        if self._stopping or proc is not self._proc:
            return
        self.restarts += 1
        try:
            await self.start()
        except Exception:
            log.exception("could not restart the inference worker")

    def _next_restart_delay(self) -> float:
        """Count a death; restarts are immediate at first and back off when deaths come quickly."""
        now = time.monotonic()
        self._deaths.append(now)
        recent = sum(1 for t in self._deaths if now - t < CRASH_WINDOW)
        return RESTART_DELAYS[min(recent, len(RESTART_DELAYS)) - 1]

    async def _start_later(self) -> None:
        await asyncio.sleep(max(1.0, self._next_restart_delay()))
        if not self._stopping and self.pid is None:
            self.restarts += 1
            await self.start()

    # -- jobs --------------------------------------------------------------------------------------
    async def wait_ready(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._event().wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    def submit(self, op: str, **fields: Any) -> tuple[int, asyncio.Future[Any]]:
        """Send a job to the current worker; the future resolves with its reply."""
        proc = self._proc
        if proc is None or proc.returncode is not None or proc.stdin is None or proc.stdin.is_closing():
            # Dead before the reader noticed: make waiters wait for the replacement, not retry now.
            self._event().clear()
            raise WorkerDied("the inference worker is not running")
        return self._submit_on(proc, op, fields)

    def _submit_on(self, proc: asyncio.subprocess.Process, op: str,
                   fields: dict[str, Any]) -> tuple[int, asyncio.Future[Any]]:
        job_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[job_id] = future
        assert proc.stdin is not None
        try:
            proc.stdin.write(framing.encode({"id": job_id, "op": op, **fields}))
        except Exception as exc:
            self._pending.pop(job_id, None)
            raise WorkerDied(f"cannot write to the inference worker: {exc}") from exc
        return job_id, future

    async def _call_on(self, proc: asyncio.subprocess.Process, op: str, **fields: Any) -> Any:
        _, future = self._submit_on(proc, op, fields)
        return await future

    async def call(self, op: str, timeout: float = 30.0, **fields: Any) -> Any:
        """Wait for a working worker, send the job, await the reply."""
        if not await self.wait_ready(timeout):
            raise WorkerError("unavailable", "the inference worker is not ready")
        _, future = self.submit(op, **fields)
        return await future

    def cancel(self, job_id: int) -> None:
        """Ask the worker to abandon job `job_id` at its next beam step (or skip it if queued)."""
        proc = self._proc
        if proc is None or proc.returncode is not None or proc.stdin is None or proc.stdin.is_closing():
            return
        try:
            proc.stdin.write(framing.encode({"op": "cancel", "id": job_id}))
        except Exception:
            pass

    def notify_open(self, uri: str, text: str) -> None:
        """didOpen: the worker prefills the document's context when it is idle; nobody waits for the answer."""
        try:
            _, future = self.submit("prefill", uri=uri, text=text)
        except WorkerError:
            return
        future.add_done_callback(lambda f: f.cancelled() or f.exception())

    def notify_close(self, uri: str) -> None:
        """didClose: free the document's KV cache; nobody waits for the answer."""
        try:
            _, future = self.submit("close", uri=uri)
        except WorkerError:
            return
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
