"""The user's session host: one process that has the language server's code (pygls, lsprotocol, this package)
imported once, and forks a session for each editor window.

The editor starts `python -m lsp`; on the shared engine, that process is only a relay (lsp/relay.py): it hands
its stdin, stdout and stderr to the host over a Unix socket and waits. The host forks, and the child runs the
language server on the editor's own pipes, with the relay's arguments, directory and environment. Forked
children share the host's pages until they write to them, so each further window costs the few megabytes
its session writes instead of a whole interpreter with pygls and lsprotocol (docs/benchmarks.md, "Editor
windows on one engine"). The model and its caches stay in the engine, as before.

The host runs no thread, so forking it is safe. It exits a while after its last session ends, like the engine.
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

from lsp import __version__
from lsp.allocator_gaps import fill_free_blocks, fill_malloc_free_chunks

log = logging.getLogger("lsp.session_host")  # not __main__, as which it runs

SESSIONS_LOG = "lsp-sessions.log"
SESSION_PROGS = ("python -m lsp", "completer serve")
"""The names a session's usage messages go by (lsp/__main__.py, completer/cli.py): their parsers are built here."""
HEADER = struct.Struct("!I")
"""The relay's request: this header (the JSON's length) with the three descriptors, then the JSON."""
MAX_REQUEST_BYTES = 4 * 1024 * 1024
REQUEST_TIMEOUT_S = 5.0
"""How long a connection may take to send its request; the host serves no one else meanwhile."""
ACCEPT_TICK_S = 0.5
IDLE_EXIT_ENV = "COMPLETER_ENGINE_IDLE_EXIT_S"
"""The host, like the engine, exits this long (300 s unless set) after its last session ends."""


def _preload() -> None:
    """Import what every session runs, and build what every session would build the same way (the argument
    parsers, a server with its handlers and the converter's hooks), so that sessions share them; fill the
    allocators' gaps (lsp/allocator_gaps.py); then move every object out of the collector's reach, so that
    collections in a session do not touch (and copy) them."""
    import resource  # noqa: F401
    import sysconfig

    import pygls.progress  # noqa: F401
    import completer.bundle  # noqa: F401
    import lsp.handlers  # noqa: F401
    from lsp.cli import build_parser
    from lsp.server import prepare_spare_server

    sysconfig.get_config_vars()  # read by the first session otherwise

    for prog in SESSION_PROGS:
        build_parser(prog)
    prepare_spare_server()
    gc.collect()
    fill_free_blocks()
    fill_malloc_free_chunks()
    fill_free_blocks()  # the C allocator's fill made Python objects too
    gc.freeze()


def _read_exactly(conn: socket.socket, size: int, deadline: float) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ValueError(f"the request was not sent within {REQUEST_TIMEOUT_S:.0f} s")
        conn.settimeout(left)
        chunk = conn.recv(min(65536, size - len(chunks)))
        if not chunk:
            raise ValueError("the relay hung up mid-request")
        chunks += chunk
    return bytes(chunks)


def _valid_request(request: Any) -> dict[str, Any]:
    """The relay's request, checked field by field: a bad one is refused, never half used."""
    if not isinstance(request, dict) or request.get("version") != __version__:
        raise ValueError(f"a request of version {request.get('version') if isinstance(request, dict) else None!r}, "
                         f"this host is {__version__}")
    argv, cwd, env, umask = request.get("argv"), request.get("cwd"), request.get("env"), request.get("umask")
    if not (isinstance(argv, list) and all(isinstance(arg, str) for arg in argv)):
        raise ValueError("argv is not a list of strings")
    if not isinstance(cwd, str) or not isinstance(request.get("prog"), str):
        raise ValueError("cwd or prog is not a string")
    if not isinstance(umask, int) or isinstance(umask, bool) or not 0 <= umask <= 0o777:
        raise ValueError("umask is malformed")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise ValueError("env is not a mapping of strings")
    if any(not k or "=" in k or "\0" in k or "\0" in v for k, v in env.items()):
        raise ValueError("env holds a name or value no environment can hold")
    nice, limits = request.get("nice"), request.get("limits")
    if not isinstance(nice, int) or isinstance(nice, bool) or not -20 <= nice <= 19:
        raise ValueError("nice is malformed")
    if not (isinstance(limits, dict) and all(
            isinstance(name, str) and name.startswith("RLIMIT_") and isinstance(pair, list) and len(pair) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in pair) for name, pair in limits.items())):
        raise ValueError("limits are malformed")
    return request


