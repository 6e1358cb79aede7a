"""scripts/bench_llamacpp.py --ratios: saved runs of two checkouts side by side, a row each and each one's median."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import bench_llamacpp  # noqa: E402
from bench_llamacpp import ratios_table  # noqa: E402


def _run(path: Path, step_ours: float, step_theirs: float) -> Path:
    medians = {name: {"ours": 1.0, "llama.cpp": 2.0, "ours_over_llama_cpp": 0.5} for name in ("prefill", "line")}
    medians["decode_step"] = {"ours": step_ours, "llama.cpp": step_theirs,
                              "ours_over_llama_cpp": round(step_ours / step_theirs, 2)}
    path.write_text(json.dumps({"medians_ms": medians}))
    return path


def test_each_run_is_a_row_and_runs_of_the_same_code_get_their_median(tmp_path: Path):
    old = [_run(tmp_path / f"old-{i}.json", ours, 8.0) for i, ours in enumerate((10.0, 12.0, 9.0), 1)]
    new = [_run(tmp_path / "new-1.json", 8.0, 8.0)]
    lines = ratios_table([*old, *new]).splitlines()
    assert lines[2].startswith("| old-1 | 0.5× | 1.25× | 0.5× | 10.0 | 8.0 |")
    assert lines[5].startswith("| new-1 | 0.5× | 1.0× |")
    assert lines[6] == "| **old, median of 3** | 0.50× | 1.25× | 0.50× | 10.00 | 8.00 |"
    assert len(lines) == 7  # one run of the new code: no median row for it


def test_a_file_that_is_not_results_is_one_line_and_a_nonzero_exit(tmp_path: Path):
    import subprocess

    script = Path(__file__).resolve().parent.parent / "scripts" / "bench_llamacpp.py"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for path in (bad, tmp_path / "missing.json"):
        done = subprocess.run([sys.executable, str(script), "--ratios", str(path)], capture_output=True, text=True)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "--ratios: not results written by --out" in done.stderr.splitlines()[-1]


def test_a_bundle_converted_by_other_code_is_converted_again(tmp_path: Path, monkeypatch):
    """The bundle in --work is reused only while the converter's code is the one that wrote it."""
    converted: list[list[str]] = []

    def convert(cmd, check):
        converted.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "manifest.json").write_text("{}")

    monkeypatch.setattr(bench_llamacpp.subprocess, "run", convert)
    work = tmp_path / "work"
    bench_llamacpp.make_bundle(tmp_path / "src", work / "bundle")
    bench_llamacpp.make_bundle(tmp_path / "src", work / "bundle")
    assert len(converted) == 1  # the same code: reused
    (work / "converted-by").write_text("an older converter")
    bench_llamacpp.make_bundle(tmp_path / "src", work / "bundle")
    assert len(converted) == 2 and (work / "converted-by").read_text() == bench_llamacpp.converter_digest()


def test_no_decode_steps_is_one_line_and_exit_2(monkeypatch, capsys):
    import pytest

    monkeypatch.setattr(sys, "argv", ["bench_llamacpp.py", "--source", "src", "--llama-cpp", "tree", "--steps", "0"])
    with pytest.raises(SystemExit) as stop:
        bench_llamacpp.main()
    assert stop.value.code == 2 and "--steps must be at least 1" in capsys.readouterr().err
