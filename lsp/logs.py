"""Logging: a rotating file in the user log dir, plus `window/logMessage` to the editor.

Editors show window/logMessage in their LSP log, which is where users look first; the file
survives the editor session for bug reports. The pygls loggers are kept at WARNING (unless
--log-level is DEBUG) because pygls logs every message body at INFO, documents included.
"""
from __future__ import annotations

import asyncio
import logging
import logging.handlers
import os
import select
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import appdirs

LOG_DIR_ENV = "COMPLETER_LOG_DIR"
SERVER_LOG = "lsp.log"
WORKER_LOG = "lsp-worker.log"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
_OWN_LOGGERS = ("lsp", "completer")


def log_dir() -> Path:
    """`appdirs.user_log_dir("completer")`, or $COMPLETER_LOG_DIR when set (tests, sandboxes)."""
    return Path(os.environ.get(LOG_DIR_ENV) or appdirs.user_log_dir("completer"))


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log that only its user may read: its lines name the user's files and settings, and at DEBUG hold
    the code suggested (pygls logs the messages it sends), which the umask (commonly 022) left readable to every
    account on the machine. Each file is made 0600 when opened, a log written before included."""

    def _open(self) -> Any:
        descriptor = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        _make_private(descriptor)
        return os.fdopen(descriptor, "a", encoding=self.encoding, errors=self.errors)


def _make_private(file: int | Path) -> None:
    """Take group's and others' access away from a log file (a descriptor, or a path: an older rotated log)."""
    if os.name != "posix":  # Windows' files are private to the user's profile by its ACLs
        return
    try:
        mode = os.stat(file).st_mode
        if stat.S_ISREG(mode) and mode & 0o077:  # not a terminal or a pipe (--log-file /dev/stderr)
            os.chmod(file, stat.S_IMODE(mode) & 0o700)
    except OSError:  # gone, or a file of another owner (a log directory given by hand): left as it is
        pass


def _file_handler(path: Path) -> logging.Handler | None:
    try:
        _private_directory(path.parent)
        handler = PrivateRotatingFileHandler(path, maxBytes=2_000_000, backupCount=2, encoding="utf-8",
                                             errors="backslashreplace")  # a client's lone surrogate
        for number in range(1, handler.backupCount + 1):
            _make_private(Path(f"{path}.{number}"))
    except OSError as exc:  # read-only home, full disk: keep serving, log to stderr only
        print(f"completer: cannot write log file {path}: {exc}", file=sys.stderr)
        return None
    handler.setFormatter(logging.Formatter(_FORMAT))
    return handler


def _private_directory(folder: Path) -> None:
    """Make the log's folder, the last level 0700 when this makes it (one that exists is the user's choice)."""
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)


def _configure(level: str, path: Path | None, stderr: bool) -> Path | None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    root = logging.getLogger()
    root.setLevel(numeric)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    written: Path | None = None
    if path is not None and (handler := _file_handler(path)) is not None:
        root.addHandler(handler)
        written = path
    if stderr:
        err = StderrHandler(sys.stderr)
        err.setFormatter(logging.Formatter(_FORMAT))
        err.setLevel(max(numeric, logging.WARNING))
        root.addHandler(err)
    noisy = logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING
    logging.getLogger("pygls").setLevel(max(noisy, numeric))
    for name in ("pygls.protocol.json_rpc", "pygls.server"):
        noisy_logger = logging.getLogger(name)
        if not any(isinstance(f, _HandledElsewhere) for f in noisy_logger.filters):
            noisy_logger.addFilter(_HandledElsewhere())
    return written


class StderrHandler(logging.StreamHandler):
    """The log's copy on stderr (warnings and errors), which never waits for its reader. An editor that does not read
    the server's stderr let the pipe fill (64 kB, a few hundred warnings of a client's mistakes or a bad setting), and
    the next warning blocked the server for good: nothing was answered again. A line the pipe has no room for is left
    out (the log file has it), and the next one written says how many were."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.left_out = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a file (a test's capture), or closed: written as before
            super().emit(record)
            return
        try:
            text = self.format(record) + self.terminator
            if self.left_out:
                text = f"\n({self.left_out} log lines left out here: stderr was not being read)\n{text}"
            if not self._write(fd, text.encode(getattr(self.stream, "encoding", None) or "utf-8", "backslashreplace")):
                self.left_out += 1
                return
            self.left_out = 0
        except Exception:  # noqa: BLE001 (as StreamHandler: logging must never take the server down)
            self.handleError(record)

    def _write(self, fd: int, data: bytes) -> bool:
        """Write `data` in pieces a pipe takes whole or not at all, each only where there is room for it; False
        once one had none (the line was left out, or cut). Anything but a pipe or a socket (a file, a terminal)
        takes it all, as any program's stderr would."""
        if not _may_stall(fd):
            self.stream.flush()
            while data:
                data = data[os.write(fd, data):]
            return True
        if _room_in(fd):
            self.stream.flush()  # what was written to the stream itself (print) comes first
        for start in range(0, len(data), _ATOMIC_BYTES):
            piece = data[start:start + _ATOMIC_BYTES]
            if not _room_in(fd):
                return False
            while piece:
                piece = piece[os.write(fd, piece):]
        return True