def _apply_limits(request: dict[str, Any]) -> None:
    """The editor's process's niceness and resource limits, as far as this process may take them: a limit
    above the host's hard limit, or a niceness below the host's, stays the host's, and stderr says so."""
    import resource

    for name, (soft, hard) in request["limits"].items():
        kind = getattr(resource, name, None)
        if isinstance(kind, int) and resource.getrlimit(kind) != (soft, hard):
            try:
                resource.setrlimit(kind, (soft, hard))
            except (ValueError, OSError) as exc:
                print(f"completer: keeping the session host's {name} ({exc})", file=sys.stderr)
    now = os.getpriority(os.PRIO_PROCESS, 0)
    if request["nice"] != now:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, request["nice"])
        except OSError as exc:
            print(f"completer: keeping the session host's niceness {now} ({exc})", file=sys.stderr)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """A relay's request and its descriptors (closed here when the request is refused), within
    REQUEST_TIMEOUT_S all told."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    conn.settimeout(REQUEST_TIMEOUT_S)
    relay_pid = None
    if hasattr(socket, "SO_PEERCRED"):
        relay_pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                struct.calcsize("3i")))
        if uid != os.getuid():
            raise ValueError(f"a connection from uid {uid}")
    header, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    try:
        if len(header) != HEADER.size or len(fds) != 3:
            raise ValueError(f"expected a header and 3 descriptors, got {len(header)} bytes and {len(fds)}")
        (size,) = HEADER.unpack(header)
        if size > MAX_REQUEST_BYTES:
            raise ValueError(f"a request of {size} bytes")
        request = _valid_request(json.loads(_read_exactly(conn, size, deadline)))
        request["relay_pid"] = relay_pid  # the process the editor started, whose processId may name it
        return request, fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _send(conn: socket.socket, word: str, number: int) -> None:
    """One line to the relay: `pid N` once the session runs, `exit N` when it ends (a shell reads the last), or
    `refused 0` when there is no session."""
    try:
        conn.sendall(f"{word} {number}\n".encode())
    except OSError:  # the relay is gone
        pass


def _watch_relay(conn: socket.socket) -> None:
    """End the session when its relay dies: the editor killed the process it started, and may still hold the
    pipes open, so the server would not see the end of its input."""
    try:
        conn.recv(1)
    except OSError:
        pass
    os._exit(1)  # at once: flushing logs could wait forever on a thread stuck writing to a full stderr pipe


def _adopt_environment(wanted: dict[str, str]) -> None:
    """Make the environment `wanted`, setting only the variables that differ: each one set allocates in the C
    library's heap, and on a page shared with the host that copies the page (a window usually has the host's
    environment, so this writes almost nothing). What the host cached from its own environment is dropped: the
    temporary directory (TMPDIR), found anew on first use."""
    for name in [name for name in os.environ if name not in wanted]:
        del os.environ[name]
    for name, value in wanted.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    tempfile.tempdir = None


def _adopt(fds: list[int], request: dict[str, Any]) -> None:
    """Become the process the editor started: its pipes as fds 0-2, its directory, environment, umask,
    resource limits and niceness."""
    for target, fd in enumerate(fds):
        if fd != target:
            os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    sys.stdin = open(0, "r", closefd=False, encoding="utf-8", errors="replace")
    sys.stdout = open(1, "w", closefd=False, encoding="utf-8", errors="replace")
    sys.stderr = open(2, "w", closefd=False, encoding="utf-8", errors="replace", buffering=1)
    _adopt_environment(request["env"])
    os.umask(request["umask"])
    _apply_limits(request)
    try:
        os.chdir(request["cwd"])
    except OSError as exc:
        print(f"completer: cannot enter {request['cwd']} ({exc}); serving from {os.getcwd()}", file=sys.stderr)
    sys.argv = [sys.argv[0], *request["argv"]]
    for handler in list(logging.getLogger().handlers):  # the host's log file; the server sets up its own
        logging.getLogger().removeHandler(handler)
        handler.close()


def _run_session(listener: socket.socket, conn: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
    """In the forked child: serve the editor until it exits, report the exit code to the relay, and exit."""
    code: Any = 1
    try:
        listener.close()
        conn.settimeout(None)
        _adopt(fds, request)
        _send(conn, "pid", os.getpid())
        threading.Thread(target=_watch_relay, args=(conn,), name="relay-watch", daemon=True).start()
        from lsp.server import main

        code = main(request["argv"], prog=request["prog"], session_host_pid=os.getppid(),
                    started_as=request.get("relay_pid"))
    except SystemExit as exc:  # argparse's usage errors and --help
        code = exc.code
    except KeyboardInterrupt:  # a SIGINT sent to the session: ended as by the signal, without a traceback
        code = 128 + signal.SIGINT
    except BaseException:  # noqa: BLE001 (a session's crash is its own; the editor sees it on stderr)
        traceback.print_exc()
        code = 1
    finally:
        if not isinstance(code, int):
            if code is not None:
                print(code, file=sys.stderr)
            code = 0 if code is None else 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        logging.shutdown()
        _send(conn, "exit", code)
        os._exit(code)


def _reap(sessions: set[int]) -> None:
    while sessions:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            sessions.clear()
            return
        if pid == 0:
            return
        sessions.discard(pid)


def serve(listener: socket.socket, idle_exit_s: float) -> None:
    """Accept relays and fork a session for each, until no session has run for `idle_exit_s`."""
    sessions: set[int] = set()
    idle_since = time.monotonic()
    listener.settimeout(ACCEPT_TICK_S)
    while True:
        _reap(sessions)
        if sessions:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > idle_exit_s:
            log.info("no session for %.0f s: exiting", idle_exit_s)
            return
        try:
            conn, _ = listener.accept()
        except (TimeoutError, socket.timeout):
            continue
        try:
            request, fds = _receive(conn)
        except Exception as exc:  # noqa: BLE001 (whatever a request holds, it never ends the host)
            log.warning("refused a session: %s", exc if isinstance(exc, (OSError, ValueError)) else repr(exc))
            _send(conn, "refused", 0)
            conn.close()
            continue
        if threading.active_count() != 1:  # never fork a process with threads; nothing here starts one
            raise RuntimeError(f"the session host has {threading.active_count()} threads")
        try:
            pid = os.fork()
        except OSError as exc:  # out of processes or memory: the relay serves in its own process
            log.warning("cannot fork a session: %s", exc)
            _send(conn, "refused", 0)
        else:
            if pid == 0:
                _run_session(listener, conn, fds, request)
            sessions.add(pid)
            idle_since = time.monotonic()
            log.info("session %d started for %s", pid, " ".join(request["argv"]) or "python -m lsp")
        for fd in fds:
            os.close(fd)
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lsp.session_host", description=__doc__.split("\n")[0])
    parser.add_argument("--listen", required=True, help="the Unix socket to accept relays on")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)

    from lsp.engine_socket import listen, unlisten
    from lsp.logs import setup_host_logging

    setup_host_logging(args.log_level, SESSIONS_LOG)
    _preload()
    listener, inode = listen(args.listen)  # refuses a directory that is not the user's own
    log.info("session host %d listening on %s", os.getpid(), args.listen)
    try:
        serve(listener, float(os.environ.get(IDLE_EXIT_ENV) or 300))
    finally:
        unlisten(listener, args.listen, inode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
