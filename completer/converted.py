"""Bundles made of models other tools keep: where each lies, and how one is made once.

`completer convert` reads models by the names their tools give them: `ollama:NAME`, `tabby:ORG/NAME`, a Hugging
Face id in the local cache (ORG/NAME[:QUANT]), a GGUF file, a checkpoint folder. Wherever such a name is given as
the model (the server's modelPath, the CLI's --model), it is converted once into the user's cache and the bundle
is used from then on. The bundle's folder is named after the source and the identity of its files (their paths,
sizes and times), so a model its tool replaced is converted again, and one converted before is used at once. The
server converts in the background (lsp/model_sources.py); the CLI converts before it answers (`convert_here`).
Both make the bundle in a work folder beside it, under a lock per bundle, so two processes converting one model
take turns and a converter killed half-way leaves only a work folder, which the next conversion clears.
"""
from __future__ import annotations

import asyncio
import codecs
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Iterator

import appdirs

from . import hf_cache, ollama_store, tabby_store
from .convertible import is_gguf_file
from .types import ModelError

CONVERTED_DIR_ENV = "COMPLETER_CONVERTED_DIR"
STOP_WITH_PARENT_ENV = "COMPLETER_CONVERT_STOP_WITH_PARENT"  # set: stdin closing (the parent gone) stops it
STOP_GRACE_S = 5.0  # after SIGINT, which makes `completer convert` remove what it began, before a kill
REASON_PREFIX = "completer convert: "  # how the converter begins the one line that says why it stopped
REASON = re.compile(r"(?:^|\r|\] \d+/\d+)(" + re.escape(REASON_PREFIX) + r")(.*)$")
"""The converter's reason in a line of its stderr: at the line's start, or right after its bar over the layers
(`layers [###] 3/24`, redrawn with carriage returns), which does not end its line until the last layer."""
_QUANT = re.compile(r"^[A-Za-z0-9_.-]+$")


def converted_root() -> Path:
    """Where converted bundles are kept: the user's cache, or $COMPLETER_CONVERTED_DIR."""
    return Path(os.environ.get(CONVERTED_DIR_ENV) or Path(appdirs.user_cache_dir("completer")) / "converted")


def source_of(model_path: str | None) -> str | None:
    """`model_path` when it names a model `completer convert` reads rather than a bundle; else None (a bundle, a
    bundle's name, or nothing the converter knows, which loading the bundle then reports as it always has)."""
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
    """Whether `folder` holds a whole bundle: its manifest readable, and every file it lists there at the size it
    says. A bundle of the cache truncated or thinned since (a full disk, a cleaner of caches) is made again, not
    refused by the loader at every start; the loader's checksums catch the rest. False where the folder cannot be
    looked at (a name too long, no permission), which the conversion into it then reports."""
    try:
        files = json.loads((folder / "manifest.json").read_bytes()).get("files")
        return isinstance(files, dict) and bool(files) and all(
            isinstance(meta, dict) and (folder / name).stat().st_size == meta.get("bytes")
            for name, meta in files.items())
    except (OSError, ValueError, AttributeError, RecursionError):
        return False


def lock_file(bundle: Path) -> Path:
    """The file whose lock a conversion into `bundle` holds."""
    return bundle.parent / f".{bundle.name}.lock"


def try_lock(handle: IO) -> bool:
    """Take the exclusive lock on the open file `handle` if no other process holds it. Without flock (Windows)
    it is always taken: conversions of one model in two processes may then overlap."""
    try:
        import fcntl
    except ImportError:
        return True
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def wait_for_lock(handle: IO) -> None:
    """Take the exclusive lock on `handle`, waiting for the process that holds it."""
    with contextlib.suppress(ImportError):
        import fcntl

        fcntl.flock(handle, fcntl.LOCK_EX)


def converter_command(source: str, out: Path, progress: bool) -> list[str]:
    """`completer convert` of `source` into `out`, run by this interpreter; `source` after `--`, so that a modelPath
    beginning with a dash (a folder named `-h`, `--out=...`) is the model read, never an option."""
    options = ["--out", str(out)] + ["--progress"] * progress
    return [sys.executable, "-m", "completer", "convert", *options, "--", source]


@contextlib.contextmanager
def work_folder(bundle: Path) -> Iterator[Path]:
    """The --out a conversion into `bundle` writes: inside a fresh work folder beside it (the converter unpacks a
    GGUF file beside its --out, so there too), which is removed afterwards, whatever was left in it."""
    work = bundle.parent / f".{bundle.name}.work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        yield work / bundle.name
    finally:
        shutil.rmtree(work, ignore_errors=True)


