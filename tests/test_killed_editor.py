"""An editor killed outright while something else still holds the pipes it talked to the server on: real `python -m
lsp` servers, started by a pretend editor, on their default layout (a session of the session host, the shared engine)
and with a private worker, each test in a runtime directory of its own."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lsp.rawclient import RawClient
from lsp_support import SAMPLE_TEXT, gone_within, server_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="processes are looked at in /proc")

URI = "file:///work/killed.py"
EDITOR = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-m', 'lsp', *sys.argv[1:]]); time.sleep(600)"
"""An editor that starts the server on its own stdin and stdout, which the test holds too (as a launcher that made
the pipes, or a process the editor started that inherited them, would): killing it does not end the server's input."""
IDLE_EXIT_S = 3


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            pass
    return found


def _editor(runtime: Path, standalone: bool) -> tuple[RawClient, dict]:
    """The pretend editor, its server initialized with the editor's pid as processId, once the model is loaded."""
    env = server_env(COMPLETER_RUNTIME_DIR=str(runtime), COMPLETER_ENGINE_IDLE_EXIT_S=str(IDLE_EXIT_S))
    if not standalone:
        env.pop("COMPLETER_STANDALONE", None)
    client = RawClient([sys.executable, "-c", EDITOR, *(["--standalone"] if standalone else [])], env=env)
    client.request("initialize", {"processId": client.proc.pid, "rootUri": None, "capabilities": {},
                                  "initializationOptions": {"completer": {"searchAhead": False}}})
    client.notify("initialized", {})
    deadline = time.monotonic() + 60
    while not ((info := client.request("completer/info")["result"]).get("model") and info["server"]["worker_pid"]):
        assert time.monotonic() < deadline, f"not ready: {info}"
        time.sleep(0.05)
    return client, info["server"]


@pytest.mark.parametrize("standalone", [False, True], ids=["session-host", "private-worker"])
def test_a_killed_editor_whose_pipes_stay_open_leaves_no_process_behind(tmp_path: Path, standalone: bool):
    """The server exits once initialize's processId is gone (lsp/editor_process.py), and what it used ends with it:
    its private worker at once, the engine and the session host once idle. Before, the server waited for the end
    of an input that never came, and kept the engine, its model and this window's caches in memory for good."""
    client, server = _editor(tmp_path, standalone)
    try:
        client.open(URI, SAMPLE_TEXT)
        assert "result" in client.completion(URI, 20, 4, timeout=60)
        (started,) = _children(client.proc.pid)  # the relay, or the server itself with a private worker
        assert server["shared_engine"] is not standalone and (server["pid"] == started) is standalone
        client.proc.kill()  # SIGKILL: no shutdown, no exit, and the test still holds the server's stdin open
        client.proc.wait()
        assert gone_within(server["pid"], 10), "the server outlived its editor"
        assert gone_within(started, 10), "the process the editor started outlived it"
        if standalone:
            assert gone_within(server["worker_pid"], 10), "the private worker outlived the server"
        else:
            assert gone_within(server["worker_pid"], IDLE_EXIT_S + 10), "the engine did not exit once idle"
            assert gone_within(server["session_host_pid"], IDLE_EXIT_S + 10), "the session host did not exit"
    finally:
        client.close()


def test_a_processId_above_the_server_is_watched_and_another_is_not():
    """Only a processId that is the server's process or above it is the editor's: a pid of another machine or
    sandbox may name an unrelated process here, whose end must not end the server."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        ask = ("import os; from lsp.editor_process import editor_process as watched; "
               f"print([watched(pid, os.getpid()) is not None for pid in ({os.getpid()}, {other.pid}, None, True)])")
        answer = subprocess.run([sys.executable, "-c", ask], env=server_env(), capture_output=True, text=True,
                                timeout=60, check=True).stdout.strip()
        assert answer == "[True, False, False, False]", "the test's process is above the child, the sleep is not"
    finally:
        other.kill()
        other.wait()
