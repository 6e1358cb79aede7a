"""Where the user's shared engine listens, and how a server reaches it: a Unix socket in a directory only the
user can enter, mode 0600, never TCP. The first server to need it starts it, under a lock, so two servers
starting at once start one engine; a stale socket (its engine died) is replaced under the same lock. A socket
or directory that belongs to someone else, or that others could open, is refused, never used.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from lsp import __version__

log = logging.getLogger(__name__)

RUNTIME_DIR_ENV = "COMPLETER_RUNTIME_DIR"
"""Overrides where the socket lives (tests give each run its own engine)."""
STANDALONE_ENV = "COMPLETER_STANDALONE"
"""Set to 1, the server runs a private worker as `--standalone` does."""
START_TIMEOUT_S = 20.0
"""How long a server waits for an engine it started to listen."""
LOCK_WAIT_S = 5.0
"""How long a server waits for another that is starting the engine (well under a second, normally) before it
runs a private worker instead."""
MAX_SOCKET_PATH_BYTES = 107  # sun_path holds 108 bytes on Linux, with the terminating NUL
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
SOURCE_PACKAGES = ("lsp", "completer")


def source_fingerprint(root: Path = PACKAGE_ROOT) -> str:
    """The state of the code under `root`: each source file's path, size and modification time. Servers started
    after a checkout is pulled or the package upgraded, while editors still run, get their own session host and
    engine, not the ones still running the code they loaded before (which idle out once their sessions end)."""
    entries = []
    for package in SOURCE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            try:
                info = path.stat()
            except OSError:  # removed while we looked: the next server sees the tree as it ends up
                continue
            entries.append(f"{path.relative_to(root)}\0{info.st_size}\0{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:12]


SOURCE_FINGERPRINT = source_fingerprint()
"""Taken once, as this process imports its code: a session forked from the session host shares the host's, so it
reaches the engine of the code it runs even after the files change."""


CODE_CHANGED_EXIT = 3
"""A worker's exit code when the code it imported is not that of the server that started it (`--source`)."""


class EngineSocketError(Exception):
    """The shared engine cannot be used safely or at all; the message says why, in one line."""


class StartKilled(ConnectionError):
    """What a server started was killed by a signal before it listened (the OOM killer, a `kill`): no fault of the
    install, so, as for a connection reset by an engine being killed, the caller tries again and starts another."""


class CodeChanged(EngineSocketError):
    """The code on disk is no longer the code this process runs (an update or a git pull since it started): any
    worker it started now would import the new code and speak to it in the protocol of before."""


def code_changed_on_disk() -> bool:
    """Whether the source files are no longer those this process imported (a few dozen stat calls)."""
    return source_fingerprint() != SOURCE_FINGERPRINT


def code_changed_message() -> str:
    return ("the completer's code changed on disk since this server started (an update or a git pull): restart "
            "the language server to get completions again")


def shared_engine_supported() -> bool:
    return hasattr(socket, "AF_UNIX") and os.name == "posix"


def _xdg_runtime_dir() -> Path | None:
    """$XDG_RUNTIME_DIR where it is usable: an absolute path to a directory the user owns and may write in. One
    that is gone (a tmux session outlives the login whose /run/user/<uid> systemd removed) is not made anew, a
    relative one would put a socket directory, and an engine, in each project the editor starts a server in, and
    another user's (`sudo -E` keeps it) would get a directory of root's that the user's own windows then refuse."""
    value = os.environ.get("XDG_RUNTIME_DIR")
    if not value or not os.path.isabs(value) or not os.path.isdir(value) or not os.access(value, os.W_OK | os.X_OK):
        return None
    if os.stat(value).st_uid != os.getuid():
        return None
    return Path(value)


def runtime_dir() -> Path:
    """The user's private directory for the socket: $COMPLETER_RUNTIME_DIR, $XDG_RUNTIME_DIR/completer (where
    that is usable), or <tmp>/completer-<uid>; made 0700 if missing, refused unless the user owns it and no one
    else may enter."""
    base, xdg = os.environ.get(RUNTIME_DIR_ENV), _xdg_runtime_dir()
    if base:
        path = Path(base)
    elif xdg is not None:
        path = xdg / "completer"
    else:
        path = Path(tempfile.gettempdir()) / f"completer-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        raise EngineSocketError(f"cannot make the engine's directory {path}: {exc}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise EngineSocketError(f"{path} is not a private directory of this user (owner uid {info.st_uid}, mode "
                                f"{stat.filemode(info.st_mode)}): not using a shared engine there")
    return path


def interpreter() -> str:
    """This interpreter, whatever name started it: python, python3 and python3.11 beside one another (an editor's
    `python -m lsp`, a console script's shebang) are one, and one engine serves them; each virtual environment
    (its own prefix, the same binary) is one of its own."""
    return f"{os.path.realpath(sys.executable) if sys.executable else ''}\0{sys.prefix}"


def socket_path(kind: str = "engine", variant: str = "") -> Path:
    """The socket of the user's engine (or of their session host, lsp/session_host.py) for this install: one
    per version, package location, state of its source files and interpreter (and `variant`), so servers of
    another install, or of this one before or after its code changed, never talk to a process that speaks
    differently. Refused when longer than a Unix socket's address can hold."""
    install = hashlib.sha256(f"{PACKAGE_ROOT}\0{SOURCE_FINGERPRINT}\0{interpreter()}\0{variant}".encode()
                             ).hexdigest()[:12]
    path = runtime_dir() / f"{kind}-{__version__}-{install}.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise EngineSocketError(f"the socket path {path} is {len(os.fsencode(path))} bytes, over the "
                                f"{MAX_SOCKET_PATH_BYTES} a Unix socket's address holds")
    return path


