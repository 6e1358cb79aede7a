"""Models Tabby has downloaded, found by the model id `tabby serve --model` takes.

Tabby keeps each model under `MODELS/ORG/NAME/`: the GGUF file llama.cpp runs in `ggml/`, named
`model-00001-of-0000N.gguf` (`ggml/model.gguf` before Tabby 0.11), and `tabby.json`, the registry's entry for the
model, which names the file's sha256. `completer convert tabby:ORG/NAME` reads that file after checking it. Only
Tabby's files are read: Tabby need not be running, and nothing is downloaded.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .types import ModelError

PREFIX = "tabby:"
DEFAULT_ORG = "TabbyML"
PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")  # one part of an id; never "..", never a separator
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class TabbyError(ModelError):
    """Why a Tabby model cannot be read, in one line."""


def models_dir() -> Path:
    """Where Tabby keeps models, as Tabby looks: TABBY_MODEL_CACHE_ROOT, else TABBY_ROOT/models, else
    ~/.tabby/models."""
    if os.environ.get("TABBY_MODEL_CACHE_ROOT"):
        return Path(os.environ["TABBY_MODEL_CACHE_ROOT"]).expanduser()
    root = Path(os.environ["TABBY_ROOT"]).expanduser() if os.environ.get("TABBY_ROOT") else Path.home() / ".tabby"
    return root / "models"


@dataclass(frozen=True)
class TabbyModel:
    model_id: str  # ORG/NAME
    gguf: Path | None  # the file Tabby runs; None where the folder has none
    sha256: str | None  # what tabby.json says it is, where it says

    @property
    def source(self) -> str:
        """What `completer convert` takes to read this model."""
        return PREFIX + self.model_id


def parse_id(model_id: str) -> tuple[str, str]:
    """(ORG, NAME) of a model id as Tabby reads it: `StarCoder-1B` is TabbyML's."""
    parts = model_id.split("/")
    if len(parts) > 2 or not all(PART.match(part) for part in parts):
        raise TabbyError(f"{model_id!r} is not a Tabby model id (NAME or ORG/NAME)")
    return (DEFAULT_ORG, parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def find(model_id: str, root: Path | None = None) -> TabbyModel:
    """The model `model_id` names, with its GGUF file; TabbyError naming the folder when Tabby has not
    downloaded it, or not all of it."""
    org, name = parse_id(model_id)
    folder = (root or models_dir()) / org / name
    if not folder.is_dir():
        raise TabbyError(f"Tabby has no model {org}/{name} in {folder.parent.parent} (`tabby download --model "
                         f"{org}/{name}` fetches it; TABBY_MODEL_CACHE_ROOT names another folder)")
    model = _read(folder, f"{org}/{name}")
    if model.gguf is None:
        raise TabbyError(f"Tabby's {model.model_id} has no GGUF file in its ggml folder (a download not finished?)")
    return model


def _read(folder: Path, model_id: str) -> TabbyModel:
    store = folder / "ggml"
    try:
        entries = [path for path in [*sorted(store.glob("model-00001-of-*.gguf")), store / "model.gguf"]
                   if path.is_file()]  # regular files only: a FIFO would block whoever opens it
    except OSError:
        entries = []
    return TabbyModel(model_id, entries[0] if entries else None, _recorded_sha256(folder / "tabby.json"))


def _recorded_sha256(info: Path) -> str | None:
    """The entry file's sha256 as tabby.json records it: `sha256`, or the first of `partition_urls`."""
    try:  # a regular file only: a FIFO would block the read forever
        entry = json.loads(info.read_text(encoding="utf-8")) if info.is_file() else None
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict):
        return None
    found = entry.get("sha256")
    partitions = entry.get("partition_urls")
    if not found and isinstance(partitions, list) and partitions and isinstance(partitions[0], dict):
        found = partitions[0].get("sha256")
    return found.lower() if isinstance(found, str) and SHA256.match(found.lower()) else None


def installed(root: Path | None = None) -> list[TabbyModel]:
    """Every model folder Tabby has, sorted by id."""
    base = root or models_dir()
    try:
        folders = sorted(path for path in base.glob("*/*") if _is_dir(path / "ggml"))
    except OSError:
        return []
    return [_read(folder, f"{folder.parent.name}/{folder.name}") for folder in folders]


def _is_dir(path: Path) -> bool:
    """Path.is_dir, with a folder this user may list but not enter left out rather than ending the listing."""
    try:
        return path.is_dir()
    except OSError:
        return False


def gguf_path(model: TabbyModel) -> Path:
    """The GGUF file of a model `find` gave, checked against the sha256 tabby.json names (where it names one)."""
    from .bundle import sha256_file

    assert model.gguf is not None, "find() gives only models with a GGUF file"
    if model.sha256 is not None:
        try:
            actual = sha256_file(model.gguf)
        except OSError as exc:
            raise TabbyError(f"Tabby's {model.model_id}: {model.gguf} cannot be read ({exc.strerror or exc})") from exc
        if actual != model.sha256:
            raise TabbyError(f"Tabby's {model.model_id}: {model.gguf} does not match the sha256 its tabby.json names "
                             f"({actual}, expected {model.sha256}); `tabby download --model {model.model_id}` fetches "
                             "it again")
    return model.gguf
