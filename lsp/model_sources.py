"""A modelPath that names a model another tool keeps, converted once into a bundle, which the server then loads.

`completer convert` reads models by the names their tools give them: `ollama:NAME`, `tabby:ORG/NAME`, a Hugging
Face id in the local cache (ORG/NAME[:QUANT]), a GGUF file, a checkpoint folder. A modelPath naming one is
converted the first time it is used, by `completer convert` in a process of its own, into the user's cache; the
model the worker already runs keeps answering meanwhile. The bundle's folder is named after the source and the
identity of its files (their paths, sizes and times), so a model its tool replaced is converted again, and one
converted before is loaded at once. Nothing is downloaded: the files are those the tool already holds.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import appdirs

from completer import hf_cache, ollama_store, tabby_store
from completer.convert import STOP_WITH_PARENT_ENV
from completer.convertible import is_gguf_file
from completer.types import ModelError

log = logging.getLogger(__name__)

CONVERTED_DIR_ENV = "COMPLETER_CONVERTED_DIR"
STOP_GRACE_S = 5.0  # after SIGINT, which makes `completer convert` remove what it began, before a kill
LOCK_POLL_S = 0.25
CLI_PREFIX = "completer convert: "  # how the converter begins the one line that says why it stopped
_QUANT = re.compile(r"^[A-Za-z0-9_.-]+$")


def converted_root() -> Path:
    """Where converted bundles are kept: the user's cache, or $COMPLETER_CONVERTED_DIR."""
    return Path(os.environ.get(CONVERTED_DIR_ENV) or Path(appdirs.user_cache_dir("completer")) / "converted")


def source_of(model_path: str | None) -> str | None:
    """`model_path` when it names a model `completer convert` reads rather than a bundle; else None (a bundle, a
    bundle's name, or nothing the converter knows, which the worker then reports as it always has)."""
    if not model_path:
        return None
    if model_path.startswith((ollama_store.PREFIX, tabby_store.PREFIX)):
        return model_path
    try:
        path = Path(model_path).expanduser()
        if path.is_dir():
            return model_path if not (path / "manifest.json").exists() and (path / "config.json").is_file() else None
        if path.is_file():
            return model_path if is_gguf_file(path) else None
        repository, _, tag = model_path.partition(":")
        if not hf_cache.REPOSITORY_ID.match(repository) or (tag and not _QUANT.match(tag)):
            return None
        return model_path if hf_cache.find_snapshot(repository) is not None else None
    except (OSError, RuntimeError, ValueError):  # no such user's home (~name), a name too long for the system
        return None


def _files_of(source: str) -> list[Path]:
    """The files `source` is read from, as far as can be told without reading them; [] where it cannot be
    resolved (the conversion then says why)."""
    try:
        if source.startswith(ollama_store.PREFIX):
            model = ollama_store.find(source[len(ollama_store.PREFIX):])
            return [model.manifest] + ([model.blob] if model.blob else [])
        if source.startswith(tabby_store.PREFIX):
            found = tabby_store.find(source[len(tabby_store.PREFIX):])
            return [found.gguf] if found.gguf else []
        path = Path(source).expanduser()
        if path.is_file():
            return [path]
        if not path.is_dir():
            snapshot = hf_cache.find_snapshot(source.partition(":")[0])
            if snapshot is None:
                return []
            path = snapshot
        return sorted(file for file in path.iterdir() if file.is_file())
    except (ModelError, OSError, RuntimeError, ValueError):
        return []


def _local_path(source: str) -> Path | None:
    """The file or folder `source` names on this disk, resolved; None for a tool's or the cache's name."""
    if source.startswith((ollama_store.PREFIX, tabby_store.PREFIX)):
        return None
    try:
        path = Path(source).expanduser()
        return Path(os.path.realpath(path)) if path.exists() else None
    except (OSError, RuntimeError, ValueError):
        return None


def bundle_for(source: str) -> Path:
    """The folder `source` is converted into: its name made safe, and a digest of what it is (a file or folder
    by its resolved path, however it was spelt) and of its files' identity."""
    local = _local_path(source)
    identity = [str(local) if local is not None else source]
    for file in _files_of(source):
        with contextlib.suppress(OSError):
            found = file.stat()
            identity.append(f"{os.path.realpath(file)}:{found.st_size}:{found.st_mtime_ns}")
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:12]
    shown = local.name if local is not None else source  # a file's or folder's own name
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", shown).strip("-.")[:60] or "model"
    return converted_root() / f"{name}-{digest}"


def is_bundle(folder: Path) -> bool:
    return (folder / "manifest.json").is_file()


