"""The editor's process, as `initialize` names it (`processId`): the server exits once it is gone, as LSP asks.

The end of the server's input is how it usually learns the editor is gone. But an editor killed outright (SIGKILL,
a crash) may not be the only holder of the pipe it wrote to: a process it started that inherited it, or the
launcher that made it, keeps it open, and the server, its session and the user's engine (whose model and caches
that client keeps in memory) stayed forever.

Only a `processId` that is the process the editor started, or one of that process's ancestors, is watched: one that
is not (a pid of another machine, container or sandbox, which the server may share with an unrelated process, or a
client that names itself wrongly) would end the server when that other process ends. Where there is no /proc (not
Linux), that is only the server's own parent.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

POLL_S = 1.0
"""How often the watch looks: a server outliving its editor by a second costs nothing."""
MAX_ANCESTORS = 64


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command's name (state, ppid, ... start time at index 19); None where the
    process is gone or there is no /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


@dataclass(frozen=True)
class EditorProcess:
    """A process to outlive by no more than POLL_S: its pid and, with /proc, its start time, so that another process
    given the same pid later is not taken for it."""

    pid: int
    started: str | None

    def alive(self) -> bool:
        if self.started is None:  # no /proc: it was the server's parent, which it stays until it ends
            return os.getppid() == self.pid
        fields = _stat(self.pid)
        return fields is not None and fields[0] not in ("Z", "X") and fields[19] == self.started


def _ancestors(pid: int) -> list[int]:
    """`pid` and the processes above it, by /proc."""
    chain = []
    while pid > 0 and len(chain) < MAX_ANCESTORS:
        chain.append(pid)
        fields = _stat(pid)
        if fields is None:
            break
        pid = int(fields[1])
    return chain


def editor_process(process_id: object, started_as: int) -> EditorProcess | None:
    """The process to watch for `initialize`'s `process_id`, where it is `started_as` (the process the editor
    started: this one, or a session's relay) or above it; None otherwise, and off POSIX."""
    if not isinstance(process_id, int) or isinstance(process_id, bool) or process_id <= 1 or os.name != "posix":
        return None
    if Path("/proc/self/stat").exists():
        fields = _stat(process_id)
        if fields is None or process_id not in _ancestors(started_as):
            return None
        return EditorProcess(process_id, fields[19])
    if process_id == os.getppid() and started_as == os.getpid():
        return EditorProcess(process_id, None)
    return None


def watch(editor: EditorProcess, on_gone: Callable[[], None]) -> threading.Thread:
    """Call `on_gone` (on a thread of its own) once `editor` has ended."""

    def run() -> None:
        while editor.alive():
            time.sleep(POLL_S)
        on_gone()

    thread = threading.Thread(target=run, name="editor-watch", daemon=True)
    thread.start()
    return thread


def exit_when_gone(process_id: object, started_as: int) -> bool:
    """Exit this process (code 1, as for a client lost without `exit`) once the editor's is gone; False where
    `process_id` names no process this one can tell is the editor's. The exit is at once, as a session's is when
    its relay dies: the loop may be stuck writing to a pipe no one reads, and a private worker exits as its input
    ends. The line said goes to the log file, not to stderr, which may be such a pipe too."""
    editor = editor_process(process_id, started_as)
    if editor is None:
        if process_id is not None:
            log.info("processId %s is not a process above this server's: the server ends with its input only",
                     process_id)
        return False

    def gone() -> None:
        log.info("the editor's process %d is gone and the server's input still open: exiting", editor.pid)
        os._exit(1)

    watch(editor, gone)
    return True
