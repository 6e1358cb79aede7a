"""The standard streams of a command: a closed one held by /dev/null, and stdout's write errors told apart.

A process started with fd 0, 1 or 2 closed (`completer complete ... >&-`, a daemon's `<&-`) hands that number to
the next file it opens: the server's log would then receive its LSP frames, and a bundle's weights onnxruntime's
warnings. And a stdout that takes no more (a full disk, `> /dev/full`) raises an OSError from whichever print
fills its buffer, which a command should say in one line, not a traceback."""
from __future__ import annotations

import io
import os
import sys

STREAM_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}
_DIRECTION = {0: os.O_WRONLY, 1: os.O_RDONLY, 2: os.O_WRONLY}
"""/dev/null opened the other way for stdin and stdout, so reading or writing them still fails as on a closed one;
stderr's writes go nowhere, as its closing asked."""


class OutputError(Exception):
    """stdout took no more of the output (a full disk, /dev/full): said in one line, not a traceback. A reader gone
    away (`| head`) stays a BrokenPipeError, which ends the output as SIGPIPE would. Not an OSError, which argparse
    swallows where it prints --help: unbuffered (python -u), the text would be lost with status 0."""

    def __init__(self, strerror: str) -> None:
        super().__init__(strerror)
        self.strerror = strerror


def hold_closed_fds() -> frozenset[int]:
    """Put /dev/null on each of fds 0, 1 and 2 that is closed, and return which were, so that no file opened later
    takes one of their numbers. A closed stderr gets a sys.stderr again, which writes to /dev/null."""
    closed = set()
    for fd in STREAM_NAMES:
        try:
            os.fstat(fd)
        except OSError:
            held = os.open(os.devnull, _DIRECTION[fd])
            if held != fd:
                os.dup2(held, fd)
                os.close(held)
            closed.add(fd)
    if 2 in closed and sys.stderr is None:  # else print(file=sys.stderr) would write to stdout
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 (the process's own, for its lifetime)
    return frozenset(closed)


class _CheckedStdout(io.FileIO):
    """fd 1, whose write errors are OutputError (BrokenPipeError aside)."""

    def write(self, data) -> int | None:  # type: ignore[override]
        try:
            return super().write(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None


def check_stdout_writes(errors: str = "backslashreplace") -> None:
    """Make sys.stdout raise OutputError when a write fails, keeping its encoding and buffering; `errors`: how a
    character the encoding lacks is written. Left as it is where something else already replaced it (a test's
    capture) or it is closed."""
    stdout = sys.stdout
    if stdout is None or stdout is not sys.__stdout__ or not isinstance(stdout, io.TextIOWrapper):
        if hasattr(stdout, "reconfigure"):
            stdout.reconfigure(errors=errors)  # type: ignore[union-attr]
        return
    stdout.flush()
    raw = _CheckedStdout(stdout.fileno(), "w", closefd=False)
    buffered = isinstance(stdout.buffer, io.BufferedWriter)  # else unbuffered (python -u, PYTHONUNBUFFERED)
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw) if buffered else raw, encoding=stdout.encoding,
                                  errors=errors, line_buffering=stdout.line_buffering,
                                  write_through=stdout.write_through)


def drop_stdout() -> None:
    """After a write to stdout failed: put /dev/null on fd 1, so that the flush at exit has somewhere to write what
    is left in the buffer rather than fail again (a second message, and Python's exit status 120)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
