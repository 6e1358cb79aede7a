"""The files an ONNX graph reads besides itself: its tensors' external data (`location`), found by walking the
protobuf's fields without the onnx package (not a runtime dependency) and without reading the weights.

onnxruntime opens every such file in the graph's folder (it refuses absolute paths, `..` and symlinks out of it),
so a bundle whose manifest lists fewer files than its graph reads would have one loaded unchecked: the bundle
refuses it (completer/bundle.py). A file whose fields cannot be walked is refused too (NotAGraph): onnxruntime's
parser might read a reference this walk could not see.
"""
from __future__ import annotations

import mmap
from pathlib import Path

MAX_DEPTH = 64
"""Nested graphs (an If's branches, a Loop's body) followed at most this deep: a graph nested deeper is left to
onnxruntime, whose protobuf parser refuses it first (its limit is 100 messages deep)."""

# field numbers of onnx.proto's messages, for each message this walk enters: {field: message it holds}
_MODEL = {7: "graph", 20: "training", 25: "function"}
_MESSAGES: dict[str, dict[int, str]] = {
    "model": _MODEL,
    "training": {1: "graph", 2: "graph"},
    "graph": {1: "node", 5: "tensor", 15: "sparse"},
    "function": {7: "node", 11: "attribute"},
    "node": {5: "attribute"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 22: "sparse", 23: "sparse"},
    "sparse": {1: "tensor", 2: "tensor"},
    "tensor": {13: "entry"},
    "entry": {},
}


class NotAGraph(ValueError):
    """The bytes are no protobuf message: the file is not an ONNX graph."""


def _varint(data: mmap.mmap | bytes, at: int, end: int) -> tuple[int, int]:
    """The varint at `at`, and where the next field starts."""
    value, shift = 0, 0
    while at < end and shift < 70:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    raise NotAGraph


def _fields(data: mmap.mmap | bytes, start: int, end: int):
    """(field number, start, end) of each length-delimited field of the message in data[start:end]."""
    at = start
    while at < end:
        key, at = _varint(data, at, end)
        wire = key & 7
        if wire == 0:
            _, at = _varint(data, at, end)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == 2:
            length, at = _varint(data, at, end)
            if at + length > end:
                raise NotAGraph
            yield key >> 3, at, at + length
            at += length
        elif wire == 3:  # a group, which onnx.proto never uses but a parser keeps as an unknown field
            at = _skip_group(data, at, end, key >> 3)
        else:
            raise NotAGraph
    if at > end:
        raise NotAGraph


def _skip_group(data: mmap.mmap | bytes, at: int, end: int, number: int) -> int:
    """Where the group of field `number` that starts at `at` ends (after its end-group key)."""
    open_groups = [number]
    while open_groups:
        key, at = _varint(data, at, end)
        wire = key & 7
        if wire == 0:
            _, at = _varint(data, at, end)
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        elif wire == 2:
            length, at = _varint(data, at, end)
            at += length
        elif wire == 3:
            open_groups.append(key >> 3)
        elif wire == 4 and open_groups[-1] == key >> 3:
            open_groups.pop()
        else:
            raise NotAGraph
        if at > end:
            raise NotAGraph
    return at


def _location(data: mmap.mmap | bytes, start: int, end: int) -> str | None:
    """The value of an external_data entry whose key is "location"."""
    key = value = None
    for number, first, last in _fields(data, start, end):
        if number == 1:
            key = bytes(data[first:last])
        elif number == 2:
            value = bytes(data[first:last])
    return value.decode("utf-8", "replace") if key == b"location" and value is not None else None


def _walk(data: mmap.mmap | bytes, found: set[str]) -> None:
    """Add the external data locations of every tensor in the model to `found`."""
    pending = [("model", 0, len(data), 0)]
    while pending:
        kind, start, end, depth = pending.pop()
        if kind == "entry":
            location = _location(data, start, end)
            if location is not None:
                found.add(location)
            continue
        if kind == "graph":
            depth += 1
            if depth > MAX_DEPTH:
                continue
        inner = _MESSAGES[kind]
        for number, first, last in _fields(data, start, end):
            if number in inner:
                pending.append((inner[number], first, last, depth))


def external_files(path: Path) -> set[str]:
    """The external data locations the graph at `path` names, as written in it (relative to its folder);
    NotAGraph when its fields cannot be walked, OSError when it cannot be read."""
    found: set[str] = set()
    with open(path, "rb") as handle:
        if not handle.seek(0, 2):
            raise NotAGraph("the file is empty")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            _walk(data, found)
    return found
