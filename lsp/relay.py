"""What `python -m lsp` is on the shared engine: a small process that hands the editor's pipes to the user's
session host (lsp/session_host.py), which forks the language server for them, and then only waits for that
session's exit code (as a shell, where there is one: see `_wait_for_exit`). When the editor ends this process,
its socket to the session closes, and the session ends too.

It serves in its own process instead (returns None) where the host cannot or should not be used: a private
worker (`--standalone`, COMPLETER_STANDALONE=1), TCP, help, COMPLETER_SESSION_HOST=0, a system other than
Linux, or a host that cannot be started or refuses the request. Nothing of the editor's input has been read
by then, so serving here loses nothing.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import sys
from pathlib import Path

from lsp import __version__

SESSION_HOST_ENV = "COMPLETER_SESSION_HOST"
"""Set to 0, `python -m lsp` runs the server in its own process, as it does with a private worker."""
HEADER = struct.Struct("!I")  # as lsp/session_host.py reads it
PID_TIMEOUT_S = 30.0
"""How long the relay waits for the host to fork the session: past it, the session may be reading the
editor's input, so the relay exits (the editor restarts the server) rather than serving here too."""
SHELL = "/bin/sh"
HANDOVER_ATTEMPTS = 2
"""A host that exits (idle) just as a relay reaches it hangs up; the second attempt finds or starts another."""
_IN_PROCESS_FLAGS = ("--standalone", "--tcp", "--port", "--help", "--version")
HOST_BOOT = "import sys; sys.path[0] = {root!r}; from lsp.session_host import main; sys.exit(main(sys.argv[1:]))"
"""The host's entry, started in /: `python -m` would put the first window's directory (a project, which may
hold modules named like ours or our dependencies') first on every later session's import path."""


def _say(message: str) -> None:
    print(f"completer: {message}", file=sys.stderr, flush=True)


def _in_process_flag(arg: str) -> bool:
    """`--tcp`, `--standalone`, help and the like, or a prefix argparse would take for one of them."""
    name = arg.split("=", 1)[0]
    return name == "-h" or (len(name) > 2 and any(flag.startswith(name) for flag in _IN_PROCESS_FLAGS))


def _interpreter() -> str:
    """What makes this interpreter import and behave as it does: sessions run in a host started the same way
    (the import path past the script's directory, the -X, -W and other flags)."""
    return repr((sys.path[1:], tuple(sys.flags), sys.warnoptions, sorted(sys._xoptions.items())))


def host_socket_path() -> Path:
    """The socket of the session host for this install and interpreter (raises EngineSocketError)."""
    from lsp.engine_socket import socket_path

    return socket_path("sessions", _interpreter())


def _wanted(argv: list[str]) -> bool:
    if any(_in_process_flag(arg) for arg in argv if arg.startswith("-")):
        return False
    if os.environ.get("COMPLETER_STANDALONE") == "1" or os.environ.get(SESSION_HOST_ENV) == "0":
        return False
    if not sys.platform.startswith("linux") or not hasattr(socket, "send_fds"):
        return False  # fork without exec is unsafe on macOS; Windows has neither
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def _read_line(conn: socket.socket, buffered: bytes) -> tuple[str | None, bytes]:
    """The host's next line and what followed it, or None when it hung up first."""
    while b"\n" not in buffered:
        try:
            chunk = conn.recv(4096)
        except ConnectionError:
            chunk = b""
        if not chunk:
            return None, b""
        buffered += chunk
    line, _, rest = buffered.partition(b"\n")
    return line.decode("ascii", "replace"), rest


def _number_after(word: str, line: str | None) -> int | None:
    parts = (line or "").split()
    return int(parts[1]) if len(parts) == 2 and parts[0] == word and parts[1].isdigit() else None


def _limits() -> dict[str, list[int]]:
    """This process's resource limits (the editor's, or a wrapper's such as prlimit), for the session."""
    import resource

    return {name: list(resource.getrlimit(getattr(resource, name)))
            for name in dir(resource) if name.startswith("RLIMIT_")}


