"""Checkpoints already on this machine in the Hugging Face cache, found by their repository id.

Users of transformers, the Hugging Face CLI or an editor plugin often have code models downloaded already, under
`~/.cache/huggingface/hub/models--ORG--NAME/snapshots/COMMIT/`. `completer convert ORG/NAME` reads such a
snapshot, and `completer models` lists what the cache holds and whether it converts. Only the cache's files are
read: nothing is downloaded, and huggingface_hub is not needed.
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
    weights: str  # "safetensors", "pickle only" (refused by the converter) or "none"
    tokenizer: bool  # whether tokenizer.json is there


def cached_models(cache: Path | None = None) -> list[CachedModel]:
    """Every model repository in the cache with a snapshot of the main branch (or its only snapshot), sorted."""
    root = cache or hub_cache()
    if not root.is_dir():
        return []
    found = []
    try:
        folders = sorted(root.glob("models--*--*"))
    except OSError:
        return []
    for folder in folders:
        repository = folder.name.removeprefix("models--").replace("--", "/", 1)
        try:  # an entry that cannot be read is left out; the others are still listed
            snapshot = cached_snapshot(repository, root)
            if snapshot is not None:
                found.append(CachedModel(repository, snapshot, _model_type(snapshot), _weights(snapshot),
                                         (snapshot / "tokenizer.json").is_file()))
        except OSError:
            continue
    return found


def _model_type(snapshot: Path) -> str | None:
    try:
        config = json.loads((snapshot / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    kind = config.get("model_type") if isinstance(config, dict) else None
    return kind if isinstance(kind, str) else None


def _weights(snapshot: Path) -> str:
    if any(snapshot.glob("*.safetensors")):
        return "safetensors"
    if any(snapshot.glob("*.bin")) or any(snapshot.glob("*.pt")):
        return "pickle only"
    return "none"
