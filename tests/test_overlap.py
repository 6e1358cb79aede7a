"""scripts/overlap.py: how much of each validation file the training split holds, and the paired table."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from overlap import file_overlaps  # noqa: E402


def write_split(directory: Path, split: str, files: dict[str, list[int]], texts: dict[str, str] | None = None
                ) -> None:
    """Token arrays as tokenizer.py writes them, an end marker (0) after each file, and the jsonl beside."""
    directory.mkdir(exist_ok=True)
    tokens = [t for body in files.values() for t in [*body, 0]]
    np.array(tokens, dtype=np.uint16).tofile(directory / f"{split}.bin")
    with (directory / f"{split}.jsonl").open("w") as out:
        for name in files:
            origin, path = name.split(":")
            text = (texts or {}).get(name, "code")
            out.write(json.dumps({"origin": origin, "path": path, "text": text}) + "\n")


def test_a_file_that_spells_the_end_marker_keeps_its_bounds(tmp_path: Path):
    from shards import file_spans

    write_split(tmp_path, "val", {"pkg:a.py": [5, 6], "pkg:eot.py": [7, 0, 8], "pkg:b.py": [9]},
                {"pkg:eot.py": "s = '<|endoftext|>'"})
    records, starts, ends = file_spans(tmp_path, "val")
    assert [r["path"] for r in records] == ["a.py", "eot.py", "b.py"] and "text" not in records[0]
    assert starts.tolist() == [0, 3, 7] and ends.tolist() == [2, 6, 8]


def test_a_copied_file_overlaps_wholly_and_a_new_one_not_at_all(tmp_path: Path):
    rng = np.random.default_rng(0)
    shared, novel, half = (rng.integers(1, 8000, 200).tolist() for _ in range(3))
    write_split(tmp_path, "train", {"pkg:a.py": shared, "pkg:b.py": half[:100]})
    write_split(tmp_path, "val", {"pkg:copy.py": shared, "pkg:new.py": novel, "pkg:half.py": half})
    overlap = file_overlaps(tmp_path, [tmp_path])
    assert overlap["pkg:copy.py"] == 1.0 and overlap["pkg:new.py"] == 0.0
    assert 0.3 < overlap["pkg:half.py"] < 0.5  # its first 100 tokens, less the windows that run past them


def overlap_table(tmp_path: Path, runs: dict[str, list[float]]) -> dict[str, list[str]]:
    """overlap.py's table, by group label, for `runs` (name: exact outcomes at a copied file's position,
    then a new file's, twice over) over a training split that holds the copied file."""
    rng = np.random.default_rng(1)
    shared, novel = (rng.integers(1, 8000, 100).tolist() for _ in range(2))
    write_split(tmp_path, "train", {"pkg:a.py": shared})
    write_split(tmp_path, "val", {"pkg:copy.py": shared, "pkg:new.py": novel})
    positions = [["pkg:copy.py", 1, 0, "line-start"], ["pkg:new.py", 1, 0, "line-start"]] * 2
    for name, exact in runs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps({"positions": positions, "outcomes": {
            m: exact for m in ("exact1", "exact5", "line_edit_sim")}}))
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "overlap.py"),
                           *(str(tmp_path / f"{name}.json") for name in runs),
                           "--val-dir", str(tmp_path), "--train-dir", str(tmp_path)],
                          capture_output=True, text=True, check=True)
    return {line.split("|")[1].strip(): line.split("|")[2:] for line in done.stdout.splitlines()[2:]}


def test_the_table_pairs_two_runs_by_overlap(tmp_path: Path):
    rows = overlap_table(tmp_path, {"new": [1.0, 1.0, 1.0, 1.0], "old": [0.0, 0.0, 0.0, 1.0]})
    assert rows["0% to 5%"][0].strip() == "2" and "+50.00" in rows["0% to 5%"][1]  # new.py: 0 → 1 once
    assert rows["20% to 100%"][0].strip() == "2" and "+100.00" in rows["20% to 100%"][1]  # copy.py: 0 → 1 twice


def test_one_run_gives_its_rates_per_group(tmp_path: Path):
    rows = overlap_table(tmp_path, {"run": [1.0, 0.0, 1.0, 1.0]})
    assert rows["0% to 5%"][1].strip().startswith("50.0 %") and rows["20% to 100%"][1].strip().startswith("100.0 %")
    assert rows["all"][1].strip().startswith("75.0 %")


def test_a_run_from_another_split_or_a_missing_corpus_is_refused_clearly(tmp_path: Path):
    write_split(tmp_path, "train", {"pkg:a.py": [5, 6, 7]})
    write_split(tmp_path, "val", {"pkg:b.py": [5, 6, 7]})
    (tmp_path / "run.json").write_text(json.dumps({"positions": [["other:c.py", 1, 0, "mid-line"]],
                                                   "outcomes": {m: [1.0] for m in ("exact1", "exact5", "line_edit_sim")}}))
    command = [sys.executable, str(REPO / "scripts" / "overlap.py"), str(tmp_path / "run.json")]
    done = subprocess.run([*command, "--val-dir", str(tmp_path), "--train-dir", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "not in that validation split" in done.stderr
    done = subprocess.run([*command, "--val-dir", str(tmp_path / "nowhere"), "--train-dir", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "nowhere/val.bin" in done.stderr and "Traceback" not in done.stderr
