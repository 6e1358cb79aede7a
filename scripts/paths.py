"""Where the build pipeline keeps its large, regenerable artefacts (never in git)."""
from __future__ import annotations

import os
from pathlib import Path

import appdirs

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """The user cache dir for corpus, token arrays and checkpoints; COMPLETER_CACHE overrides it."""
    root = Path(os.environ.get("COMPLETER_CACHE") or appdirs.user_cache_dir("completer"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def corpus_dir() -> Path:
    path = cache_dir() / "corpus"
    path.mkdir(parents=True, exist_ok=True)
    return path

