"""The header of a .safetensors file: each tensor's dtype, shape and byte range, read without the weights, so
`completer models` can count a checkpoint's parameters with the runtime alone (graph/safetensors_reader.py
reads the weights).

The format is an 8-byte little-endian header length, then a JSON object describing each tensor.
"""
from __future__ import annotations

import json
import math
import os
import stat
import struct
from pathlib import Path

MAX_HEADER_BYTES = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    """A file that is not a readable safetensors file; the message names it and what is wrong."""


def read_header(path: Path) -> tuple[dict, int]:
    """The tensors' descriptions and where the data starts."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block open() forever
            raise SafetensorsError(f"{path}: not a regular file")
        with open(path, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                raise SafetensorsError(f"{path}: too short to be a safetensors file")
            (size,) = struct.unpack("<Q", head)
            if size > MAX_HEADER_BYTES:
                raise SafetensorsError(f"{path}: header of {size:,} bytes; not a safetensors file")
            text = handle.read(size)
            if len(text) < size:
                raise SafetensorsError(f"{path}: its header of {size:,} bytes runs past the end of the file "
                                       "(truncated or corrupt)")
            header = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # arrays nested thousands deep
        if isinstance(exc, SafetensorsError):
            raise
        raise SafetensorsError(f"{path}: unreadable safetensors header ({exc})") from exc
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: the header is not a JSON object")
    header.pop("__metadata__", None)
    return header, 8 + size


def parameters(path: Path) -> int:
    """How many values the file's tensors hold, from its header alone; SafetensorsError for a damaged header."""
    header, _ = read_header(path)
    try:
        return sum(math.prod(int(n) for n in meta["shape"]) for meta in header.values())
    except (KeyError, TypeError, ValueError) as exc:
        raise SafetensorsError(f"{path}: a tensor has a malformed shape ({exc})") from exc
