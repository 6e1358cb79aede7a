"""How much the workspace could add at most: the held-out positions whose line is written, word for word,
in another file of the same package and nowhere above the cursor in its own file.

Those are the lines that only the repository can supply verbatim. If the workspace setting got every one of
them right and lost none of the others, exact@1 would rise over the in-file setting by at most the share of
those positions that the in-file setting missed (plus whatever partial context helps beyond verbatim lines).
It reads two runs of `scripts/eval.py --packages --outcomes-out` on the same positions, one in-file and one
with `--workspace`, and the held-out files they were drawn from:

    python scripts/workspace_ceiling.py --in-file docs/experiments/2026-11-25-convert/eval-infile.json \\
        --workspace docs/experiments/2026-11-25-convert/eval-workspace.json --out ceiling.json
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout import heldout_val  # noqa: E402


def package_lines(files: dict[str, str]) -> dict[str, dict[str, set[str]]]:
    """Per package, each stripped line and the files that hold it."""
    holders: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for key, text in files.items():
        package = key.split(":", 1)[0]
        for line in text.split("\n"):
            holders[package][line.strip()].add(key)
    return holders


def ceiling(files: dict[str, str], positions: list, in_file: list[float], workspace: list[float]) -> dict:
    """Counts over the positions: how many lines only another file of the package holds verbatim, and how many
    of those each setting got right at exact@1."""
    holders = package_lines(files)
    counts = {"positions": len(positions), "in_file_exact1": int(sum(in_file)),
              "workspace_exact1": int(sum(workspace)), "elsewhere_only": 0, "elsewhere_only_in_file_right": 0,
              "elsewhere_only_workspace_right": 0, "elsewhere_too": 0}
    for (path, line, _column, _kind), plain, with_workspace in zip(positions, in_file, workspace, strict=True):
        lines = files[path].split("\n")
        actual = lines[line].strip()
        others = holders[path.split(":", 1)[0]][actual] - {path}
        if not others:
            continue
        if actual in {above.strip() for above in lines[:line]}:
            counts["elsewhere_too"] += 1  # the file itself holds it above the cursor
            continue
        counts["elsewhere_only"] += 1
        counts["elsewhere_only_in_file_right"] += int(plain)
        counts["elsewhere_only_workspace_right"] += int(with_workspace)
    n = counts["positions"]
    counts["max_gain_points"] = round(100 * (counts["elsewhere_only"] - counts["elsewhere_only_in_file_right"]) / n, 1)
    counts["gain_points"] = round(100 * (counts["workspace_exact1"] - counts["in_file_exact1"]) / n, 1)
    counts["gain_on_elsewhere_only_points"] = round(
        100 * (counts["elsewhere_only_workspace_right"] - counts["elsewhere_only_in_file_right"]) / n, 1)
    return counts


def read_files(val: Path) -> dict[str, str]:
    with open(val) as handle:
        return {f"{row['origin']}:{row['path']}": row["text"] for row in map(json.loads, handle)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-file", type=Path, required=True, help="eval.py --outcomes-out of the in-file run")
    parser.add_argument("--workspace", type=Path, required=True, help="the same positions' --workspace run")
    parser.add_argument("--out", type=Path, default=None, help="write the counts here (JSON)")
    args = parser.parse_args()
    runs = []
    for path in (args.in_file, args.workspace):
        try:
            saved = json.loads(path.read_text())
            runs.append((saved["positions"], saved["outcomes"]["exact1"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            sys.exit(f"workspace_ceiling.py: {path}: not outcomes written by eval.py --outcomes-out ({error})")
    if runs[0][0] != runs[1][0]:
        sys.exit("workspace_ceiling.py: the two runs are not on the same positions")
    counts = ceiling(read_files(heldout_val()), runs[0][0], runs[0][1], runs[1][1])
    counts["command"] = "python scripts/workspace_ceiling.py " + " ".join(sys.argv[1:])
    print(json.dumps(counts, indent=1))
    if args.out:
        args.out.write_text(json.dumps(counts, indent=1) + "\n")


if __name__ == "__main__":
    main()
