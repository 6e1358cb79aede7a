"""scripts/profile_step.py on the committed bundle: it must keep feeding whatever inputs the graph takes."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_the_step_profile_runs_on_the_committed_bundle_and_names_the_attention_products(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "profile_step.py"), "--prefix", "64", "--beams", "2",
                          "--runs", "3"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {line.split("|")[1].strip(): line for line in out.stdout.splitlines() if line.startswith("| ")}
    assert "MatMul" in rows and "TopK" in rows and "**all kernels**" in rows
    assert not list(tmp_path.iterdir())  # the trace goes to the temp dir, and is removed once read
