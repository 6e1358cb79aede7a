"""A worker that stops reading for a while (its process stopped: SIGSTOP, a frozen cgroup, a debugger) while the
user types on: real `python -m lsp` servers, on their default layout (a session of the session host, the shared
engine) and with a private worker, each in a runtime directory of its own."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from lsp.rawclient import RawClient
from lsp_support import SAMPLE_TEXT, server_env

URI = "file:///work/stalled.py"
BIG = SAMPLE_TEXT * 60  # over 64 kB: each keystroke's job carries 32 kB before the cursor and 32 kB below it
ROW = len(SAMPLE_TEXT.split("\n")) * 30  # a line of its own, in the middle
TYPED = "value = compute_something(argument_one, argument_two)"


def _server(runtime: Path, standalone: bool) -> tuple[RawClient, dict]:
    env = server_env(COMPLETER_RUNTIME_DIR=str(runtime), COMPLETER_ENGINE_IDLE_EXIT_S="3")
    if not standalone:
        env.pop("COMPLETER_STANDALONE", None)
    client = RawClient([sys.executable, "-m", "lsp"], env=env)
    client.initialize({"completer": {"searchAhead": False}})
    deadline = time.monotonic() + 60
    while not ((info := client.request("completer/info")["result"]).get("model") and info["server"]["worker_pid"]):
        assert time.monotonic() < deadline, f"not ready: {info}"
        time.sleep(0.05)
    return client, info["server"]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _completion(client: RawClient, column: int) -> int:
    return client.request_nowait("textDocument/completion",
                                 {"textDocument": {"uri": URI}, "position": {"line": ROW, "character": column}})


@pytest.mark.parametrize("standalone", [False, True], ids=["shared-engine", "private-worker"])
def test_keystrokes_while_the_engine_is_stopped_do_not_pile_up_in_the_server(tmp_path: Path, standalone: bool):
    """While the engine reads nothing, the jobs of requests abandoned meanwhile (each keystroke abandons the one
    before) are never sent: the server holds the jobs it could not send and drops those abandoned, so its memory
    stays flat however long the user types, and once the engine runs again the last keystroke is answered at once
    (WorkerClient's outbox). Before, every job was buffered for the socket: 1,000 keystrokes of 64 kB of context
    grew the server by over 100 MB, kept after the engine caught up."""
    client, server = _server(tmp_path, standalone)
    engine = server["worker_pid"]
    stopped = False
    try:
        client.open(URI, BIG)
        client.change(URI, 2, (ROW, 0), (ROW, 0), "\n")
        assert "result" in client.wait(_completion(client, 0), timeout=30)
        assert server["shared_engine"] is not standalone
        before = _rss_mb(server["pid"])
        os.kill(engine, signal.SIGSTOP)
        stopped = True
        ids = []
        for index in range(1000):
            column = index % len(TYPED)
            if index and column == 0:
                client.change(URI, 3 + 2 * index, (ROW, 0), (ROW, len(TYPED)), "")
            client.change(URI, 4 + 2 * index, (ROW, column), (ROW, column), TYPED[column])
            ids.append(_completion(client, column + 1))
            if len(ids) > 1:
                client.notify("$/cancelRequest", {"id": ids[-2]})
        for stale in ids[:-1]:  # each answered at the next keystroke
            assert "error" in client.wait(stale, timeout=30)
        grown = _rss_mb(server["pid"]) - before
        os.kill(engine, signal.SIGCONT)
        stopped = False
        started = time.monotonic()
        last = client.wait(ids[-1], timeout=30)
        waited = time.monotonic() - started
        assert grown < 30, f"the server grew by {grown:.0f} MB while the engine was stopped"
        typed = TYPED[:(len(ids) - 1) % len(TYPED) + 1]
        lines = [item["textEdit"]["newText"] for item in last["result"]["items"]]
        assert all(line.startswith(typed) for line in lines), (typed, lines)
        assert waited < 10, f"the last keystroke was answered {waited:.1f} s after the engine ran again"
    finally:
        if stopped:
            os.kill(engine, signal.SIGCONT)
        client.close()
