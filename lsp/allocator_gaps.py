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

Larger objects, and the C libraries' own memory, come from the C library's malloc, whose heap has the same
gaps: free chunks left all over it, and a per-thread cache of recently freed ones that malloc hands out first.
`fill_malloc_free_chunks` takes them all with malloc before the fork (glibc only: it reads glibc's
`malloc_info` report), so that a session's mallocs come from the top of the heap, on pages of its own.
"""
from __future__ import annotations

import ctypes
import os
import platform
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


_FREE_CHUNKS = re.compile(r'<(?:size|unsorted) from="(\d+)" to="\d+" total="\d+" count="(\d+)"/>')
"""A row of glibc's malloc_info report: free chunks of `from` bytes (and up) in one bin, and how many."""
_CHUNK_OVERHEAD = 16
"""malloc(n - 16) takes a chunk of exactly n bytes (n a multiple of 16, 32 and up) on 64-bit glibc."""
_LARGEST_FILLED = 64 * 1024
"""Larger free chunks are left alone: a request near malloc's mmap threshold may be mapped instead."""
_THREAD_CACHE = (range(32, 1040 + 1, 16), 7)
"""glibc's per-thread cache: up to 7 freed chunks of each size up to 1,040 bytes, which malloc_info omits."""
_MALLOC_PASSES = 8
"""Taking a chunk of a bin can split a larger one, which leaves its rest free: fill until settled."""

_malloc_fillers: list[int] = []
"""The chunks taken: never freed, since a freed one would be a gap again."""


def _glibc() -> ctypes.CDLL | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.fdopen.restype = ctypes.c_void_p
        libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    return libc


def malloc_free_chunks(libc: ctypes.CDLL | None = None) -> list[tuple[int, int]]:
    """The free chunks of the C library's main heap, as (bytes, count) per bin, from glibc's report; empty
    where there is no glibc or no report."""
    libc = libc or _glibc()
    if libc is None:
        return []
    try:
        with tempfile.TemporaryFile() as captured:
            copy = os.dup(captured.fileno())
            stream = libc.fdopen(copy, b"w")  # fclose closes `copy` with it
            if not stream:
                os.close(copy)
                return []
            libc.malloc_info(0, stream)
            libc.fclose(stream)
            captured.seek(0)
            report = captured.read().decode("ascii", "replace")
    except OSError:
        return []
    main_heap = report.split("</heap>", 1)[0] if "</heap>" in report else ""
    return [(int(size), int(count)) for size, count in _FREE_CHUNKS.findall(main_heap)]


def fill_malloc_free_chunks() -> int:
    """Take every free chunk of the C library's main heap and of this thread's cache with malloc; returns how
    many chunks were taken (0 without glibc)."""
    libc = _glibc()
    if libc is None:
        return 0
    sizes, per_size = _THREAD_CACHE
    wanted = [(size, per_size) for size in sizes]
    before = len(_malloc_fillers)
    for _ in range(_MALLOC_PASSES):
        for size, count in wanted:
            if size <= _LARGEST_FILLED:
                _malloc_fillers.extend(libc.malloc(size - _CHUNK_OVERHEAD) for _ in range(count))
        wanted = malloc_free_chunks(libc)
        if not any(size <= _LARGEST_FILLED for size, _ in wanted):
            break
    return len(_malloc_fillers) - before
