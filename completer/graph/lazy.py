"""Tensors read when the graph builder takes them, so that a model being converted is never held whole in fp32.

A checkpoint's tensor is a `Lazy`: its shape and dtype come from the file's header, and its values (mapped from
the file, bf16 or quantized blocks widened to fp32) are read only when the builder asks for them. The layout
changes that make the canonical weights (architecture.py), transposes and the fused q/k/v and gate/up rows,
are composed onto it, so they too run one tensor at a time and their results are let go once quantized.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

Rows = Callable[[int, int], np.ndarray]
EQUAL_BLOCK_ROWS = 4096  # rows compared at a time when two tables are checked for equality


class Lazy:
    """A tensor of known shape and dtype whose values `read` gives when asked; numpy reads it through
    `__array__`, so `np.asarray(lazy, np.float32)` is where it is read. `rows(start, stop)`, where it is cheap
    (a mapped file), reads a block of leading rows without the rest."""

    __slots__ = ("shape", "dtype", "_read", "_rows", "transpose_of")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype | type, read: Callable[[], np.ndarray],
                 rows: Rows | None = None) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self._read, self._rows = read, rows
        self.transpose_of: Lazy | None = None  # set by `transposed`, so a reader by rows can read the source's

    def __repr__(self) -> str:
        return f"Lazy(shape={self.shape}, dtype={self.dtype})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def read(self) -> np.ndarray:
        value = self._read()
        if tuple(value.shape) != self.shape:
            raise ValueError(f"a tensor read as {list(value.shape)}, its description said {list(self.shape)}")
        return value

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:
        value = self.read()
        return value if dtype is None else value.astype(dtype, copy=False)

    @property
    def has_rows(self) -> bool:
        """Whether `rows` reads only the rows asked for (else it reads the whole tensor each time)."""
        return self._rows is not None

    def rows(self, start: int, stop: int) -> np.ndarray:
        return self._rows(start, stop) if self._rows is not None else self.read()[start:stop]

    def then(self, change: Callable[[np.ndarray], np.ndarray], shape: tuple[int, ...] | None = None,
             dtype: np.dtype | type | None = None) -> Lazy:
        """This tensor with `change` applied when it is read; `shape` and `dtype` are the result's, if they differ."""
        return Lazy(self.shape if shape is None else shape, self.dtype if dtype is None else dtype,
                    lambda: change(self.read()))

    def transposed(self) -> Lazy:
        """The 2-D transpose, contiguous: a torch Linear's [out, in] as the graph's [in, out]."""
        result = Lazy(self.shape[::-1], self.dtype, lambda: np.ascontiguousarray(self.read().T))
        result.transpose_of = self
        return result


def concatenate(parts: list[Lazy], axis: int = 0) -> Lazy:
    """The parts joined along `axis` when read (fused q/k/v or gate/up rows)."""
    shape = list(parts[0].shape)
    shape[axis] = sum(part.shape[axis] for part in parts)
    return Lazy(tuple(shape), parts[0].dtype, lambda: np.concatenate([part.read() for part in parts], axis=axis))


def of(value: np.ndarray | Lazy) -> Lazy:
    """An array already in memory as a Lazy (tests and our own checkpoints hand arrays over)."""
    if isinstance(value, Lazy):
        return value
    array = np.asarray(value)
    return Lazy(array.shape, array.dtype, lambda: array, rows=lambda start, stop: array[start:stop])


def equal(a: Lazy, b: Lazy) -> bool:
    """Whether two tables hold the same values, read a block of rows at a time where both can be."""
    if a.shape != b.shape:
        return False
    if not (a.has_rows and b.has_rows):
        return bool(np.array_equal(a.read(), b.read()))
    for start in range(0, a.shape[0], EQUAL_BLOCK_ROWS):
        stop = start + EQUAL_BLOCK_ROWS
        if not np.array_equal(a.rows(start, stop), b.rows(start, stop)):
            return False
    return True
