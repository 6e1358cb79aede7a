"""Medians of alternating `scripts/bench_lsp.py` runs, and each variant's p95 against the first one's.

The runs are saved one per line as `LABEL: | table row |` (bench_lsp.py's row, prefixed with the variant's
label), in the order they ran; lines of any other form are skipped. `--after TEXT` reads only what follows
the first line that starts with TEXT (a file that holds several experiments), and `--until TEXT` only what
comes before the next such line after it. The per-round ratio pairs each
variant's n-th run with the first variant's n-th: the machine's drift cancels within a round.

    python scripts/replay_medians.py docs/experiments/2026-11-27-workspace/replay-workspace.txt --after "# ten"
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

COLUMNS = {"first_ms": 4, "p50_ms": 5, "p95_ms": 6, "mean_ms": 8}  # in bench_lsp.py's row, split at "|"


def read_runs(lines: list[str]) -> dict[str, dict[str, list[float]]]:
    """Per label, each column's values in run order."""
    runs: dict[str, dict[str, list[float]]] = {}
    for line in lines:
        label, _, row = line.partition(":")
        cells = [cell.strip() for cell in row.split("|")]
        if not row.strip().startswith("|") or len(cells) <= max(COLUMNS.values()):
            continue
        try:
            values = {name: float(cells[index]) for name, index in COLUMNS.items()}
        except ValueError:
            continue
        for name, value in values.items():
            runs.setdefault(label.strip(), {}).setdefault(name, []).append(value)
    return runs


def summary(runs: dict[str, dict[str, list[float]]]) -> list[str]:
    """A markdown table: each label's medians, and its p95 against the first label's."""
    if not runs:
        return ["no runs found"]
    labels = list(runs)
    base = runs[labels[0]]["p95_ms"]
    rows = ["| variant | runs | first ms | p50 ms | p95 ms | mean ms | p95 / first variant's (medians) "
            "| p95 / first variant's (median of per-round ratios) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label in labels:
        columns = runs[label]
        p95 = columns["p95_ms"]
        per_round = [a / b for a, b in zip(p95, base)]
        rows.append(f"| {label} | {len(p95)} | " + " | ".join(f"{statistics.median(columns[name]):.2f}"
                                                              for name in COLUMNS)
                    + f" | {statistics.median(p95) / statistics.median(base):.3f} | {statistics.median(per_round):.3f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="the saved runs")
    parser.add_argument("--after", default=None, help="read only what follows the first line starting with this")
    parser.add_argument("--until", default=None,
                        help="and only what comes before the next line starting with this (one block of several)")
    args = parser.parse_args()
    try:
        lines = args.runs.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        sys.exit(f"replay_medians.py: {args.runs}: cannot be read ({error})")
    if args.after is not None:
        starts = [i for i, line in enumerate(lines) if line.startswith(args.after)]
        if not starts:
            sys.exit(f"replay_medians.py: no line of {args.runs} starts with {args.after!r}")
        lines = lines[starts[0] + 1:]
    if args.until is not None:
        ends = [i for i, line in enumerate(lines) if line.startswith(args.until)]
        lines = lines[:ends[0]] if ends else lines
    print("\n".join(summary(read_runs(lines))))


if __name__ == "__main__":
    main()
