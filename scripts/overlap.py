"""An eval.py run's rates, or the paired differences of two, by how much of each validation file the training
split holds.

The split into train and validation is by file, but a validation file can still be a near copy of a
training file (transformers copies whole modules from model to model; the stdlib's encodings/cp858.py
is cp850.py with a few rows changed). Whatever remembers the training text does best on those. This
measures each validation file's overlap as the share of its 32-token windows that occur anywhere in
the training tokens, then splits the positions of two `eval.py --outcomes-out` files by it, so a gain
on code the model has not seen can be told apart from recall of near copies.

    python scripts/overlap.py RUN.json                          # the rates per group (the first shard's splits)
    python scripts/overlap.py NEW.json OLD.json                 # the paired differences per group
    python scripts/overlap.py NEW.json OLD.json --val-dir $C/corpus-2 --train-dir $C/corpus --train-dir $C/corpus-2
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from paths import corpus_dir  # noqa: E402
from shards import file_spans  # noqa: E402

WINDOW = 32
_STEP = np.uint64(0x9E3779B97F4A7C15)  # the polynomial hash's base (odd)
GROUPS = ((0.0, 0.05), (0.05, 0.2), (0.2, 1.01))
METRICS = ("exact1", "exact5", "line_edit_sim")


def window_hashes(tokens: np.ndarray) -> np.ndarray:
    """[N] a 64-bit hash of the WINDOW tokens ending at each place (the first WINDOW - 1 are partial)."""
    t = tokens.astype(np.uint64)
    h = np.zeros(len(t), np.uint64)
    weight = np.uint64(1)
    with np.errstate(over="ignore"):
        for back in range(min(WINDOW, len(t))):  # a split shorter than a window has none whole
            h[back:] += t[:len(t) - back] * weight  # the token `back` places before each place
            weight *= _STEP
    return h


def file_overlaps(val_dir: Path, train_dirs: list[Path]) -> dict[str, float]:
    """Per validation file ("origin:path", as eval.py names it): the share of its 32-token windows found in
    the training tokens."""
    seen = np.unique(np.concatenate([window_hashes(np.fromfile(d / "train.bin", dtype=np.uint16))[WINDOW - 1:]
                                     for d in train_dirs]))  # [W] sorted
    val = np.fromfile(val_dir / "val.bin", dtype=np.uint16)
    found = np.isin(window_hashes(val), seen)  # [N] the window ending at each place
    records, starts, ends = file_spans(val_dir, "val")
    return {f"{r['origin']}:{r['path']}": float(found[a + WINDOW - 1:b].mean()) if b >= a + WINDOW else 0.0
            for r, a, b in zip(records, starts, ends)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("new", type=Path)
    parser.add_argument("old", type=Path, nargs="?", default=None)
    parser.add_argument("--val-dir", type=Path, default=None, help="the shard whose val split both runs used")
    parser.add_argument("--train-dir", type=Path, action="append", help="shards whose train split counts "
                        "(default: the first shard)")
    args = parser.parse_args()
    new = json.loads(args.new.read_text())
    old = json.loads(args.old.read_text()) if args.old else None
    if old is not None and new["positions"] != old["positions"]:
        sys.exit("overlap.py: the two runs are not on the same positions")
    val_dir, train_dirs = args.val_dir or corpus_dir(), args.train_dir or [corpus_dir()]
    missing = [str(f) for f in (val_dir / "val.bin", val_dir / "val.jsonl", *(d / "train.bin" for d in train_dirs))
               if not f.is_file()]
    if missing:
        sys.exit(f"overlap.py: no {', '.join(missing)} (build the corpus with scripts/corpus.py and tokenizer.py)")
    overlap = file_overlaps(val_dir, train_dirs)
    unknown = {path for path, *_ in new["positions"]} - overlap.keys()
    if unknown:
        sys.exit(f"overlap.py: {len(unknown)} files of the run are not in that validation split "
                 f"(e.g. {min(unknown)}): pass the run's --val-dir")
    share = np.array([overlap[path] for path, *_ in new["positions"]])
    what = "old, new − old (95 %)" if old else "rate (95 %)"
    print("| files whose 32-token windows occur in training | positions | "
          + " | ".join(f"{m}: {what}" for m in METRICS) + " |")
    print("|---|---|" + "---|" * len(METRICS))
    for low, high in (*GROUPS, (0.0, 1.01)):
        chosen = (share >= low) & (share < high)
        cells = []
        for metric in METRICS:
            a = np.array(new["outcomes"][metric])[chosen] * 100
            if old is None:
                cells.append(f"{a.mean():.1f} % ± {half_width(a):.1f}")
                continue
            b = np.array(old["outcomes"][metric])[chosen] * 100
            cells.append(f"{b.mean():.1f} %, {(a - b).mean():+.2f} ± {half_width(a - b):.2f}")
        label = "all" if (low, high) == (0.0, 1.01) else f"{low:.0%} to {min(high, 1):.0%}"
        print(f"| {label} | {chosen.sum()} | " + " | ".join(cells) + " |")


def half_width(values: np.ndarray) -> float:
    """Of the 95 % interval of the mean (normal approximation), as eval.py gives it."""
    return 1.96 * values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")


if __name__ == "__main__":
    main()
