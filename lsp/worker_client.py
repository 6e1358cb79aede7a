"""The server's side of the worker: reach it, talk msgpack frames to it, start it again when it dies.

The worker is either the user's shared engine, reached over its Unix socket and started by the first server
that needs it (lsp/engine_socket.py), or a private child process on pipes (`--standalone`). Everything here
runs on the server's asyncio loop and never blocks it: requests are futures resolved by a reader task, and a
dead worker is replaced at once (with back-off only when it keeps dying), so the next request is served by a
fresh process within a couple of seconds.
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
from typing import Any, Awaitable, Callable

from lsp import __version__, framing
from lsp.engine_socket import (SOURCE_FINGERPRINT, CodeChanged, EngineSocketError, code_changed_message,
                               code_changed_on_disk, connect_or_start, shared_engine_supported)

log = logging.getLogger(__name__)

RESTART_DELAYS = (0.0, 0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Delay before the n-th restart within CRASH_WINDOW seconds: immediate at first, then backing off."""
CRASH_WINDOW = 60.0
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
WORKER_BOOT = ("import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); sys.path[0] = {root!r}; "
               "from lsp.worker import main; sys.exit(main(sys.argv[1:]))")
"""The worker's entry. `python -m lsp.worker` would put the working directory (the user's project)
first on the import path, and a project with its own `lsp/` or `completer/` would run instead. Ctrl-C is ignored:
a private worker is in the process group of `completer serve` run in a terminal, where Ctrl-C would print its
traceback while it loads; its server ends it, by closing its pipe."""
CONNECT_ATTEMPTS = 4
"""Tries to reach the shared engine before a private worker is started instead."""
SPAWN_TIMEOUT = 10.0
"""How long `stop` waits for a private worker's process being started (forking and connecting its pipes takes
milliseconds): the loop cannot be torn down while it is."""
INIT_TIMEOUT = 120.0
"""Loading a model takes well under a second on the CPU; a worker silent this long is hung (a driver,
a disk) and is killed, so it cannot hold the settings lock forever. Its replacement backs off."""
HOLD_AFTER_BYTES = 1024 * 1024
"""A worker this far behind in reading its jobs is not reading (its process stopped: SIGSTOP, a frozen cgroup, a
debugger): the server holds the jobs from then on (`Outbox`). A worker that reads takes each job as it comes, and
the socket's or pipe's own buffer holds a few of them."""
FLUSH_RETRY_S = 0.05
"""How soon an outbox whose transport let it through still behind looks again (none seen: a guard, not a poll)."""


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
    """The server's environment, plus a fixed mmap threshold for glibc unless the user chose one; a relative
    COMPLETER_LOG_DIR made absolute, as the shared engine runs in /."""
    from lsp.logs import LOG_DIR_ENV

    env = dict(os.environ)
    if env.get(LOG_DIR_ENV):
        env[LOG_DIR_ENV] = os.path.abspath(env[LOG_DIR_ENV])
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(MMAP_THRESHOLD_BYTES))
    return env


