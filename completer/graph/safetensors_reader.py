"""Read .safetensors files into numpy, bf16 included, without torch and without unpickling anything.

The format is an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape
and byte range, then the raw data. The `safetensors` library's numpy loader cannot return bf16, the
dtype most released checkpoints are stored in, so this reads the format itself and checks every
range against the file, so a truncated or corrupt file is refused by name.
"""
from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import numpy as np

from ..safetensors_header import SafetensorsError, read_header
from .lazy import Lazy

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def _bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    wide = raw.astype(np.uint32)
    wide <<= 16  # in place: one tensor-sized allocation, not two
    return wide.view(np.float32)


WIDEN = {"BF16": _bf16_to_f32, "F16": lambda raw: raw.astype(np.float32)}  # read as float32


def tensors(path: Path) -> dict[str, Lazy]:
    """Every tensor in the file, described from its header and read from the file when asked (lazy.py), as float32
    for the floating point types. Read, not mapped: the pages of a mapped checkpoint stay in the converter's
    resident memory once touched, the whole model's worth by the end."""
    header, start = read_header(path)
    data_size = max(0, path.stat().st_size - start)
    found, ranges = {}, []
    for name, meta in header.items():
        try:
            dtype, shape, (begin, end) = meta["dtype"], [int(n) for n in meta["shape"]], meta["data_offsets"]
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (begin, end)) or min(shape, default=0) < 0:
                raise ValueError("offsets and sizes must be whole numbers, not negative")
            if not isinstance(dtype, str):
                raise TypeError("dtype must be a name")
        except (KeyError, TypeError, ValueError) as exc:
            raise SafetensorsError(f"{path}: tensor {name!r} has a malformed description ({exc})") from exc
        if dtype not in DTYPES:
            raise SafetensorsError(f"{path}: tensor {name!r} has dtype {dtype}, which is not supported")
        itemsize = np.dtype(DTYPES[dtype]).itemsize
        if not 0 <= begin <= end <= data_size or end - begin != math.prod(shape) * itemsize:  # np.prod wraps
            raise SafetensorsError(f"{path}: tensor {name!r} lies outside the file or has the wrong size "
                                   "(truncated or corrupt)")
        ranges.append((begin, end, name))
        stored = np.dtype(DTYPES[dtype])
        read = partial(_rows, path, name, start + begin, stored, tuple(shape), WIDEN.get(dtype))
        found[name] = Lazy(shape, np.float32 if dtype in WIDEN else stored, partial(read, 0, shape[0] if shape else 1),
                           rows=read)
    _check_apart(path, ranges)
    return found


def _check_apart(path: Path, ranges: list[tuple[int, int, str]]) -> None:
    """Refuse tensors whose bytes overlap: each tensor has bytes of its own (the safetensors library refuses such
    a file too), so two that share some are a corrupt header, whose weights would be silently wrong."""
    filled = sorted(r for r in ranges if r[0] < r[1])  # an empty tensor owns no bytes
    for (_, end, name), (begin, _, other) in zip(filled, filled[1:]):
        if begin < end:
            raise SafetensorsError(f"{path}: tensors {name!r} and {other!r} share bytes (corrupt header)")


def _rows(path: Path, name: str, offset: int, stored: np.dtype, shape: tuple[int, ...], widen, first: int,
          last: int) -> np.ndarray:
    """Rows [first, last) of the tensor `name` stored at `offset` (a 0-d tensor: all of it), widened where it is
    stored narrower than float32."""
    row = math.prod(shape[1:]) if shape else 1
    first, last = min(first, shape[0] if shape else 1), min(last, shape[0] if shape else 1)
    values = np.fromfile(path, dtype=stored, count=(last - first) * row, offset=offset + first * row * stored.itemsize)
    if values.size != (last - first) * row:
        raise SafetensorsError(f"{path}: tensor {name!r} is cut short (the file changed or was truncated while "
                               "it was read)")
    values = values.reshape((last - first, *shape[1:]) if shape else ())
    values = widen(values) if widen is not None else values
    if not finite(values):
        raise SafetensorsError(f"{path}: tensor {name!r} holds NaN or infinite values (a corrupt file?)")
    return values


def finite(values: np.ndarray) -> bool:
    """Whether a tensor read holds no NaN or infinity, which would make every output of the model NaN: a corrupt
    file converted silently into a bundle whose every suggestion is garbage. Summed in float64 (no float32 weight
    overflows it), so no mask the tensor's size is made."""
    return values.dtype.kind != "f" or math.isfinite(float(values.sum(dtype=np.float64)))


def load(path: Path) -> dict[str, np.ndarray]:
    """Every tensor in the file as float32 (floating point) or its own integer type, read now."""
    return {name: tensor.read() for name, tensor in tensors(path).items()}


__all__ = ["SafetensorsError", "load", "read_header", "tensors"]
