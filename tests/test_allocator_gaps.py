"""The session host fills its allocator's free blocks before it forks (lsp/allocator_gaps.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lsp import allocator_gaps

REPO = Path(__file__).resolve().parent.parent


def test_filling_leaves_few_free_blocks_and_stderr_as_it_was():
    """In a fresh interpreter: objects freed all over the pools leave free blocks; after the fill, a fraction
    of them is left, and the process's stderr (borrowed to read the allocator's report) still reaches the
    parent."""
    script = textwrap.dedent("""
        import sys
        from lsp.allocator_gaps import fill_free_blocks, free_blocks
        kept, freed = [], []
        for i in range(60000):
            (kept if i % 3 else freed).append(("x" * (i % 200), i))
        del freed
        before = sum(size * count for size, count in free_blocks().items())
        filled = fill_free_blocks()
        after = sum(size * count for size, count in free_blocks().items())
        print(before, filled, after)
        print("stderr still works", file=sys.stderr)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    before, filled, after = map(int, done.stdout.split())
    assert before > 500_000  # the 20,000 freed tuples and strings
    assert filled > 10_000
    assert after < before / 4
    assert done.stderr.strip() == "stderr still works"


def test_the_report_is_read_by_size_class():
    counts = allocator_gaps.free_blocks()
    assert counts, "CPython reports its allocator"
    assert all(size % 16 == 0 and 16 <= size <= 512 and count >= 0 for size, count in counts.items())


def test_without_the_report_nothing_is_filled(monkeypatch: pytest.MonkeyPatch):
    """Another interpreter, or an allocator without the report: nothing happens."""
    monkeypatch.delattr(sys, "_debugmallocstats")
    assert allocator_gaps.free_blocks() == {}
    assert allocator_gaps.fill_free_blocks() == 0


def test_a_report_of_another_shape_fills_nothing(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sys, "_debugmallocstats", lambda: print("an allocator of another kind", file=sys.stderr))
    assert allocator_gaps.free_blocks() == {}
    assert allocator_gaps.fill_free_blocks() == 0


def test_a_process_without_stderr_fills_and_leaves_fd_2_closed():
    """A process started with fd 2 closed: the report goes to the temporary file that takes fd 2, and fd 2 is
    closed again afterwards, as it was."""
    script = textwrap.dedent("""
        import os
        from lsp.allocator_gaps import fill_free_blocks
        filled = fill_free_blocks()
        try:
            os.fstat(2)
            print(filled, "fd 2 open")
        except OSError:
            print(filled, "fd 2 closed")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, timeout=60, preexec_fn=lambda: os.close(2))
    assert done.returncode == 0
    filled, state = done.stdout.split(" ", 1)
    assert int(filled) > 0
    assert state.strip() == "fd 2 closed"


glibc_only = pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="reads glibc's malloc_info")


@glibc_only
def test_filling_the_c_heap_takes_its_free_chunks():
    """In a fresh interpreter: buffers too large for pymalloc, every other one freed, leave free chunks all over
    the C library's heap; after the fill, a fraction of their bytes is left free."""
    script = textwrap.dedent("""
        from lsp.allocator_gaps import fill_malloc_free_chunks, malloc_free_chunks
        buffers = [bytearray(600 + 16 * (i % 200)) for i in range(4000)]
        del buffers[::2]
        before = sum(size * count for size, count in malloc_free_chunks())
        taken = fill_malloc_free_chunks()
        after = sum(size * count for size, count in malloc_free_chunks())
        print(before, taken, after)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    before, taken, after = map(int, done.stdout.split())
    assert before > 1_000_000  # the 2,000 freed buffers of 600 to 3,800 bytes
    assert taken > 1_000
    assert after < before / 10


@glibc_only
def test_the_c_heaps_report_is_read_by_chunk_size():
    chunks = allocator_gaps.malloc_free_chunks()
    assert all(size >= 16 and count >= 1 for size, count in chunks)


def test_without_glibc_nothing_is_taken_from_malloc(monkeypatch: pytest.MonkeyPatch):
    """musl, macOS or another C library: no report to read, and nothing is allocated."""
    monkeypatch.setattr(allocator_gaps.platform, "libc_ver", lambda: ("", ""))
    assert allocator_gaps.malloc_free_chunks() == []
    assert allocator_gaps.fill_malloc_free_chunks() == 0
