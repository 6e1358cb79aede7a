"""Length-prefixed msgpack frames: the only wire format between the server and its worker.

msgpack (never pickle) keeps the worker boundary a plain-data boundary: a corrupt or hostile
frame can at worst fail to decode, never execute code.
"""
from __future__ import annotations

import asyncio
import struct
from pathlib import PurePath
from typing import Any, BinaryIO

import msgpack

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 64 * 1024 * 1024  # far above any context slice; guards against a garbled length


class FrameError(Exception):
    """The peer sent something that is not a frame; the channel cannot be trusted any more."""


def _to_plain(obj: Any) -> Any:
    """msgpack fallback for values engine code may hand back (paths, numpy scalars, tuples of those), and for
    objects that say what to send for them (`to_message`, as completer.repository.RepositoryContext does)."""
    if hasattr(obj, "to_message") and callable(obj.to_message):
        return obj.to_message()
    if isinstance(obj, PurePath):
        return str(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy array
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    return repr(obj)


def encode(message: Any) -> bytes:
    """One frame: 4-byte big-endian body length, then the msgpack body."""
    body = msgpack.packb(message, use_bin_type=True, default=_to_plain, unicode_errors="surrogatepass")
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes exceeds {MAX_FRAME_BYTES}")
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> Any:
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=False, unicode_errors="surrogatepass")
    except Exception as exc:  # msgpack raises several unrelated types
        raise FrameError(f"undecodable frame: {exc}") from exc


def _length(header: bytes) -> int:
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"frame length {length} exceeds {MAX_FRAME_BYTES}")
    return length


def read_frame(stream: BinaryIO) -> Any | None:
    """Blocking read of one frame; None at a clean end of stream."""
    header = _read_exactly(stream, HEADER.size)
    if header is None:
        return None
    body = _read_exactly(stream, _length(header))
    if body is None:
        raise FrameError("stream ended inside a frame")
    return decode(body)


def _read_exactly(stream: BinaryIO, n: int) -> bytes | None:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            if remaining == n:
                return None
            raise FrameError("stream ended inside a frame")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


async def read_frame_async(reader: asyncio.StreamReader) -> Any | None:
    """Asynchronous read of one frame; None at a clean end of stream."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError("stream ended inside a frame header") from exc
    try:
        body = await reader.readexactly(_length(header))
    except asyncio.IncompleteReadError as exc:
        raise FrameError("stream ended inside a frame") from exc
    return decode(body)
