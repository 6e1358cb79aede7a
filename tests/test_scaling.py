"""scripts/scaling.py: short runs of several shapes on a tiny corpus, reused when run again."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import corpus
import tokenizer as tokenizer_script
from scaling import absolute_paths
from test_pipeline import tiny_wheel

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("scaling-corpus")
    (root / "downloads").mkdir()
    tiny_wheel(root / "downloads" / "tiny-0.1-py3-none-any.whl")
    corpus.build(root, [root / "downloads" / "tiny-0.1-py3-none-any.whl"], include_stdlib=False)
    tok = tokenizer_script.train(root, vocab_size=320, sample_mb=5)
    for split in ("train", "val"):
        tokenizer_script.encode_split(tok, root / f"{split}.jsonl", root / f"{split}.bin")
    if not (root / "val.bin").stat().st_size > 2 * 70:  # tiny split: reuse train for validation
        (root / "val.bin").write_bytes((root / "train.bin").read_bytes())
    return root, tok.get_vocab_size()


def scaling(*args: str, timeout: int = 240, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "scaling.py"), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def test_sweep_trains_each_shape_then_reuses_finished_runs(tmp_path, tiny_corpus):
    data, vocab = tiny_corpus
    runs = tmp_path / "runs"
    train_options = ["--data", data.name, "--context", "64", "--vocab-size", str(vocab), "--batch-size", "4",
                     "--lr", "1e-2", "--warmup", "2", "--eval-batches", "1"]
    args = ["--shapes", "1x2x32,2x2x32", "--minutes", "0.05", "--dir", str(runs), "--out", str(tmp_path / "table.md"),
            "--", *train_options]
    first = scaling(*args, cwd=data.parent)  # --data relative to the working dir
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.count(": training for 0.05 minutes") == 2
    results = {name: json.loads((runs / name / "result.json").read_text()) for name in ("1x2x32", "2x2x32")}
    assert all(r["complete"] and r["steps"] > 0 and r["tokens"] == r["steps"] * 4 * 64 for r in results.values())
    assert all(2.5 <= r["minutes"] * 60 < 6 and r["tokens_per_s"] > 0 for r in results.values())
    assert results["2x2x32"]["parameters"] > results["1x2x32"]["parameters"]
    table = (tmp_path / "table.md").read_text()
    assert "| 1x2x32 |" in table and "| 2x2x32 |" in table and "--minutes 0.05" in table

    absolute = [str(data) if a == data.name else a for a in args]
    again = scaling(*absolute)  # the same sweep, from another dir, with the data dir spelled out
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("reusing the finished run") == 2 and ": training for" not in again.stdout

    cut_short = json.loads((runs / "2x2x32" / "result.json").read_text())
    (runs / "2x2x32" / "result.json").write_text(json.dumps({**cut_short, "complete": False}))
    redo = scaling(*absolute)
    assert redo.returncode == 0, redo.stderr[-2000:]
    assert "1x2x32: reusing" in redo.stdout and "2x2x32: training for" in redo.stdout
    final = json.loads((runs / "2x2x32" / "checkpoint" / "train_state.json").read_text())["history"][-1]
    assert final["tokens"] == final["tokens_this_run"], "the redone run started from scratch, not from the checkpoint"

    changed = scaling(*["5e-3" if a == "1e-2" else a for a in absolute])  # another learning rate: new runs
    assert changed.returncode == 0, changed.stderr[-2000:]
    assert changed.stdout.count(": training for") == 2


def test_data_dirs_are_made_absolute_in_every_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert absolute_paths(["--data", "c:2", "--data=d", "--val-data", "v", "--lr", "1e-3"]) == [
        "--data", f"{tmp_path}/c:2", f"--data={tmp_path}/d", "--val-data", f"{tmp_path}/v", "--lr", "1e-3"]


@pytest.mark.parametrize("args, message", [
    (["--shapes", "4x6"], "is not LAYERSxHEADSxWIDTH"),
    (["--shapes", "4x5x192"], "is not a multiple of 5 heads"),
    (["--shapes", "4x6x192", "--minutes", "0"], "--minutes must be above 0"),
    (["--shapes", "4x6x192", "--", "--n-layer", "2"], "--n-layer is set by scaling.py itself"),
    (["--shapes", "4x6x192", "--", "--minutes=2"], "--minutes=2 is set by scaling.py itself"),
    (["--shapes", "4x6x192", "--", "--ini", "x"], "--ini is set by scaling.py itself"),
    (["--shapes", "4x6x192", "--", "--dir", "x"], "--dir is scaling.py's own option: put it before --"),
    (["--shapes", "4x6x192", "--", "--data", "c:0"], "c:0: the weight must be above 0"),
])
def test_bad_sweeps_are_refused_before_any_run(tmp_path, args, message):
    done = scaling("--dir", str(tmp_path / "runs"), *args, timeout=60)
    assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "runs").exists()
