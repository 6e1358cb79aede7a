"""scripts/bench_engine.py --table, which makes the docs' engine tables from a result written by --out: a
`--candidate` result (another bundle against the shipped one, which python-base's model card quotes) gets its
table like every other comparison, not only its command line."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO

CANDIDATE = REPO / "docs" / "experiments" / "2026-11-25-gpu-training" / "bench-candidate-python-base.json"


def test_the_table_of_a_candidate_result_gives_both_bundles_and_the_time_per_model_run():
    printed = subprocess.run([sys.executable, "scripts/bench_engine.py", "--table", str(CANDIDATE)], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr[-2000:]
    lines = printed.stdout.splitlines()
    assert "| `--bundle` | 14.21 ms | 39.26 ms | 17.56 ms | 6 / 19.0 / 21 |" in lines
    assert "| `--candidate` | 38.08 ms | 109.80 ms | 46.74 ms | 6 / 20.0 / 25 |" in lines
    assert any("ms per model run p50: 2.10 vs 6.06 (2.88×)" in line for line in lines)
