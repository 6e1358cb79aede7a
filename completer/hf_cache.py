"""Checkpoints already on this machine in the Hugging Face cache, found by their repository id.

Users of transformers, the Hugging Face CLI or an editor plugin often have code models downloaded already, under
`~/.cache/huggingface/hub/models--ORG--NAME/snapshots/COMMIT/`. `completer convert ORG/NAME` reads such a
snapshot, and `completer models` lists what the cache holds and whether it converts. Only the cache's files are
read: nothing is downloaded, and huggingface_hub is not needed.

llama.cpp's `-hf ORG/NAME[:QUANT]` (what llama.vscode starts) downloads GGUF repositories into the same layout,
under LLAMA_CACHE when that is set; `completer convert ORG/NAME[:QUANT]` picks a GGUF file from such a snapshot
as llama.cpp picks it by its quantization tag.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

REPOSITORY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hub_cache() -> Path:
    """Where the Hugging Face libraries keep downloads, by the same environment variables they read."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):  # the second, older name huggingface_hub still reads
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "huggingface" / "hub"


def caches() -> list[Path]:
    """Every cache a repository may lie in: llama.cpp's LLAMA_CACHE, where set, then the Hugging Face cache."""
    found = [Path(os.environ["LLAMA_CACHE"]).expanduser()] if os.environ.get("LLAMA_CACHE") else []
    if hub_cache() not in found:
        found.append(hub_cache())
    return found


def find_snapshot(repository: str, revision: str = "main") -> Path | None:
    """`cached_snapshot` in the first of `caches()` that holds it."""
    for cache in caches():
        snapshot = cached_snapshot(repository, cache, revision)
        if snapshot is not None:
            return snapshot
    return None


def cached_snapshot(repository: str, cache: Path | None = None, revision: str = "main") -> Path | None:
    """The snapshot folder of `repository` ("ORG/NAME") at `revision` (a branch or tag the cache recorded, or a
    commit), or None when the cache does not hold it. Only where the cache recorded no main branch at all is its
    one snapshot taken for main; another revision it has no record of is not there."""
    if not REPOSITORY_ID.match(repository):
        return None
    folder = (cache or hub_cache()) / f"models--{repository.replace('/', '--')}"
    snapshots = folder / "snapshots"
    if not snapshots.is_dir():
        return None
    commit = revision if COMMIT.match(revision) else _recorded_commit(folder, revision)
    if commit is not None:
        chosen = snapshots / commit
        return chosen if chosen.is_dir() else None
    if revision != "main" or (folder / "refs" / "main").exists():
        return None
    found = [path for path in snapshots.iterdir() if path.is_dir()]
    return found[0] if len(found) == 1 else None


def _recorded_commit(folder: Path, revision: str) -> str | None:
    ref = folder / "refs" / revision
    try:
        commit = ref.read_text(encoding="ascii").strip() if ref.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return None
    return commit if COMMIT.match(commit) else None


@dataclass(frozen=True)
class CachedModel:
    repository: str  # ORG/NAME
    snapshot: Path
    model_type: str | None  # from config.json; None when it has none or cannot be read
    weights: str  # "safetensors", "gguf" (a repository of GGUF files), "pickle only" (refused) or "none"
    tokenizer: bool  # whether tokenizer.json is there
    config_problem: str | None = None  # why config.json names no model_type, where it is there but says none


def cached_models(cache: Path | None = None) -> list[CachedModel]:
    """Every model repository in `cache` (default: each of `caches()`) with a snapshot of the main branch (or its
    only snapshot), sorted; a repository in two caches is listed from the first."""
    if cache is None:
        found: dict[str, CachedModel] = {}
        for root in caches():
            for model in cached_models(root):
                found.setdefault(model.repository, model)
        return [found[name] for name in sorted(found)]
    root = cache
    found = []
    try:
        if not root.is_dir():
            return []
        folders = sorted(root.glob("models--*--*"))
    except OSError:
        return []
    for folder in folders:
        repository = folder.name.removeprefix("models--").replace("--", "/", 1)
        try:  # an entry that cannot be read is left out; the others are still listed
            snapshot = cached_snapshot(repository, root)
            if snapshot is not None:
                kind, problem = _model_type(snapshot)
                found.append(CachedModel(repository, snapshot, kind, _weights(snapshot),
                                         (snapshot / "tokenizer.json").is_file(), problem))
        except OSError:
            continue
    return found


