"""scripts/soak.py --table, the command docs/benchmarks.md makes its soak table with: a soak too short for the
table (growth is read from keystroke 1,000 on), a missing file, a pair that is not NAME=FILE or a file that is not
a soak's result is one usage line and exit 2, not a traceback."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

SOAK = REPO / "scripts" / "soak.py"


def soak(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SOAK), *argv], cwd=REPO, capture_output=True, text=True, timeout=300)


def assert_one_line(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert message in done.stderr.strip().splitlines()[-1]


def test_the_table_of_a_soak_shorter_than_a_thousand_keystrokes_says_it_is_too_short(tmp_path: Path):
    """A real soak through the server, with the smallest arguments, then its own output given to --table."""
    out = tmp_path / "short.json"
    ran = soak("--keystrokes", "20", "--documents", "1", "--every", "10", "--out", str(out))
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert_one_line(soak("--table", f"short={out}"), "short: a soak of 20 keystrokes with no memory sample at or")


@pytest.mark.parametrize("item, message", [
    ("gone=/nonexistent/soak.json", "No such file or directory"),
    ("soak.json", "'soak.json' is not NAME=FILE"),
    ("readme=README.md", "README.md: not soak results written by --out"),
    ("first=docs/bench_first.json", "not soak results written by --out (no 'samples')"),
])
def test_a_table_of_what_is_not_a_soak_result_is_one_line_and_exit_2(item, message):
    assert_one_line(soak("--table", item), message)
