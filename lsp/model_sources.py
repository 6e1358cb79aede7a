"""A modelPath that names a model another tool keeps, converted once into a bundle, which the server then loads.

A modelPath such as `ollama:NAME`, `tabby:ORG/NAME`, a Hugging Face id in the local cache, a GGUF file or a
checkpoint folder is converted the first time it is used, by `completer convert` in a process of its own, into
the bundle completer/converted.py names for it in the user's cache; the model the worker already runs keeps
answering meanwhile, and one converted before is loaded at once. Nothing is downloaded: the files are those the
tool already holds.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from completer.converted import (REASON, STOP_GRACE_S, STOP_WITH_PARENT_ENV, bundle_for, converter_command,
                                 how_it_ended, interrupt, is_bundle, lock_file, put_in_place, source_of, try_lock,
                                 work_folder)

log = logging.getLogger(__name__)
TRACEBACK = "Traceback (most recent call last):"

LOCK_POLL_S = 0.25


@contextlib.asynccontextmanager
async def _held(bundle: Path, given_up: Callable[[], bool]) -> AsyncIterator[bool]:
    """The lock on conversions into `bundle` across processes (two windows converting one model take turns),
    waited for without blocking the loop; yields False where `given_up` became true first."""
    with open(lock_file(bundle), "a") as handle:
        while not try_lock(handle):
            if given_up():
                yield False
                return
            await asyncio.sleep(LOCK_POLL_S)
        yield True  # closing the file lets the lock go


@dataclasses.dataclass
class Conversion:
    """One `completer convert` of `source` into `bundle`, in a process of its own, in a work folder beside the
    bundle that takes its place when whole: a converter killed (out of memory, say) leaves only that folder,
    which the next conversion of the same model clears."""

    source: str
    bundle: Path
    on_first_step: Callable[[], None] | None = None  # the converter found the model and began reading it
    process: asyncio.subprocess.Process | None = None
    cancelled: bool = False
    step: str = ""
    _spawning: asyncio.Future[asyncio.subprocess.Process] | None = None
    _interrupted: bool = False

    async def run(self) -> str | None:
        """Convert; None when the bundle is there (made here, or by another window meanwhile), else why not."""
        self.bundle.parent.mkdir(parents=True, exist_ok=True)
        self.step = "waiting for another window's conversion of this model"
        async with _held(self.bundle, lambda: self.cancelled) as held:
            if not held or self.cancelled:
                return "stopped"
            if is_bundle(self.bundle):
                return None
            self.step = "starting"
            with work_folder(self.bundle) as out:
                error = await self._convert(out)
                if error is None:
                    put_in_place(out, self.bundle)
                return error

    async def _convert(self, out: Path) -> str | None:
        if self.cancelled:
            return "stopped"
        # Started under a shield, and waited for by `stop`: a task cancelled while the process starts leaves
        # Python 3.11's asyncio waiting forever for pipes it had not connected, and a stop that came meanwhile
        # found no process to stop and let the converter run to its end.
        self._spawning = asyncio.ensure_future(asyncio.create_subprocess_exec(
            *converter_command(self.source, out, progress=True),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, STOP_WITH_PARENT_ENV: "1"}))  # its stdin closing (this server gone) stops it
        try:
            self.process = await asyncio.shield(self._spawning)
        except asyncio.CancelledError:
            self.cancelled = True
            self._spawning.add_done_callback(self._interrupt_once_started)
            raise
        assert self.process.stderr is not None
        reason = ""
        traceback: list[str] = []  # a converter that failed unexpectedly: one line for the editor, not fifty
        exception = ""  # the line of the exception it died of (the last one raised)
        in_frames = False
        async for raw in self.process.stderr:
            line = raw.decode(errors="replace").rstrip().split("\r")[-1]  # a progress bar redraws with \r
            if not line.strip() or self.cancelled:
                continue
            found = REASON.search(line)
            header = line.find(TRACEBACK)  # also right after the bar over the layers, which ends no line
            if found is not None:
                reason = found.group(2)
            elif header != -1 or in_frames:
                traceback.append(line[max(header, 0):])
                in_frames = header != -1 or line[:1].isspace()  # its frames are indented; the exception is not
                if not in_frames:
                    exception = line.strip()
            else:
                self.step = line.strip()
                if self.on_first_step is not None:
                    self.on_first_step()
                    self.on_first_step = None
                if not self.step.startswith("layers ["):
                    log.info("converting %s: %s", self.source, self.step)
        code = await self.process.wait()
        if self.cancelled:
            return "stopped"
        if code == 0 and is_bundle(out):
            return None
        if traceback:
            log.info("completer convert %s failed:\n%s", self.source, "\n".join(traceback))  # one message
        if exception and code > 0 and not reason:  # a kill (out of memory) says more than what was raised before
            return f"completer convert failed: {exception}"
        return reason or how_it_ended(code, self.step)

    async def stop(self) -> None:
        """Stop the conversion: SIGINT, so the converter removes what it began, then a kill if it lingers."""
        self.cancelled = True
        if self._spawning is None:
            return
        try:
            process = await asyncio.shield(self._spawning)
        except OSError:  # the converter never started
            return
        except asyncio.CancelledError:
            if not self._spawning.cancelled():  # this stop was cancelled, not the start: stop it once it exists
                self._spawning.add_done_callback(self._interrupt_once_started)
                raise
            return
        if process.returncode is not None:
            return
        self._interrupt(process)
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    def _interrupt(self, process: asyncio.subprocess.Process) -> None:
        """SIGINT once: a second one could land in the converter's removal of what it began."""
        if not self._interrupted:
            self._interrupted = True
            interrupt(process)

    def _interrupt_once_started(self, spawning: asyncio.Future[asyncio.subprocess.Process]) -> None:
        """A converter whose conversion was cancelled while it started: stopped as soon as it exists."""
        if not spawning.cancelled() and spawning.exception() is None:
            self._interrupt(spawning.result())