class Outbox:
    """The jobs on their way to a worker: written at once while it reads them, held in order once it has fallen
    HOLD_AFTER_BYTES behind, and written as it catches up. A held job whose request was abandoned meanwhile (the
    next keystroke, a cancel) is never sent: were every job written, a stopped engine's would pile up in the
    server's buffer, each with its context (tens of kB; 1,000 keystrokes grew the server by over 100 MB, kept after
    the engine caught up), and the engine would read and refuse them all before the last keystroke's."""

    def __init__(self, writer: Any, wanted: Callable[[int], bool]) -> None:
        self._writer = writer
        self._wanted = wanted  # whether a held job is still awaited when its turn comes
        self._held: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        self._flushing: asyncio.Task[None] | None = None

    def send(self, job_id: int, frame: bytes) -> None:
        """Write `frame`, or hold it behind those held already. Raises what the writer raises."""
        if not self._held and not self._behind():
            self._writer.write(frame)
            return
        self._held[job_id] = frame
        if self._flushing is None:
            self._flushing = asyncio.ensure_future(self._flush())

    def withdraw(self, job_id: int) -> bool:
        """Take back a job not sent yet; False when it was sent (or never was the outbox's)."""
        return self._held.pop(job_id, None) is not None

    def clear(self) -> None:
        """The worker is gone: nothing held will be sent (its jobs' futures fail with it)."""
        self._held.clear()
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None

    def _behind(self) -> bool:
        transport = self._writer.transport
        return transport is not None and transport.get_write_buffer_size() > HOLD_AFTER_BYTES

    async def _flush(self) -> None:
        """Write the held jobs still wanted, in order, as the worker reads what was written before them."""
        try:
            while self._held:
                await self._writer.drain()  # until the transport's buffer is down to its low-water mark
                if self._behind():  # a transport that does not pause at our mark: look again shortly
                    await asyncio.sleep(FLUSH_RETRY_S)
                    continue
                while self._held and not self._behind():
                    job_id, frame = self._held.popitem(last=False)
                    if self._wanted(job_id):
                        self._writer.write(frame)
        except Exception:  # noqa: BLE001 (the connection was lost: its reader ends it and fails the jobs)
            self._held.clear()
        finally:
            self._flushing = None


class PipeChannel:
    """A private worker: a child process, its stdin and stdout."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.reader: asyncio.StreamReader = proc.stdout
        self.writer: Any = proc.stdin
        self.outbox: Outbox | None = None  # set by the WorkerClient that uses it
        self.pid = proc.pid
        self.shared = False
        self.reading = True  # until its reader saw the end: a job sent after that would wait forever

    @property
    def alive(self) -> bool:
        return self.reading and self.proc.returncode is None and not self.writer.is_closing()

    async def close(self, grace: float) -> None:
        """Close its stdin (it abandons any search and exits); kill it after `grace` s."""
        if self.proc.returncode is not None:
            return
        try:
            self.writer.close()
            await asyncio.wait_for(self.proc.wait(), grace)
        except (asyncio.TimeoutError, ProcessLookupError, OSError):
            self.kill()

    def kill(self) -> None:
        if self.proc.returncode is None:
            try:
                os.kill(self.proc.pid, getattr(signal, "SIGKILL", signal.SIGTERM))  # TerminateProcess on Windows
            except (ProcessLookupError, OSError):
                pass

    async def ended(self) -> str:
        """How it ended, once it has: its exit code."""
        try:
            code = await asyncio.wait_for(self.proc.wait(), 5)
        except asyncio.TimeoutError:
            self.proc.kill()
            code = await self.proc.wait()
        return f"exit code {code}"


class SocketChannel:
    """A connection to the user's shared engine; closing it leaves the engine to its other clients."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer: Any = writer
        self.outbox: Outbox | None = None  # set by the WorkerClient that uses it
        self.pid: int | None = None  # the engine's, from its hello
        self.shared = True
        self.reading = True  # until its reader saw the end: a connection the engine closed is only half closed

    @property
    def alive(self) -> bool:
        return self.reading and not self.writer.is_closing()

    async def close(self, grace: float) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), grace)
        except (asyncio.TimeoutError, OSError):
            pass

    def kill(self) -> None:
        transport = self.writer.transport
        if transport is not None:
            transport.abort()

    async def ended(self) -> str:
        return "its connection closed"


Channel = PipeChannel | SocketChannel


async def _handshake(channel: SocketChannel) -> dict[str, Any]:
    """The first exchange on a new connection to the shared engine, before its reader task starts: its
    version, pid and the fingerprint of its code."""
    channel.writer.write(framing.encode({"id": 0, "op": "hello", "version": __version__,
                                         "source": SOURCE_FINGERPRINT}))
    reply = await framing.read_frame_async(channel.reader)
    if reply is None:  # an engine that is exiting (or was killed) closed it: another may be starting
        raise ConnectionResetError("the shared engine closed the connection before its hello")
    hello = reply.get("ok") if isinstance(reply, dict) else None
    if not isinstance(hello, dict):
        raise EngineSocketError(f"the shared engine answered its hello with {reply!r:.200}")
    return hello


