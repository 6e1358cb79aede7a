"""scripts/bench_load.py's own checks and tables, which need no server: a --settings that is not a JSON object
and --runs over files that are not its results are one line and exit 2; --runs puts runs of two checkouts side
by side with each one's medians."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import bench_load


def result(idle_p95: float, load_p95: float) -> dict:
    return {"idle": {"p50_ms": 2.0, "p95_ms": idle_p95}, "load": {"p50_ms": 4.0, "p95_ms": load_p95},
            "p95_ratio_load_over_idle": round(load_p95 / idle_p95, 3)}


def test_runs_of_two_checkouts_get_a_row_each_and_a_median_per_checkout(tmp_path: Path, capsys):
    files = []
    for name, idle, load in (("old-1", 20, 36), ("new-1", 20, 24), ("old-2", 20, 30), ("new-2", 25, 30),
                             ("old-3", 24, 36), ("new-3", 20, 26)):
        files.append(tmp_path / f"load-{name}.json")
        files[-1].write_text(json.dumps(result(idle, load)))
    assert bench_load.main(["--runs", *map(str, files)]) == 0
    rows = capsys.readouterr().out.strip().split("\n")
    assert len(rows) == 2 + 6 + 2 and rows[2].startswith("| load-old-1 | 2.0 | 20 | 4.0 | 36 | 1.8× |")
    assert rows[-2] == "| **load-old, median of 3** | 2.00 | 20.00 | 4.00 | 36.00 | 1.500× |"
    assert rows[-1] == "| **load-new, median of 3** | 2.00 | 20.00 | 4.00 | 26.00 | 1.200× |"


@pytest.mark.parametrize("argv, message", [
    (["--settings", "[1]"], "--settings: not a JSON object"),
    (["--settings", "{"], "--settings: not a JSON object"),
    (["--runs", "/nonexistent/load.json"], "--runs: not results written by --out"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        bench_load.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and "Traceback" not in err


def test_runs_over_a_file_of_another_script_is_one_line(tmp_path: Path, capsys):
    other = tmp_path / "other-1.json"
    other.write_text(json.dumps({"medians_ms": {}}))
    with pytest.raises(SystemExit) as stop:
        bench_load.main(["--runs", str(other)])
    assert stop.value.code == 2 and "--runs: not results written by --out" in capsys.readouterr().err
