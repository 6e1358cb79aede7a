"""The server's two transports: stdio (the default) and loopback TCP for exactly one client. Both read
the client's messages with `lsp.reader`, not pygls' loop.

pygls' `start_tcp` keeps accepting connections, and each new one takes over the server's output:
any local process could connect second and read the first client's completions. We accept the
first connection of this user's (on Linux, where the kernel's table of sockets names each one's owner; another
account's is turned away), stop listening at once, and turn away anything that raced in before that.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import sys
import threading
from typing import Awaitable, BinaryIO, Callable

from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.lsp.server import LanguageServer

from lsp.reader import AsyncReader, read_messages

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


class StdoutOnce(StdoutWriter):
    """pygls' stdout writer, writing nothing once the output is closed (by `exit`) or the client's end of it is
    gone. pygls logged a traceback for each message it could not write: the log lines of the teardown after an
    `exit` without `shutdown` (the worker exited), and every answer to a client that had stopped reading. The
    first write that fails is one log line."""

    def __init__(self, stdout: BinaryIO) -> None:
        super().__init__(stdout)
        self.closed = False

    def close(self) -> None:
        self.closed = True
        super().close()

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            super().write(data)
        except (OSError, ValueError) as exc:  # BrokenPipeError; ValueError: the file was closed
            self.closed = True
            log.warning("the client's end of stdio is gone (%s); nothing more is sent", exc)


async def read_until_done(server: LanguageServer, reader: AsyncReader,
                          drain: Callable[[], Awaitable[None]] | None = None) -> None:
    """The client's messages until `exit` or the end of its input. Either way the worker is stopped while
    the loop still runs: left to asyncio.run's teardown, a client gone without `exit` had its worker
    waited on for 5 s, killed, and restarted just before the server quit. `drain`: see `read_messages`."""
    try:
        await read_messages(server._stop_event, reader, server.protocol, server.report_server_error, drain)
    finally:
        stop_worker = getattr(server, "shutdown_worker", None)
        if stop_worker is not None:
            await stop_worker()


PROC_NET_TCP = "/proc/net/tcp"


def _proc_address(address: tuple[str, int]) -> str:
    """An IPv4 address and port as /proc/net/tcp writes them: the address's 32 bits in the machine's byte order,
    then the port, in hex."""
    host, port = address[:2]
    return "%08X:%04X" % (struct.unpack("=I", socket.inet_aton(host))[0], port)


def peer_uid(peer: tuple[str, int] | None, ours: tuple[str, int] | None, table: str = PROC_NET_TCP) -> int | None:
    """The uid of the process that owns the client's end of a loopback connection, from Linux's table of TCP
    sockets; None where there is no such table (macOS), so that TCP serves the first client there as before.
    Any account on the machine can connect to 127.0.0.1: the first one to would have the server read this user's
    files and send them, and an environment variable's value (`apiKeyEnv`), to an endpoint of its choosing.
    A connection the table does not show (gone already) is -1: refused."""
    try:
        with open(table, encoding="ascii") as rows:
            lines = rows.readlines()[1:]
    except OSError:
        return None
    if peer is None or ours is None:
        return -1
    client, server = _proc_address(peer), _proc_address(ours)
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and fields[1] == client and fields[2] == server:
            return int(fields[7])
    return -1


async def _serve_first_client(server: LanguageServer, port: int) -> None:
    finished = asyncio.get_running_loop().create_future()
    taken = False

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal taken
        if taken:
            log.warning("refused a second TCP client from %s", writer.get_extra_info("peername"))
            writer.close()
            return
        owner = peer_uid(writer.get_extra_info("peername"), writer.get_extra_info("sockname"))
        if owner is not None and owner != os.getuid():
            log.warning("refused a TCP client of another user (uid %d) from %s; still listening for this user's",
                        owner, writer.get_extra_info("peername"))
            writer.close()
            return
        taken = True
        listener.close()
        log.info("TCP client connected from %s; no longer listening", writer.get_extra_info("peername"))
        server.protocol.set_writer(writer)  # type: ignore[arg-type]
        try:
            await read_until_done(server, reader, writer.drain)  # answers it does not read hold its messages
        except SystemExit:  # `exit`: the session is over; raised here it would be logged as a crash
            pass
        except ConnectionError as exc:  # reset by a client that crashed: its input ended, not the server
            log.warning("the TCP client's connection was lost (%s)", exc)
        except asyncio.CancelledError:  # Ctrl-C: the loop is torn down. Ended, not cancelled, as Python 3.11's
            pass  # start_server then asks the task for its exception, and a cancelled one prints a traceback
        finally:
            if not finished.done():
                finished.set_result(None)

    try:
        listener = await asyncio.start_server(on_connect, LOOPBACK, port)
    except OSError as exc:  # in use, or below 1024 without the privilege
        raise SystemExit(f"completer serve: cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}") from None
    where = ", ".join("%s:%d" % s.getsockname()[:2] for s in listener.sockets)
    log.info("listening on %s for one client", where)
    print(f"completer serve: listening on {where} for one client", file=sys.stderr, flush=True)  # port 0: which
    try:
        await finished
    finally:
        listener.close()


def serve_tcp_once(server: LanguageServer, port: int) -> None:
    """Serve one client on 127.0.0.1:`port` until it disconnects or says exit."""
    server._stop_event = threading.Event()
    try:
        asyncio.run(_serve_first_client(server, port))
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()


def serve_stdio(server: LanguageServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Serve the client on `stdin`/`stdout` until it says exit or closes its end (pygls' `start_io`, with
    our reader)."""
    server._stop_event = threading.Event()
    server.protocol.set_writer(StdoutOnce(stdout))  # type: ignore[arg-type]
    reader = StdinAsyncReader(stdin, server.thread_pool)
    try:
        asyncio.run(read_until_done(server, reader))
    except BrokenPipeError:
        log.error("the client's end of stdio is gone; shutting down")
    except KeyboardInterrupt:
        _exit_interrupted(server)
    except SystemExit:
        pass
    finally:
        server.shutdown()


def _exit_interrupted(server: LanguageServer) -> None:
    """SIGINT: the worker was stopped as the loop ended (`read_until_done`), but the thread reading stdin may still
    wait for input the client never sends, and the thread pool (`server.shutdown`, then the interpreter's exit) waits
    for that thread. Exit now, as when the editor's process is gone (lsp/editor_process.py), with LSP's code (the log
    handlers write each line as it comes)."""
    worker = getattr(server, "worker", None)
    if worker is not None:
        worker.kill()
    code = 0 if getattr(server.protocol, "_shutdown", False) else 1
    log.info("interrupted (SIGINT): exiting with code %d", code)
    os._exit(code)
