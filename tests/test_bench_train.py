"""scripts/bench_train.py --shapes: the training-time price of larger shapes, which MODEL.md's estimate rests on."""
from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO

SCRIPT = str(REPO / "scripts" / "bench_train.py")


def test_shapes_are_timed_against_the_first_and_the_larger_one_has_more_parameters():
    out = subprocess.run([sys.executable, SCRIPT, "--shapes", "1x2x32,2x2x64", "--rounds", "1", "--threads", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = re.findall(r"^(\S+): ([\d,]+) parameters, (\d+) ms per step, ([\d,]+) tokens/s, ([\d.]+)x the first$",
                      out.stdout, re.M)
    assert [r[0] for r in rows] == ["1x2x32", "2x2x64"]
    small, large = (int(r[1].replace(",", "")) for r in rows)
    assert large > small
    assert rows[0][4] == "1.00" and float(rows[1][4]) > 0


def test_a_shape_that_cannot_be_built_is_refused_in_one_line():
    out = subprocess.run([sys.executable, SCRIPT, "--shapes", "2x6x100"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "width 100 is not a multiple of 6 heads" in out.stderr
