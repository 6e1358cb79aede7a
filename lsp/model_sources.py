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
import signal
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

import appdirs

from completer import hf_cache, ollama_store, tabby_store
from completer.types import ModelError

log = logging.getLogger(__name__)

CONVERTED_DIR_ENV = "COMPLETER_CONVERTED_DIR"
STOP_GRACE_S = 5.0  # after SIGINT, which makes `completer convert` remove what it began, before a kill
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
    path = Path(model_path).expanduser()
    try:
        if path.is_dir():
            return model_path if not (path / "manifest.json").exists() and (path / "config.json").is_file() else None
        if path.is_file():
            with open(path, "rb") as handle:
                return model_path if path.suffix.lower() == ".gguf" or handle.read(4) == b"GGUF" else None
    except OSError:
        return None
    repository, _, tag = model_path.partition(":")
    if not hf_cache.REPOSITORY_ID.match(repository) or (tag and not _QUANT.match(tag)):
        return None
    return model_path if hf_cache.find_snapshot(repository) is not None else None


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
    except (ModelError, OSError):
        return []


def bundle_for(source: str) -> Path:
    """The folder `source` is converted into: its name made safe, and a digest of its files' identity."""
    identity = [source]
    for file in _files_of(source):
        with contextlib.suppress(OSError):
            found = file.stat()
            identity.append(f"{os.path.realpath(file)}:{found.st_size}:{found.st_mtime_ns}")
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:12]
    shown = Path(source).name if Path(source).expanduser().exists() else source  # a file's or folder's own name
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", shown).strip("-.")[:60] or "model"
    return converted_root() / f"{name}-{digest}"


def is_bundle(folder: Path) -> bool:
    return (folder / "manifest.json").is_file()


@dataclasses.dataclass
class Conversion:
    """One `completer convert` of `source` into `bundle`, in a process of its own."""

    source: str
    bundle: Path
    process: asyncio.subprocess.Process | None = None
    cancelled: bool = False
    last_line: str = ""

    async def run(self) -> str | None:
        """Convert; None when the bundle is there (made here, or by another window's conversion at the same
        time), else the converter's one-line reason."""
        self.bundle.parent.mkdir(parents=True, exist_ok=True)
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "completer", "convert", self.source, "--out", str(self.bundle), "--progress",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            line = raw.decode(errors="replace").strip().split("\r")[-1]  # a progress bar redraws with \r
            if line:
                self.last_line = line
                if not line.startswith("layers ["):
                    log.info("converting %s: %s", self.source, line)
        code = await self.process.wait()
        if is_bundle(self.bundle):
            return None
        if self.cancelled:
            return "cancelled"
        return self.last_line.removeprefix("completer convert: ") or f"completer convert exited with {code}"

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
    """The server's conversions: at most one at a time; a modelPath that changes stops the one under way.

    `for_worker` gives the engine settings the worker is handed: a source's bundle once it is converted, else,
    while it is, the model the worker was last handed. `converted(source, error)` is awaited when a conversion
    ends, so the server can load the bundle or say why there is none."""

    def __init__(self, spawn: Callable[[Any], None], converted: Callable[[str, str | None], Awaitable[None]],
                 notify: Callable[[str], None]) -> None:
        self._spawn = spawn
        self._converted = converted
        self._notify = notify
        self.running: Conversion | None = None
        self.failed: dict[Path, str] = {}  # a bundle folder whose conversion failed is not tried again
        self.standin: str | None = None  # the model the worker was last handed that names no source

    def for_worker(self, model_path: str | None) -> str | None:
        """The model path the worker loads for the modelPath `model_path`, starting its conversion if need be."""
        source = source_of(model_path)
        if source is None:
            self._stop_running()
            self.standin = model_path
            return model_path
        bundle = bundle_for(source)
        if is_bundle(bundle):
            if self.running is not None and self.running.bundle != bundle:
                self._stop_running()
            return str(bundle)
        if bundle not in self.failed and (self.running is None or self.running.bundle != bundle):
            self._stop_running()
            self.running = Conversion(source, bundle)
            self._spawn(self._convert(self.running))
        return self.standin

    def summary(self) -> dict[str, Any] | None:
        """For completer/info: the conversion under way, if any."""
        if self.running is None:
            return None
        return {"source": self.running.source, "bundle": str(self.running.bundle), "state": "converting",
                "step": self.running.last_line}

    async def _convert(self, conversion: Conversion) -> None:
        self._notify(f"modelPath {conversion.source} is a model another tool keeps: converting it once into "
                     f"{conversion.bundle} (completer convert); the model loaded now answers meanwhile")
        try:
            error = await conversion.run()
        except OSError as exc:
            error = f"completer convert could not start ({exc})"
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
            self._spawn(self.running.stop())
            self.running = None

    async def close(self) -> None:
        if self.running is not None:
            await self.running.stop()
            self.running = None
