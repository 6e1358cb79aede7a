"""Corpus shards: the first corpus ("corpus") plus later ones ("corpus-2", ...) built from releases the
earlier ones lack, so training can go on past an epoch without repeating tokens. A training state
keeps one cursor per shard, by the shard dir's name."""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from paths import CORPUS_NAME, corpus_dir  # noqa: E402

from completer.tokens import END_OF_TEXT  # noqa: E402

END_OF_TEXT_ID = 0  # tokenizer.py's file separator


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


def file_spans(corpus: Path, split: str) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """The files of a split (their jsonl records without the text) and where each one's tokens begin and
    end in `{split}.bin`. tokenizer.py writes each file's tokens then <|endoftext|>, and a file that
    spells that marker in its text holds the same token inside it, so the ends are counted, not found."""
    records, markers = [], []
    with (corpus / f"{split}.jsonl").open() as lines:
        for line in lines:
            record = json.loads(line)
            markers.append(record.pop("text").count(END_OF_TEXT) + 1)
            records.append(record)
    tokens = np.fromfile(corpus / f"{split}.bin", dtype=np.uint16)
    zeros = np.flatnonzero(tokens == END_OF_TEXT_ID)
    if len(zeros) != sum(markers):
        raise SystemExit(f"{corpus}: {split}.bin and {split}.jsonl hold different files")
    ends = zeros[np.cumsum(markers) - 1]  # [F] each file's closing marker
    return records, np.r_[0, ends[:-1] + 1], ends
