"""scripts/profile_step.py on the committed bundle: it must keep feeding whatever inputs the graph takes."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def _profile(tmp_path, *extra: str) -> dict[str, str]:
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "profile_step.py"), "--prefix", "124", "--beams", "2",
                          "--runs", "3", *extra], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return {line.split("|")[1].strip(): line for line in out.stdout.splitlines() if line.startswith("| ")}


def _nodes(rows: dict[str, str]) -> int:
    return sum(int(line.split("|")[3]) for name, line in rows.items() if name not in ("op type", "**all kernels**"))


def test_the_step_profile_runs_on_the_committed_bundle_and_names_the_attention_products(tmp_path):
    """One search in the single graph, then three in one call of the batched graph, whose eight slots all run."""
    single, batched = _profile(tmp_path), _profile(tmp_path, "--searches", "3")
    for rows in (single, batched):
        assert "MatMul" in rows and "TopK" in rows and "**all kernels**" in rows
    assert _nodes(batched) > 1.5 * _nodes(single)
    assert not list(tmp_path.iterdir())  # the trace goes to the temp dir, and is removed once read