@contextlib.asynccontextmanager
async def _held(lock_file: Path, given_up: Callable[[], bool]) -> AsyncIterator[bool]:
    """An exclusive lock on `lock_file` across processes (two windows converting one model take turns), waited
    for without blocking the loop; yields False where `given_up` became true first."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): conversions of one model in two windows may then overlap
        yield True
        return
    with open(lock_file, "a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if given_up():
                    yield False
                    return
                await asyncio.sleep(LOCK_POLL_S)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _named_in_place(made_in: Path, bundle: Path) -> None:
    """The bundle's manifest and model card record the command that made it: name the folder it lies in now,
    not the work folder it was made in (neither file is among those the manifest checksums)."""
    for name in ("manifest.json", "MODEL.md"):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            file = bundle / name
            file.write_text(file.read_text(encoding="utf-8").replace(str(made_in), str(bundle)), encoding="utf-8")


@dataclasses.dataclass
class Conversion:
    """One `completer convert` of `source` into `bundle`, in a process of its own, in a work folder beside the
    bundle that takes its place when whole: a converter killed (out of memory, say) leaves only that folder,
    which the next conversion of the same model clears."""

    source: str
    bundle: Path
    process: asyncio.subprocess.Process | None = None
    cancelled: bool = False
    step: str = ""

    async def run(self) -> str | None:
        """Convert; None when the bundle is there (made here, or by another window meanwhile), else why not."""
        root = self.bundle.parent
        root.mkdir(parents=True, exist_ok=True)
        self.step = "waiting for another window's conversion of this model"
        async with _held(root / f".{self.bundle.name}.lock", lambda: self.cancelled) as held:
            if not held or self.cancelled:
                return "stopped"
            if is_bundle(self.bundle):
                return None
            self.step = "starting"
            work = root / f".{self.bundle.name}.work"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()  # the converter unpacks a GGUF file beside its --out: here, so clearing work clears it too
            try:
                error = await self._convert(work / self.bundle.name)
                if error is None:
                    os.replace(work / self.bundle.name, self.bundle)
                    _named_in_place(work / self.bundle.name, self.bundle)
                return error
            finally:
                shutil.rmtree(work, ignore_errors=True)

    async def _convert(self, out: Path) -> str | None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "completer", "convert", self.source, "--out", str(out), "--progress",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, STOP_WITH_PARENT_ENV: "1"})  # its stdin closing (this server gone) stops it
        assert self.process.stderr is not None
        reason = ""
        async for raw in self.process.stderr:
            line = raw.decode(errors="replace").strip().split("\r")[-1]  # a progress bar redraws with \r
            if not line or self.cancelled:
                continue
            if line.startswith(CLI_PREFIX):
                reason = line.removeprefix(CLI_PREFIX)
            else:
                self.step = line
                if not line.startswith("layers ["):
                    log.info("converting %s: %s", self.source, line)
        code = await self.process.wait()
        if self.cancelled:
            return "stopped"
        if code == 0 and is_bundle(out):
            return None
        if reason:
            return reason
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"completer convert was killed ({name}; out of memory?) while {self.step}"
        return f"completer convert exited with code {code} while {self.step}"

    async def stop(self) -> None:
        """Stop the conversion: SIGINT, so the converter removes what it began, then a kill if it lingers."""
        self.cancelled = True
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


class ModelSources:
    """The server's conversions: at most one at a time, of the source the settings in effect name.

    `resolve` gives the model path the worker is handed: a source's bundle once it is converted, else, while it
    is, the model the worker last loaded (`loaded`, told by the server after each load that succeeded).
    `settle` is told the modelPath of the settings in effect: it stops a conversion of anything else and starts
    that source's if need be. `converted(source, error)` is awaited when a conversion ends, so the server can
    load the bundle or say why there is none."""

    def __init__(self, spawn: Callable[[Any], None], converted: Callable[[str, str | None], Awaitable[None]],
                 notify: Callable[[str], None]) -> None:
        self._spawn = spawn
        self._converted = converted
        self._notify = notify
        self.running: Conversion | None = None
        self.failed: dict[Path, str] = {}  # bundle folder -> why; not tried again until modelPath names it anew
        self.standin: str | None = None  # the model the worker last loaded
        self.settled: str | None = None  # the source the settings in effect name

    def resolve(self, model_path: str | None) -> str | None:
        """The model path the worker loads for the modelPath `model_path`."""
        source = source_of(model_path)
        if source is None:
            return model_path
        bundle = bundle_for(source)
        if is_bundle(bundle):
            return str(bundle)
        self._start(source, bundle)
        return self.standin

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
        self.running = Conversion(source, bundle)
        self._spawn(self._convert(self.running))

    async def _convert(self, conversion: Conversion) -> None:
        self._notify(f"modelPath {conversion.source} is a model another tool keeps: converting it once into "
                     f"{conversion.bundle} (completer convert); the model loaded now answers meanwhile")
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
            self._spawn(self.running.stop())
            self.running = None

    async def close(self) -> None:
        if self.running is not None:
            await self.running.stop()
            self.running = None
