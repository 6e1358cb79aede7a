"""Reading the client's messages: LSP's base protocol (header lines, a blank line, a JSON body), read
leniently and with bounds, so that one bad frame costs that frame and nothing after it.

pygls 2.1.1 matches one exact header, `Content-Length: N\\r\\n`. A header in another case or spacing,
LF line ends, or a length that is not a number leaves it waiting for a blank line that has already
passed: it answers nothing ever again, `shutdown` and `exit` included. A length of 10**15 makes it
allocate until a MemoryError kills the server. Here header names are case-insensitive, spaces and
LF-only line ends are accepted, a length must be a byte count under MAX_MESSAGE_BYTES, and after a
frame that cannot be read the client gets a parse error (id null) and reading resumes at the next
`Content-Length` header, which follows a JSON body on the same line (a JSON body has no raw line
breaks).
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any, Awaitable, Callable, Protocol

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Far above any source file an editor sends; a longer length is taken for a garbled header."""
HEADER_LINE = re.compile(rb"^[A-Za-z0-9-]+\s*:")
CONTENT_LENGTH = re.compile(rb"content-length\s*:", re.IGNORECASE)


class BadFrame(ValueError):
    """A header block without a usable Content-Length: its body's extent is unknown."""


class AsyncReader(Protocol):
    def readline(self) -> Awaitable[bytes]: ...

    def readexactly(self, n: int) -> Awaitable[bytes]: ...


async def _readline(reader: AsyncReader) -> bytes:
    """One line; a line over an asyncio stream's limit (a TCP client's junk) comes back as junk."""
    try:
        return await reader.readline()
    except ValueError:  # asyncio.StreamReader: the line exceeded its limit (and was dropped)
        return b"\x00 an over-long line\n"


def _content_length(value: bytes) -> int:
    text = value.strip().decode("ascii", "replace")
    if not text.isdigit():
        raise BadFrame(f"Content-Length {text[:40]!r} is not a byte count")
    length = int(text)
    if length > MAX_MESSAGE_BYTES:
        raise BadFrame(f"Content-Length {length} exceeds the {MAX_MESSAGE_BYTES}-byte limit")
    return length


async def next_length(reader: AsyncReader) -> int | None:
    """The Content-Length of the next message, with its headers read through the blank line after them;
    None at the end of input. Lines before a header (what is left of a frame that could not be read)
    are skipped up to a `Content-Length` header, even one that starts mid-line after a JSON body.
    Raises BadFrame for a header block whose length is missing or unusable."""
    length: int | None = None
    problem: str | None = None
    in_headers = False
    skipped = 0
    while True:
        line = await _readline(reader)
        if not line:
            if in_headers or skipped:
                log.warning("input ended inside a message's headers")
            return None
        if not line.strip():
            if not in_headers:
                continue  # blank lines between messages
            if skipped:
                log.warning("skipped %d bytes of input that were not an LSP message", skipped)
            if problem is not None or length is None:
                raise BadFrame(problem or "a message without a Content-Length header")
            return length
        if not in_headers:
            if not HEADER_LINE.match(line):
                found = [m.start() for m in CONTENT_LENGTH.finditer(line)]
                if not found:
                    skipped += len(line)
                    continue
                skipped += found[-1]  # the last: a header the body held in a string comes earlier
                line = line[found[-1]:]
            in_headers = True
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                length = _content_length(value)
            except BadFrame as exc:
                problem = str(exc)
        elif not HEADER_LINE.match(line):
            problem = f"a header line that is not `Name: value`: {line[:40]!r}"


async def read_messages(stop: Any, reader: AsyncReader, protocol: Any,
                        error_handler: Callable[[Exception, Any], Any],
                        drain: Callable[[], Awaitable[None]] | None = None) -> None:
    """The server's main loop, in place of pygls' `run_async`: each message's JSON goes to the protocol;
    a frame that cannot be read, or a body that is not JSON, gets a parse error and the loop goes on.
    `stop` is the server's threading.Event, set by `exit`. `drain`, where the answers are written without
    blocking (TCP), waits while those not yet taken by the client are over its transport's high-water mark: a
    client that stops reading is not read either, as on stdio, where a write blocks, instead of having every
    answer to what it goes on sending kept for it."""
    from pygls.exceptions import JsonRpcException

    from lsp.protocol import is_parse_error

    while not stop.is_set():
        if drain is not None:
            await drain()
        try:
            length = await next_length(reader)
        except BadFrame as exc:
            log.warning("unreadable message frame: %s", exc)
            protocol.send_parse_error(exc)
            continue
        if length is None:
            return
        try:
            body = await reader.readexactly(length) if length else b""
        except asyncio.IncompleteReadError:
            body = b""
        if len(body) < length:
            log.warning("input ended inside a message's body")
            return
        try:
            message = json.loads(body, object_hook=protocol.structure_message)
            protocol.handle_message(message)
        except Exception as exc:  # the protocol answers what it can; the loop must survive the rest
            if is_parse_error(exc):  # the client's mistake: answered with a parse error, no traceback
                log.warning("a message body that is not JSON: %s", str(exc)[:200])
            else:
                log.exception("unable to handle a message")
            error_handler(exc, JsonRpcException)
