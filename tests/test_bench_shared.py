"""scripts/bench_shared.py's account of a forked process's private pages, checked on real processes: a child
that writes to part of what it shares with its parent, and maps memory of its own."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from bench_shared import mappings, session_pages_kb  # noqa: E402

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
