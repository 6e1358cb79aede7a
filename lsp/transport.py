"""Loopback TCP for exactly one client.

pygls' `start_tcp` keeps accepting connections, and each new one takes over the server's output:
any local process could connect second and read the first client's completions. We accept the
first connection, stop listening at once, and turn away anything that raced in before that.
"""
from __future__ import annotations

import asyncio
import logging
import threading

from pygls.io_ import run_async
from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


async def _serve_first_client(server: LanguageServer, port: int) -> None:
    finished = asyncio.get_running_loop().create_future()
    taken = False

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal taken
        if taken:
            log.warning("refused a second TCP client from %s", writer.get_extra_info("peername"))
            writer.close()
            return
        taken = True
        listener.close()
        log.info("TCP client connected from %s; no longer listening", writer.get_extra_info("peername"))
        server.protocol.set_writer(writer)  # type: ignore[arg-type]
        try:
            await run_async(stop_event=server._stop_event, reader=reader, protocol=server.protocol,  # type: ignore[arg-type]
                            logger=log, error_handler=server.report_server_error)
        finally:
            if not finished.done():
                finished.set_result(None)

    listener = await asyncio.start_server(on_connect, LOOPBACK, port)
    log.info("listening on %s for one client", ", ".join(str(s.getsockname()) for s in listener.sockets))
    try:
        await finished
    finally:
        listener.close()


def serve_tcp_once(server: LanguageServer, port: int) -> None:
    """Serve one client on 127.0.0.1:`port` until it disconnects or says exit."""
    server._stop_event = threading.Event()
    try:
        asyncio.run(_serve_first_client(server, port))
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