class ModelSources:
    """The server's conversions: at most one at a time, of the source the settings in effect name.

    `resolve` gives the model path the worker is handed: a source's bundle once it is converted, else, while it
    is, the model the worker last loaded (`loaded`, told by the server after each load that succeeded), or the
    default model where that was the bundle itself, damaged since (a worker restarted after its weights were
    truncated under it would not load it, and the server would fall back, setting modelPath aside for good).
    `settle` is told the modelPath of the settings in effect: it stops a conversion of anything else and starts
    that source's if need be. `converted(source, error)` is awaited when a conversion ends, so the server can
    load the bundle or say why there is none."""

    def __init__(self, spawn: Callable[[Any], Any], converted: Callable[[str, str | None], Awaitable[None]],
                 notify: Callable[[str], None]) -> None:
        self._spawn = spawn
        self._converted = converted
        self._notify = notify
        self.running: Conversion | None = None
        self.failed: dict[Path, str] = {}  # bundle folder -> why; not tried again until modelPath names it anew
        self.standin: str | None = None  # the model the worker last loaded
        self.settled: str | None = None  # the source the settings in effect name
        self._stopping: set[asyncio.Future[Any]] = set()  # stops of conversions no longer running, under way

    def resolve(self, model_path: str | None) -> str | None:
        """The model path the worker loads for the modelPath `model_path`."""
        source = source_of(model_path)
        if source is None:
            return model_path
        bundle = bundle_for(source)
        if is_bundle(bundle):
            return str(bundle)
        self._start(source, bundle)
        return self.standin if self.standin != str(bundle) else None  # damaged since it loaded: the default model

    def loaded(self, model_path: str | None) -> None:
        """The worker loaded `model_path` (what `resolve` gave): the model that answers while one converts."""
        self.standin = model_path

    def settle(self, model_path: str | None) -> None:
        source = source_of(model_path)
        if self.running is not None and self.running.source != source:
            self._stop_running()
        self.settled = source
        if source is not None:
            self.resolve(source)

    def named_anew(self, model_path: str | None) -> None:
        """modelPath was changed to `model_path`: a conversion of it that failed is worth another try."""
        source = source_of(model_path)
        if source is not None:
            self.failed.pop(bundle_for(source), None)

    def summary(self) -> dict[str, Any] | None:
        """For completer/info: the conversion under way, or why the source the settings name has no bundle."""
        if self.running is not None:
            return {"source": self.running.source, "bundle": str(self.running.bundle), "state": "converting",
                    "step": self.running.step}
        if self.settled is not None:
            bundle = bundle_for(self.settled)
            if bundle in self.failed:
                return {"source": self.settled, "bundle": str(bundle), "state": "failed",
                        "error": self.failed[bundle]}
        return None

    def _start(self, source: str, bundle: Path) -> None:
        if bundle in self.failed or (self.running is not None and self.running.bundle == bundle):
            return
        self._stop_running()
        self.running = Conversion(source, bundle, on_first_step=lambda: self._notify(
            f"modelPath {source} is a model another tool keeps: converting it once into {bundle} (completer "
            f"convert); the model loaded now answers meanwhile"))  # once the converter has found it: not before
        self._spawn(self._convert(self.running))

    async def _convert(self, conversion: Conversion) -> None:
        try:
            error = await conversion.run()
        except OSError as exc:
            error = f"completer convert could not run ({exc.strerror or exc})"
        if self.running is conversion:
            self.running = None
        if conversion.cancelled:
            return
        if error is not None:
            self.failed[conversion.bundle] = error
        await self._converted(conversion.source, error)

    def _stop_running(self) -> None:
        if self.running is not None:
            log.info("modelPath changed: stopping the conversion of %s", self.running.source)
            self.running.cancelled = True
            stopping = self._spawn(self.running.stop())
            if isinstance(stopping, asyncio.Future):
                self._stopping.add(stopping)
                stopping.add_done_callback(self._stopping.discard)
            self.running = None

    async def close(self) -> None:
        """Stop the conversion under way, and wait for those stopped before (a modelPath changed just before)."""
        if self.running is not None:
            await self.running.stop()
            self.running = None
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)