class WorkerClient:
    """One live worker at a time, plus the futures of the jobs it has not answered yet. `shared`: use the
    user's shared engine, falling back to a private worker when it cannot be used (said once in the log).
    `tell_user` shows the user what only a restart of the server mends (its code changed on disk); `on_restart` is told
    why a worker started in place of one that died has no model (the server falls back and says so)."""

    def __init__(self, engine_settings: Callable[[], dict[str, Any]], log_level: str = "INFO",
                 log_file: str | None = None, shared: bool = False,
                 tell_user: Callable[[str], None] | None = None,
                 on_restart: Callable[[str], Awaitable[None]] | None = None) -> None:
        self._engine_settings = engine_settings
        self._tell_user = tell_user
        self._on_restart = on_restart  # told why a worker started in place of one that died has no model
        self.code_changed: str | None = None  # why no worker will be started again, once the code changed on disk
        self._log_level = log_level
        self._log_file = log_file
        self.shared = shared and shared_engine_supported()
        self._channel: Channel | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._ready: asyncio.Event | None = None
        self._stopping = False
        self._spawning: asyncio.Future[PipeChannel] | None = None  # a private worker's process being started
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
    def on_shared_engine(self) -> bool:
        """Whether the worker in use now is the shared engine (a private one may stand in for it)."""
        return isinstance(self._channel, SocketChannel)

    @property
    def pid(self) -> int | None:
        channel = self._channel
        return channel.pid if channel is not None and channel.alive else None

    def _event(self) -> asyncio.Event:
        if self._ready is None:
            self._ready = asyncio.Event()
        return self._ready

    def _worker_command(self) -> list[str]:
        cmd = [sys.executable, "-c", WORKER_BOOT.format(root=str(PACKAGE_ROOT)), "--log-level", self._log_level,
               "--source", SOURCE_FINGERPRINT]
        if self._log_file:  # absolute: the shared engine runs in /
            cmd += ["--log-file", os.path.abspath(self._log_file)]
        return cmd

    async def _open(self) -> Channel:
        """A channel to a worker: the shared engine's socket (started if need be), else a private process.
        Raises OSError when no process can be started, CodeChanged when any would run other code than this
        server's: once the code on disk changed, only the engine of this server's code, still running, is used."""
        if self.shared:
            try:
                return await self._connect_shared(start=not code_changed_on_disk())
            except CodeChanged:
                raise
            except EngineSocketError as exc:  # not safe or not compatible: never tried again by this server
                self.shared = False
                log.warning("not using the shared engine (%s): running a private worker", exc)
            except (OSError, asyncio.TimeoutError, framing.FrameError, ValueError) as exc:
                log.warning("cannot reach the shared engine (%s): running a private worker until the next restart",
                            exc)
        if code_changed_on_disk():
            raise CodeChanged(code_changed_message())
        self._spawning = asyncio.ensure_future(self._spawn_private())
        channel = await asyncio.shield(self._spawning)
        self._spawning = None
        return channel

    async def _spawn_private(self) -> PipeChannel:
        """A private worker's process. Started under a shield, and waited for by `stop`: cancelled while the process
        starts (the loop torn down when the client left right after initialize), Python 3.11's asyncio waits
        forever for a process whose pipes it had not connected yet, and the server never exited."""
        proc = await asyncio.create_subprocess_exec(
            *self._worker_command(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=framing.MAX_FRAME_BYTES, env=worker_environment(),
        )
        return PipeChannel(proc)

    async def _connect_shared(self, start: bool) -> SocketChannel:
        """Connect to the shared engine (started if none listens and `start`) and greet it. A connection that an
        engine being killed had queued is reset, and an engine this server started may be killed before it listens
        (StartKilled): either is tried again a few times, when a new engine (started by this server or another)
        listens."""
        for attempt in range(CONNECT_ATTEMPTS):
            try:
                reader, writer = await connect_or_start(self._worker_command(), worker_environment(), start)
                channel = SocketChannel(reader, writer)
                hello = await asyncio.wait_for(_handshake(channel), INIT_TIMEOUT)
                break
            except (ConnectionError, framing.FrameError):
                if attempt == CONNECT_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))
        if hello.get("version") != __version__ or hello.get("source") != SOURCE_FINGERPRINT:
            await channel.close(1.0)
            raise EngineSocketError(f"the shared engine runs version {hello.get('version')!r} of the code "
                                    f"{hello.get('source')!r}, this server {__version__} of {SOURCE_FINGERPRINT}")
        channel.pid = hello.get("pid") if isinstance(hello.get("pid"), int) else None
        return channel

    async def start(self, reported: bool = False) -> str | None:
        """Reach a worker and load the model; returns the model error message, if any, which the log says at the
        error level unless the caller `reported` it itself (the server, which falls back and says so once)."""
        ready = self._event()
        ready.clear()
        started = time.perf_counter()
        try:
            channel = await self._open()
        except CodeChanged as exc:
            self._stay_without_worker(str(exc))
            return self.model_error
        except OSError as exc:  # nothing will exit, so nothing would restart it: retry from here
            self.model_error = f"cannot start the inference worker ({sys.executable}): {exc}"
            log.error("%s", self.model_error)
            if not self._stopping:
                self._spawn(self._start_later())
            return self.model_error
        if self._stopping:  # stopped while its process started: `stop` closed it; this start is abandoned
            raise asyncio.CancelledError
        self._channel = channel
        self.started_at = time.monotonic()
        self._spawn(self._read_loop(channel))
        log.info("%s pid %s", "connected to the shared engine" if channel.shared else "started inference worker",
                 channel.pid)
        try:
            reply = await asyncio.wait_for(self._call_on(channel, "init", settings=self._engine_settings()),
                                           INIT_TIMEOUT)
        except asyncio.TimeoutError:
            self.model_error = f"the inference worker did not load the model within {INIT_TIMEOUT:.0f} s"
            log.error("%s; dropping pid %s", self.model_error, channel.pid)
            self.shared = False  # a hung shared engine would hang its replacement too
            channel.kill()  # its reader sees the end and starts a replacement, with back-off
            return self.model_error
        except WorkerError as exc:
            if self._stopping:  # `shutdown` while the model loaded: no error, the start is abandoned
                raise asyncio.CancelledError from None
            self.info = {}
            self.model_error = exc.message
            if exc.kind != "died":
                ready.set()  # the process works; requests get a quick "no model" instead of waiting
            log.log(logging.INFO if reported and exc.kind != "died" else logging.ERROR,
                    "inference worker has no model: %s", exc.message)
            return exc.message
        self._accept(reply)
        ready.set()
        log.info("worker pid %s ready in %.0f ms", channel.pid, (time.perf_counter() - started) * 1000)
        return None

    def _stay_without_worker(self, why: str) -> None:
        """Start no worker again, and answer every job at once with `why` (the user is told once): the code on
        disk is not this server's any more, and only a server of that code can use it."""
        first = self.code_changed is None
        self.code_changed = self.model_error = why
        self.info = {}
        self._event().set()
        if first and self._tell_user is not None:
            self._tell_user(why)
        elif first:
            log.error("%s", why)

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
        """Apply engine settings; returns the error message (the worker keeps its old state) or None. Stopped meanwhile
        (`shutdown`), the change is abandoned, as a start is: no error to tell of settings nobody will use."""
        try:
            reply = await self.call("configure", settings=settings)
        except WorkerError as exc:
            if self._stopping:
                raise asyncio.CancelledError from None
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
        """Leave the worker: a private one exits (it is killed after `grace` s); the shared engine goes on. A
        private worker's process still being started is waited for, and closed too."""
        self._stopping = True
        spawning = self._spawning
        if spawning is not None:
            await asyncio.wait([spawning], timeout=SPAWN_TIMEOUT)
            if spawning.done() and not spawning.cancelled() and spawning.exception() is None \
                    and spawning.result() is not self._channel:
                await spawning.result().close(grace)
        if self._channel is not None:
            await self._channel.close(grace)

    def kill(self) -> None:
        """Synchronous last resort (exit paths where the loop may be gone)."""
        self._stopping = True
        if self._channel is not None:
            self._channel.kill()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read_loop(self, channel: Channel) -> None:
        try:
            while True:
                message = await framing.read_frame_async(channel.reader)
                if message is None:
                    break
                self._resolve(message)
        except ConnectionError:  # the shared engine died: its connection was reset, not closed
            pass
        except Exception:
            log.exception("worker pid %s sent garbage; dropping it", channel.pid)
            channel.kill()
        finally:
            channel.reading = False
            await self._on_exit(channel)

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

    async def _on_exit(self, channel: Channel) -> None:
        if channel.outbox is not None:
            channel.outbox.clear()
        if channel is not self._channel:
            return
        self._event().clear()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(WorkerDied())
        how = await channel.ended()
        if self._stopping:
            log.info("worker pid %s exited (%s)", channel.pid, how)
            return
        delay = self._next_restart_delay()
        log.warning("inference worker pid %s died (%s); restarting%s", channel.pid, how,
                    f" in {delay:.1f} s" if delay else "")
        if delay:
            await asyncio.sleep(delay)
        if self._stopping or channel is not self._channel:
            return
        self.restarts += 1
        try:
            error = await self.start(reported=self._on_restart is not None)
        except Exception:
            log.exception("could not restart the inference worker")
            return
        if error is not None and self._on_restart is not None and self._event().is_set() and not self.code_changed:
            self._spawn(self._on_restart(error))  # the process works, but not with the model it had

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
        if self.code_changed is not None:
            raise WorkerError("nomodel", self.code_changed)
        channel = self._channel
        if channel is None or not channel.alive:
            # Dead before the reader noticed: make waiters wait for the replacement, not retry now.
            self._event().clear()
            raise WorkerDied("the inference worker is not running")
        return self._submit_on(channel, op, fields)

    def _submit_on(self, channel: Channel, op: str, fields: dict[str, Any]) -> tuple[int, asyncio.Future[Any]]:
        job_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[job_id] = future
        try:
            self._outbox(channel).send(job_id, framing.encode({"id": job_id, "op": op, **fields}))
        except Exception as exc:
            self._pending.pop(job_id, None)
            raise WorkerDied(f"cannot write to the inference worker: {exc}") from exc
        return job_id, future

    def _outbox(self, channel: Channel) -> Outbox:
        if channel.outbox is None:
            channel.outbox = Outbox(channel.writer, self._awaited)
        return channel.outbox

    def _awaited(self, job_id: int) -> bool:
        """Whether a held job is still to be sent: someone awaits its reply (a request abandoned meanwhile has its
        future settled, a call that timed out has it cancelled), or it is a note nobody awaits (prefill, close)."""
        future = self._pending.get(job_id)
        if future is not None and not future.done():
            return True
        self._pending.pop(job_id, None)
        return False

    async def _call_on(self, channel: Channel, op: str, **fields: Any) -> Any:
        _, future = self._submit_on(channel, op, fields)
        return await future

    async def call(self, op: str, timeout: float = 30.0, **fields: Any) -> Any:
        """Wait for a working worker, send the job, await the reply."""
        if not await self.wait_ready(timeout):
            raise WorkerError("unavailable", "the inference worker is not ready")
        _, future = self.submit(op, **fields)
        return await future

    def cancel(self, job_id: int) -> None:
        """Ask the worker to abandon job `job_id` at its next beam step (or skip it if queued)."""
        channel = self._channel
        if channel is None or not channel.alive:
            return
        if channel.outbox is not None and channel.outbox.withdraw(job_id):  # never sent: nothing to stop
            self._pending.pop(job_id, None)
            return
        try:
            channel.writer.write(framing.encode({"op": "cancel", "id": job_id}))
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

    def forget_searches_ahead(self) -> None:
        """What the server may read changed (excludeFiles, workspaceContext): the worker drops the answers it
        searched ahead with the snippets of before, which the next request would take; nobody waits for it."""
        try:
            _, future = self.submit("forget_ahead")
        except WorkerError:
            return
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