_ATOMIC_BYTES = getattr(select, "PIPE_BUF", 512)
"""A write this long to a pipe with room for it (POLLOUT: a page, 4096 bytes, free) goes through whole at once."""


def _may_stall(fd: int) -> bool:
    """Whether `fd` is a pipe or a socket, what an editor that may not read it connects stderr to: the only kinds
    `_room_in` can tell of. macOS's poll answers POLLNVAL for a device (a terminal), and every line written to a
    terminal there was left out; Linux's says a terminal has room where a line may not fit."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False  # closed: the write says so, as a plain StreamHandler's would
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _room_in(fd: int) -> bool:
    """Whether a write of _ATOMIC_BYTES to `fd` goes through without waiting (always, where poll is not there)."""
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLOUT for _, events in poller.poll(0))


class _HandledElsewhere(logging.Filter):
    """Drop pygls' tracebacks for failures lsp.protocol answers and logs itself in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Unable to deserialize message", "Unable to handle message"))


def setup_server_logging(level: str, log_file: str | None = None) -> Path | None:
    """Configure the server process's logging; returns the log file actually written, if any."""
    path = Path(log_file) if log_file else log_dir() / SERVER_LOG
    return _configure(level, path, stderr=True)


def setup_worker_logging(level: str, log_file: str | None = None) -> Path | None:
    """Configure the worker's logging (its own file: two processes must not rotate one file)."""
    path = Path(log_file) if log_file else log_dir() / WORKER_LOG
    return _configure(level, path, stderr=True)


def setup_host_logging(level: str, file_name: str) -> Path | None:
    """Configure the session host's logging (lsp/session_host.py): a file of its own, as no one reads its stderr."""
    return _configure(level, log_dir() / file_name, stderr=False)


class LspLogHandler(logging.Handler):
    """Forwards our own loggers' records to the client as window/logMessage.

    Only attached to the `lsp` and `completer` loggers (never pygls, whose send path logs, which
    would recurse), and guarded against re-entry all the same.
    """

    def __init__(self, send: Callable[[int, str], None], loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__()
        self._send = send
        self._loop = loop
        self._local = threading.local()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def set_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            message = self.format(record)
            loop = self._loop
            on_loop = False
            if loop is not None:
                try:
                    on_loop = asyncio.get_running_loop() is loop
                except RuntimeError:
                    on_loop = False
            if loop is None or on_loop:
                self._send(record.levelno, message)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(self._send, record.levelno, message)
        except Exception:  # logging must never take the server down
            pass
        finally:
            self._local.busy = False


def attach_lsp_handler(handler: logging.Handler, level: str) -> None:
    numeric = logging.getLevelName(level.upper())
    handler.setLevel(numeric if isinstance(numeric, int) else logging.INFO)
    for name in _OWN_LOGGERS:
        logging.getLogger(name).addHandler(handler)


def message_type_for(levelno: int) -> Any:
    from lsprotocol import types

    if levelno >= logging.ERROR:
        return types.MessageType.Error
    if levelno >= logging.WARNING:
        return types.MessageType.Warning
    if levelno >= logging.INFO:
        return types.MessageType.Info
    return types.MessageType.Log