def put_in_place(made: Path, bundle: Path) -> None:
    """The whole bundle `made` in a work folder becomes `bundle`, in one rename: a bundle found damaged there before
    (`is_bundle`) goes first. Its manifest and model card record the command that made it: they are made to name the
    folder it will lie in, not the work folder, before it moves (neither file is among those the manifest
    checksums), so no process ever reads them half-rewritten."""
    for name in ("manifest.json", "MODEL.md"):
        file = made / name
        with contextlib.suppress(FileNotFoundError):
            file.write_text(file.read_text(encoding="utf-8").replace(str(made), str(bundle)), encoding="utf-8")
    if os.path.lexists(bundle):
        damaged = bundle.parent / f".{bundle.name}.damaged"
        _remove(damaged)
        os.replace(bundle, damaged)  # out of the way at once: what is left of it is removed at leisure
        _remove(damaged)
    os.replace(made, bundle)


def _remove(path: Path) -> None:
    """Remove a folder and what it holds, or a file; nothing where there is none."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def how_it_ended(code: int, step: str = "") -> str:
    """A converter's failure, by its exit status, where it gave no reason of its own."""
    during = f" while {step}" if step else ""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"completer convert was killed ({name}; out of memory?){during}"
    return f"completer convert exited with code {code}{during}"


def convert_here(source: str) -> Path:
    """The bundle of `source`, converted now if it was not before, with the converter's steps on this process's
    stderr (stdout stays the caller's: `complete --json` prints JSON alone); ModelError with the converter's
    reason when it cannot be made."""
    try:
        bundle = bundle_for(source)
        if is_bundle(bundle):
            return bundle
        bundle.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_file(bundle), "a") as handle:
            if not try_lock(handle):
                print(f"completer: waiting for another process's conversion of {source} into {bundle}",
                      file=sys.stderr)
                wait_for_lock(handle)
            if is_bundle(bundle):
                return bundle
            print(f"completer: {source} is a model another tool keeps: converting it once into {bundle}",
                  file=sys.stderr, flush=True)
            with work_folder(bundle) as out:
                command = converter_command(source, out, progress=sys.stderr.isatty())
                process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.PIPE, env={**os.environ, STOP_WITH_PARENT_ENV: "1"})
                try:  # its stdin closes when this process is gone, however it ended: the converter then stops
                    reason = _relayed(process.stderr)  # type: ignore[arg-type]
                    code = process.wait()
                except BaseException:  # Ctrl-C: the converter removes what it began, then the work folder goes
                    _stop(process)
                    raise
                finally:
                    process.stdin.close()  # type: ignore[union-attr]
                    process.stderr.close()  # type: ignore[union-attr]
                if code != 0 or not is_bundle(out):
                    raise ModelError(f"cannot convert {source}: {reason or how_it_ended(code)}")
                put_in_place(out, bundle)
    except OSError as exc:
        raise ModelError(f"cannot convert {source} into the user's cache ({converted_root()}): "
                         f"{exc.strerror or exc}") from exc
    print(f"completer: converted {source} into {bundle}", file=sys.stderr)
    return bundle


def _relayed(stream: IO[bytes]) -> str:
    """Copy the converter's stderr to this process's as it comes (its bar over the layers redraws a line with
    a carriage return, and a reason may follow the bar on its line), all but the reason it stopped
    (REASON_PREFIX), which is returned."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character may span two reads
    reason, pending, midline = "", "", False  # midline: the start of the line is shown already

    def take(line: str, end: str = "\n") -> None:
        nonlocal reason, midline
        found = REASON.search(line)
        if found is None:
            sys.stderr.write(line + end)
        else:
            if found.start(1) or midline:
                sys.stderr.write(line[:found.start(1)] + "\n")  # the bar the reason was printed after ends its line
            reason = found.group(2).strip()
        midline = False

    while chunk := stream.read1(4096):  # type: ignore[attr-defined]
        pending += decoder.decode(chunk)
        *lines, pending = pending.split("\n")
        for line in lines:
            take(line)
        shown = _before_reason(pending)  # the rest of a partial line is shown now, as the bar redraws
        if shown:
            sys.stderr.write(pending[:shown])
            pending, midline = pending[shown:], True
        sys.stderr.flush()
    pending += decoder.decode(b"", final=True)
    if pending:
        take(pending, end="")
    return reason


def _before_reason(text: str) -> int:
    """How much of a partial line can be shown: all of it but where the reason's prefix begins, or may begin
    once the rest of the line comes."""
    found = REASON.search(text)
    if found is not None:
        return found.start(1)
    for length in range(min(len(text), len(REASON_PREFIX) - 1), 0, -1):
        if REASON_PREFIX.startswith(text[-length:]):
            return len(text) - length
    return len(text)


def interrupt(process: subprocess.Popen | asyncio.subprocess.Process) -> None:
    """Ask a converter to stop as Ctrl-C would, so that it removes what it began. Windows cannot send SIGINT to
    another process (Popen.send_signal refuses it): there it is terminated, and the work folder it wrote in is
    removed by whoever made it (work_folder)."""
    with contextlib.suppress(ProcessLookupError):
        if os.name == "nt":
            process.terminate()
        else:
            process.send_signal(signal.SIGINT)


def _stop(process: subprocess.Popen) -> None:
    """Stop a converter as Ctrl-C would (it removes what it began), killing it if it lingers."""
    interrupt(process)
    try:
        process.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