def _host_environment() -> dict[str, str]:
    """This process's environment for the host it starts, a relative COMPLETER_LOG_DIR made absolute: the host
    runs in /, and would write its log there (lsp/logs.py's LOG_DIR_ENV; not imported: the relay stays small)."""
    env = dict(os.environ)
    if env.get("COMPLETER_LOG_DIR"):
        env["COMPLETER_LOG_DIR"] = os.path.abspath(env["COMPLETER_LOG_DIR"])
    return env


def _hand_over(conn: socket.socket, argv: list[str], prog: str) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    body = json.dumps({"version": __version__, "argv": argv, "prog": prog, "cwd": os.getcwd(),
                       "env": dict(os.environ), "umask": umask, "limits": _limits(),
                       "nice": os.getpriority(os.PRIO_PROCESS, 0)}).encode()
    socket.send_fds(conn, [HEADER.pack(len(body))], [0, 1, 2])
    conn.sendall(body)


def _wait_for_exit(conn: socket.socket, buffered: bytes) -> int:
    """The session's exit code; 1 when it ended without one (it was killed). Where there is a shell, this
    process becomes one that reads the code from the host's socket (as fd 3) and exits with it: the shell holds
    a few hundred kilobytes where this interpreter holds megabytes, for as long as the editor's window lives.
    Either way, a signal that ends this process closes the socket, and the session ends with it."""
    if not buffered and os.access(SHELL, os.X_OK):
        if conn.fileno() == 3:
            os.set_inheritable(3, True)
        else:
            os.dup2(conn.fileno(), 3)
        try:
            os.execv(SHELL, ["completer-relay", "-c", 'read -r word code <&3; exit "${code:-1}"'])
        except OSError:  # no shell after all: wait here
            os.close(3)
    line, _ = _read_line(conn, buffered)
    code = _number_after("exit", line)
    return 1 if code is None else code


def serve_through_host(argv: list[str], prog: str = "python -m lsp") -> int | None:
    """Serve the editor through the session host: the session's exit code, or None to serve in this process."""
    if not _wanted(argv):
        return None
    from lsp.engine_socket import PACKAGE_ROOT, EngineSocketError, connect_or_start_blocking

    for attempt in range(HANDOVER_ATTEMPTS):
        try:
            boot = HOST_BOOT.format(root=str(PACKAGE_ROOT))
            conn = connect_or_start_blocking(host_socket_path(), [sys.executable, "-c", boot], _host_environment(),
                                             what="the session host", cwd="/")
        except (EngineSocketError, OSError) as exc:
            _say(f"not using the session host ({exc}): serving in this process")
            return None
        with conn:
            problem = "the session host hung up before it started a session"
            try:
                conn.settimeout(PID_TIMEOUT_S)
                try:
                    _hand_over(conn, argv, prog)
                except TimeoutError:
                    raise
                except ConnectionError:  # it hung up while the pipes were on their way; a refusal's line says so
                    pass
                except OSError as exc:
                    problem = f"cannot hand the editor's pipes to the session host ({exc})"
                line, buffered = _read_line(conn, b"")
            except TimeoutError:
                _say(f"the session host did not start a session within {PID_TIMEOUT_S:.0f} s: exiting")
                return 1
            if line is not None and line.startswith("refused"):
                _say("the session host refused this session (its log is lsp-sessions.log): serving in this process")
                return None
            if _number_after("pid", line) is None:
                if attempt + 1 < HANDOVER_ATTEMPTS:
                    continue  # a host exiting as it was reached: the next attempt starts another
                _say(f"{problem}: serving in this process")
                return None
            conn.settimeout(None)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1):  # the session alone reads and writes the editor's channel
                os.dup2(devnull, fd)
            os.close(devnull)
            return _wait_for_exit(conn, buffered)
    return None
