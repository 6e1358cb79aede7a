"""Read .safetensors files into numpy, bf16 included, without torch and without unpickling anything.

The format is an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape
and byte range, then the raw data. The `safetensors` library's numpy loader cannot return bf16, the
dtype most released checkpoints are stored in, so this reads the format itself and checks every
range against the file, so a truncated or corrupt file is refused by name.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
MAX_HEADER_BYTES = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    """A file that is not a readable safetensors file; the message names it and what is wrong."""


def _bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


def read_header(path: Path) -> tuple[dict, int]:
    """The tensors' descriptions and where the data starts."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                raise SafetensorsError(f"{path}: too short to be a safetensors file")
            (size,) = struct.unpack("<Q", head)
            if size > MAX_HEADER_BYTES:
                raise SafetensorsError(f"{path}: header of {size:,} bytes; not a safetensors file")
            header = json.loads(handle.read(size))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, SafetensorsError):
            raise
        raise SafetensorsError(f"{path}: unreadable safetensors header ({exc})") from exc
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: the header is not a JSON object")
    header.pop("__metadata__", None)
    return header, 8 + size


def load(path: Path) -> dict[str, np.ndarray]:
    """Every tensor in the file as float32 (floating point) or its own integer type, memory-mapped where it can be."""
    header, start = read_header(path)
    file_size = path.stat().st_size
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=start, shape=(file_size - start,)) if file_size > start \
        else np.zeros(0, np.uint8)
    tensors = {}
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
        if not 0 <= begin <= end <= len(data) or end - begin != int(np.prod(shape)) * itemsize:
            raise SafetensorsError(f"{path}: tensor {name!r} lies outside the file or has the wrong size "
                                   "(truncated or corrupt)")
        raw = data[begin:end].view(DTYPES[dtype]).reshape(shape)
        tensors[name] = _bf16_to_f32(raw) if dtype == "BF16" else raw.astype(np.float32) if dtype == "F16" else raw
    return tensors
