"""scripts/scaling.py: short runs of several shapes on a tiny corpus, reused when run again."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import corpus
import tokenizer as tokenizer_script
from test_pipeline import tiny_wheel

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("scaling-corpus")
    (root / "downloads").mkdir()
    tiny_wheel(root / "downloads" / "tiny-0.1-py3-none-any.whl")
    corpus.build(root, root / "downloads", include_stdlib=False)
    tok = tokenizer_script.train(root, vocab_size=320, sample_mb=5)
    for split in ("train", "val"):
        tokenizer_script.encode_split(tok, root / f"{split}.jsonl", root / f"{split}.bin")
    if not (root / "val.bin").stat().st_size > 2 * 70:  # tiny split: reuse train for validation
        (root / "val.bin").write_bytes((root / "train.bin").read_bytes())
    return root, tok.get_vocab_size()


def scaling(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "scaling.py"), *args], capture_output=True,
                          text=True, timeout=timeout)


def test_sweep_trains_each_shape_then_reuses_finished_runs(tmp_path, tiny_corpus):
    data, vocab = tiny_corpus
    runs = tmp_path / "runs"
    (runs / "2x2x32").mkdir(parents=True)
    (runs / "2x2x32" / "leftover").write_text("an interrupted run")
    args = ["--shapes", "1x2x32,2x2x32", "--max-steps", "12", "--minutes", "10", "--dir", str(runs),
            "--out", str(tmp_path / "table.md"), "--", "--data", str(data), "--context", "64", "--vocab-size",
            str(vocab), "--batch-size", "4", "--lr", "1e-2", "--warmup", "2", "--eval-batches", "1"]
    first = scaling(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.count(": training (") == 2
    assert not (runs / "2x2x32" / "leftover").exists(), "a partial run is started over"
    results = {name: json.loads((runs / name / "result.json").read_text()) for name in ("1x2x32", "2x2x32")}
    assert all(r["complete"] and r["steps"] == 12 and r["tokens"] == 12 * 4 * 64 for r in results.values())
    assert results["2x2x32"]["parameters"] > results["1x2x32"]["parameters"]
    table = (tmp_path / "table.md").read_text()
    assert "| 1x2x32 |" in table and "| 2x2x32 |" in table and "--max-steps 12" in table

    again = scaling(*args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("reusing the finished run") == 2 and ": training (" not in again.stdout
    assert (tmp_path / "table.md").read_text() == table

    changed = scaling(*["5e-3" if a == "1e-2" else "1x2x32" if a == "1x2x32,2x2x32" else a for a in args])
    assert changed.returncode == 0, changed.stderr[-2000:]
    assert ": training (" in changed.stdout, "other train.py options make a new run"


@pytest.mark.parametrize("args, message", [
    (["--shapes", "4x6"], "is not LAYERSxHEADSxWIDTH"),
    (["--shapes", "4x5x192"], "is not a multiple of 5 heads"),
    (["--shapes", "4x6x192", "--", "--n-layer", "2"], "--n-layer is set by scaling.py itself"),
])
def test_bad_sweeps_are_refused_before_any_run(tmp_path, args, message):
    done = scaling(*args, "--dir", str(tmp_path / "runs"), timeout=60)
    assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "runs").exists()
