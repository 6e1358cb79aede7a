"""Ctrl-C in a command: held off while something must not be cut in half, and ending the process as the signal does.

An extension module's initialisation (onnxruntime's, numpy's) turns a KeyboardInterrupt raised in the Python code it
calls into an ImportError, and may print a traceback of its own: a Ctrl-C while such modules load is held off until
they have, then raised where the command says it in one line."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C, and the interrupt that stops a converter whose parent is gone, held off until the block is done, then
    raised. Only the main thread is interrupted, and only while SIGINT has a Python handler (not ignored): elsewhere
    the block just runs."""
    handler = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(handler):
        yield
        return
    came: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if came:
            handler(signal.SIGINT, None)


def die_of_signal(signum: int = signal.SIGINT) -> int:
    """End the process by `signum` with its default action, as a shell expects of Ctrl-C (bash goes on with a loop
    whose command merely exits 130); where that cannot be done (Windows), the status to exit with."""
    if os.name == "posix":
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return 128 + signum