def check_socket(path: Path) -> None:
    """Refuse a socket file that is not the user's own, mode 0600 (FileNotFoundError when there is none)."""
    info = path.lstat()
    if not stat.S_ISSOCK(info.st_mode):
        raise EngineSocketError(f"{path} is not a socket: not using it")
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise EngineSocketError(f"{path} belongs to uid {info.st_uid} with mode {stat.filemode(info.st_mode)}: "
                                "not using it")


def listen(path: str | Path) -> tuple[socket.socket, int]:
    """The engine's listening socket at `path`, created 0600 (the umask is set while it is bound), and the
    socket file's inode, which `unlisten` checks before removing it."""
    path = Path(path)
    runtime = path.parent
    info = runtime.lstat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise EngineSocketError(f"{runtime} is not a private directory of this user")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a stale socket: the server that started us holds the lock, so no engine uses it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    listener.listen(64)
    return listener, path.lstat().st_ino


def unlisten(listener: socket.socket, path: str | Path, inode: int) -> None:
    """Close the listener and remove its socket file, unless another engine has replaced it since."""
    listener.close()
    with contextlib.suppress(OSError):
        if Path(path).lstat().st_ino == inode:
            Path(path).unlink()


@contextlib.contextmanager
def _start_lock(lock_path: Path) -> Any:
    """An exclusive lock on the lock file: one server at a time starts (or replaces) the process listening on a
    socket. Waits at most LOCK_WAIT_S: a lock held longer belongs to something stuck, and the server then runs
    a private worker (or in its own process) rather than not at all."""
    import fcntl

    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise EngineSocketError(f"cannot open the lock file {lock_path}: {exc}") from None
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EngineSocketError(f"another process has held {lock_path} for over "
                                            f"{LOCK_WAIT_S:.0f} s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _connected(path: Path) -> socket.socket | None:
    """A connection to the engine at `path`, or None when no engine listens there (no file, or a stale one)."""
    try:
        check_socket(path)
    except FileNotFoundError:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError as exc:
        sock.close()
        raise EngineSocketError(f"cannot connect to the shared engine at {path}: {exc}") from None
    return sock


def connect_or_start_blocking(path: Path, command: list[str], env: dict[str, str],
                              what: str = "the shared engine", cwd: str | None = None) -> socket.socket:
    """Connect, or under the lock start `command --listen path` (another server may have started it meanwhile)
    and connect. The lock is named after the socket's kind (engine.lock, sessions.lock)."""
    sock = _connected(path)
    if sock is not None:
        return sock
    with _start_lock(path.parent / f"{path.name.split('-', 1)[0]}.lock"):
        sock = _connected(path)
        if sock is not None:
            return sock
        log.info("starting %s on %s", what, path)
        engine = subprocess.Popen([*command, "--listen", str(path)], env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                  close_fds=True, cwd=cwd)
        deadline = time.monotonic() + START_TIMEOUT_S
        while (sock := _connected(path)) is None:
            if engine.poll() == CODE_CHANGED_EXIT:
                raise CodeChanged(code_changed_message())
            if engine.poll() is not None and engine.returncode < 0:
                raise StartKilled(f"{what} was killed by signal {-engine.returncode} before it listened on {path}")
            if engine.poll() is not None:
                raise EngineSocketError(f"{what} exited with code {engine.returncode} before it "
                                        f"listened on {path} (see its log)")
            if time.monotonic() > deadline:
                raise EngineSocketError(f"{what} did not listen on {path} within {START_TIMEOUT_S:.0f} s")
            time.sleep(0.02)
        return sock


async def _on_daemon_thread(function: Any, *args: Any) -> Any:
    """`function(*args)` on a daemon thread: unlike asyncio.to_thread's pool, one still waiting for the lock
    never keeps the server from exiting."""
    import asyncio

    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Any) -> None:
        try:
            loop.call_soon_threadsafe(outcome)
        except RuntimeError:  # the loop is gone: the server is exiting
            pass

    def run() -> None:
        try:
            result = function(*args)
        except BaseException as exc:  # noqa: BLE001 (handed to the awaiting coroutine)
            settle(lambda error=exc: done.done() or done.set_exception(error))
        else:
            settle(lambda: done.done() or done.set_result(result))

    threading.Thread(target=run, name="engine-connect", daemon=True).start()
    return await done


async def connect_or_start(engine_command: list[str], env: dict[str, str], start: bool = True
                           ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the user's engine, started first if none listens (on a thread: the lock blocks). With
    `start` False (the code changed on disk), only an engine that listens already: CodeChanged when none does.
    Raises EngineSocketError, or StartKilled (an OSError: worth another try) when the engine it started was killed
    before it listened."""
    import asyncio

    from lsp import framing

    path = socket_path()
    if start:
        # in /: the engine outlives the window that starts it, whose project it must neither keep busy (an
        # unmount) nor import from (PYTHONPATH=.) for the other windows
        sock = await _on_daemon_thread(connect_or_start_blocking, path, engine_command, env, "the shared engine", "/")
    elif (connected := _connected(path)) is not None:
        sock = connected
    else:
        raise CodeChanged(code_changed_message())
    sock.setblocking(False)
    return await asyncio.open_unix_connection(sock=sock, limit=framing.MAX_FRAME_BYTES)
