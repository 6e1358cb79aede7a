"""Where the build pipeline keeps its large, regenerable artefacts (never in git)."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """The user cache dir for corpus, token arrays and checkpoints; COMPLETER_CACHE overrides it."""
    import appdirs  # here, not at the top: the GPU machine's Python has no appdirs and never asks for it

    root = Path(os.environ.get("COMPLETER_CACHE") or appdirs.user_cache_dir("completer"))
    root.mkdir(parents=True, exist_ok=True)
    return root


CORPUS_NAME = "corpus"  # the first corpus shard's dir; later shards add "-2", "-3"...


def corpus_dir() -> Path:
    path = cache_dir() / CORPUS_NAME
    path.mkdir(parents=True, exist_ok=True)
    return path
