"""scripts/bench_shared.py's account of a forked process's private pages, checked on real processes: a child
that writes to part of what it shares with its parent, and maps memory of its own."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from bench_shared import main as bench_main  # noqa: E402
from bench_shared import mappings, ratios_table, session_pages_kb  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc's page maps are Linux's")

FORKING_PARENT = r"""
import mmap, os, sys, time
shared = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # copied on write after the fork
shared.write(b"x" * (8 << 20))  # the parent touches all 8 MB before forking
untouched = mmap.mmap(-1, 4 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # and none of these 4 MB
pid = os.fork()
if pid == 0:
    for offset in range(0, 2 << 20, mmap.PAGESIZE):  # the child writes one byte to each page of 2 MB of it
        shared[offset] = 1
    for offset in range(0, 1 << 20, mmap.PAGESIZE):  # and to 1 MB of what the parent left untouched
        untouched[offset] = 1
    own = mmap.mmap(-1, 3 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    own.write(b"y" * (3 << 20))  # and fills 3 MB of a mapping of its own
    print(os.getpid(), flush=True)
    time.sleep(60)
    os._exit(0)
time.sleep(60)
"""


def test_a_forked_childs_pages_are_split_into_copied_first_touched_and_its_own():
    parent = subprocess.Popen([sys.executable, "-c", FORKING_PARENT], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(parent.stdout.readline())
        time.sleep(0.2)
        kb = session_pages_kb(child, parent.pid)
        assert 2048 <= kb["copied"] < 2 * 2048, kb  # the 2 MB written, and some pages of the interpreter
        assert 1024 <= kb["first_touched"] < 2048, kb
        assert kb["own"] >= 3072, kb
        assert any(dirty >= 3072 for _, _, dirty in mappings(child))
    finally:
        if child is not None:
            os.kill(child, signal.SIGKILL)
        parent.kill()
        parent.wait()


def _result(path: Path, one: float, four: float, private: list[float]) -> Path:
    runs = [{"windows": 1, "session_host": True, "total_pss_mb": one, "session_private_dirty_mb": private[:1]},
            {"windows": 4, "session_host": True, "total_pss_mb": four, "session_private_dirty_mb": private},
            {"windows": 4, "session_host": False, "total_pss_mb": 999.0, "session_private_dirty_mb": []}]
    path.write_text(json.dumps({"runs": runs}))
    return path


def test_ratios_put_each_runs_session_host_rows_side_by_side_with_each_checkouts_median(tmp_path: Path):
    files = [_result(tmp_path / "a-1.json", 100.0, 130.0, [10.0, 11.0, 12.0, 13.0]),
             _result(tmp_path / "a-2.json", 100.0, 140.0, [10.0] * 4),
             _result(tmp_path / "b-1.json", 200.0, 250.0, [8.0] * 4)]
    lines = ratios_table(files).splitlines()
    assert lines[2] == "| a-1 | 100.0 | 4 | 130.0 | 1.300× | 11.5 |"
    assert lines[4] == "| b-1 | 200.0 | 4 | 250.0 | 1.250× | 8.0 |"
    assert lines[5] == "| **a, median of 2** | | | | 1.350× | 10.8 |"
    assert len(lines) == 6, "no median row for a single run"


def test_ratios_of_a_file_that_is_not_a_result_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(SystemExit):
        bench_main(["--ratios", str(tmp_path / "x.json")])
    assert "not results written by --out" in capsys.readouterr().err