def _model_type(snapshot: Path) -> tuple[str | None, str | None]:
    """config.json's model_type, or None and why where the file is there but names none (None: no file)."""
    path = snapshot / "config.json"
    try:  # a regular file only: a FIFO would block the read forever
        if not path.is_file():  # a link to a blob not there (a download not finished), a loop of links, a FIFO
            return None, ("config.json is not a readable file" if os.path.lexists(path) else None)
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return None, f"config.json cannot be read ({exc.strerror or exc})"
    except (ValueError, RecursionError):
        return None, "config.json is not readable JSON"
    kind = config.get("model_type") if isinstance(config, dict) else None
    return (kind, None) if isinstance(kind, str) else (None, "config.json names no model_type")


def _weights(snapshot: Path) -> str:
    if any(snapshot.glob("*.safetensors")):
        return "safetensors"
    if gguf_files(snapshot):  # TheBloke's and others' GGUF repositories carry a config.json too
        return "gguf"
    if any(snapshot.glob("*.bin")) or any(snapshot.glob("*.pt")):
        return "pickle only"
    return "none"


NOT_MODELS = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")
"""GGUF files in a repository that are not a model llama.cpp would run (projectors, importance matrices, draft
heads), as llama.cpp's `-hf` passes them over."""
_SPLIT = re.compile(r"^(.+)-([0-9]{5})-of-([0-9]{5})$", re.IGNORECASE)
_TAG = re.compile(r"[-.]([A-Z0-9_]+)$", re.IGNORECASE)


def gguf_files(snapshot: Path) -> list[Path]:
    """The model GGUF files of a snapshot (in subfolders too), sorted by their path in it."""
    try:
        found = sorted(snapshot.rglob("*.gguf"))
    except OSError:
        return []
    return [path for path in found if not any(word in path.name for word in NOT_MODELS)
            and _split_part(path) in (None, 1)  # of a split file, its first part stands for it
            and file_or_unknown(path)]  # a FIFO named .gguf would block whoever opens it


def file_or_unknown(path: Path) -> bool:
    """Path.is_file, but True where the system will not say (a folder this user may list but not enter, as
    `chmod -R 644` leaves one): the file is listed, and reading it says why it cannot be used, rather than a
    PermissionError ending the whole listing."""
    try:
        return path.is_file()
    except OSError:
        return True


def _split_part(file: Path) -> int | None:
    split = _SPLIT.match(file.name[:-len(".gguf")])
    return int(split.group(2)) if split else None


def quant_tag(file: Path) -> str:
    """The quantization a GGUF file's name ends with, as llama.cpp reads it (`qwen2.5-coder-1.5b-q8_0.gguf`:
    Q8_0; `X-Q4_K_M-00001-of-00002.gguf`: Q4_K_M); "" where it names none."""
    stem = file.name[:-len(".gguf")] if file.name.lower().endswith(".gguf") else file.name
    split = _SPLIT.match(stem)
    found = _TAG.search(split.group(1) if split else stem)
    return found.group(1).upper() if found else ""


def _bits(tag: str) -> int:
    """Q8_0: 8, F16: 16, Q4_K_M: 4; 0 where the tag names no width."""
    digits = re.search(r"[0-9]+", tag)
    return int(digits.group()) if digits else 0


def pick_gguf(files: list[Path], tag: str, repository: str) -> Path:
    """The file `tag` picks, as llama.cpp's `-hf REPO:TAG` picks it (the first whose name has TAG followed by "."
    or "-", in any case); with no tag the one file, or of several the widest (F16 before Q8_0 before Q4_K_M), since
    the bundle is quantized to INT8 anyway and a narrower file only adds its own rounding. ValueError naming the
    files otherwise."""
    if not files:
        raise ValueError(f"{repository}: the cached snapshot holds no config.json and no GGUF file")
    names = ", ".join(quant_tag(path) or path.name for path in files)
    if tag:
        pattern = re.compile(re.escape(tag) + "[.-]", re.IGNORECASE)
        chosen = [path for path in files if pattern.search(path.name)]
        if not chosen:
            raise ValueError(f"{repository}: no cached GGUF file is tagged {tag!r} (cached: {names})")
        return chosen[0]
    return max(files, key=lambda path: _bits(quant_tag(path)))  # max keeps the first of equals
