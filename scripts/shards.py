"""Corpus shards: the first corpus ("corpus") plus later ones ("corpus-2", ...) built from releases the
earlier ones lack, so training can go on past an epoch without repeating tokens. A training state
keeps one cursor per shard, by the shard dir's name."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paths import CORPUS_NAME, corpus_dir  # noqa: E402


def corpus_shards() -> dict[str, Path]:
    """Every built shard in the cache dir by name, in order: the first shard, then corpus-2, corpus-3..."""
    first = corpus_dir()
    later = sorted(first.parent.glob(f"{first.name}-*"), key=lambda p: (len(p.name), p.name))
    return {path.name: path for path in [first, *later] if (path / "summary.json").exists()}


def shard_cursors(state: dict) -> dict[str, int]:
    """The state's cursors (windows consumed) by shard name. A state from before shards kept one
    "cursor", into the first shard; it moves into "cursors" here."""
    cursors = state.setdefault("cursors", {})
    if "cursor" in state:
        cursors.setdefault(CORPUS_NAME, state.pop("cursor"))
    return cursors


def parse_shard(spec: str) -> tuple[Path, float]:
    """"DIR" or "DIR:WEIGHT" (weight > 0, default 1); a colon not followed by a number is part of DIR."""
    path, _, weight = spec.rpartition(":")
    try:
        value = float(weight)
    except ValueError:
        return Path(spec), 1.0
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{spec}: the weight must be above 0")
    return Path(path), value
