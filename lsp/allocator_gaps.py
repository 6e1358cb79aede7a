"""Fill the gaps in a forking process's small-object allocator, so that its children's new objects land on
pages of their own instead of copying shared ones.

CPython's allocator (pymalloc) hands out blocks of up to 512 bytes from 16 KiB pools. After the session host
has imported everything, the blocks freed meanwhile are scattered over hundreds of pools that its forked
sessions share with it. A session's first new objects go into those free blocks, and each one makes the kernel
copy a whole 4 KiB page it shared for an object of a few dozen bytes. Filling the free blocks with placeholder
objects before forking sends those objects to fresh pools, packed together: about 1.4 MB less private memory
per session (docs/benchmarks.md, "Editor windows on one engine").

The counts come from `sys._debugmallocstats()`, CPython's report of its allocator, which it writes to the C
stderr. Where it is missing or reads differently (another interpreter, or PYTHONMALLOC=malloc), nothing is
filled and nothing else changes.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile

BYTES_HEADER = sys.getsizeof(b"")
"""A bytes object of length n asks the allocator for BYTES_HEADER + n bytes."""
_ROW = re.compile(r"^\s*\d+\s+(\d+)\s+\d+\s+\d+\s+(\d+)\s*$")
"""A size class's row in the report: class, size, pools, blocks in use, free blocks."""
_PASSES = 3
"""Filling one size class can open a pool of another (the list of fillers grows), so fill until settled."""

_fillers: list[bytes] = []
"""The placeholders: never freed, since a freed one would be a gap again."""


def free_blocks() -> dict[int, int]:
    """Free blocks per size class (bytes: count), from the allocator's report; empty when there is none."""
    report = getattr(sys, "_debugmallocstats", None)
    if report is None:
        return {}
    try:
        with tempfile.TemporaryFile() as captured:
            if sys.stderr is not None:
                sys.stderr.flush()
            saved = os.dup(2)
            try:
                os.dup2(captured.fileno(), 2)
                report()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            captured.seek(0)
            text = captured.read().decode("ascii", "replace")
    except OSError:  # no stderr to borrow, or no temporary file: fill nothing
        return {}
    counts: dict[int, int] = {}
    for line in text.splitlines():
        if match := _ROW.match(line):
            counts[int(match.group(1))] = int(match.group(2))
    return counts


def fill_free_blocks() -> int:
    """Fill the free blocks of every size class a bytes object can take; returns how many were filled."""
    filled = 0
    for _ in range(_PASSES):
        batch = [b"x" * (size - BYTES_HEADER) for size, count in free_blocks().items()
                 if size - BYTES_HEADER >= 2  # b"" and one-byte objects are shared singletons, never allocated
                 for _ in range(count)]
        if not batch:
            break
        _fillers.extend(batch)
        filled += len(batch)
    return filled
