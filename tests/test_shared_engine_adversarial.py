"""The shared engine (lsp/engine_socket.py, lsp/worker.py --listen, lsp/worker_client.py) against what an
adversarial run found: real `python -m lsp` servers on one engine, each test in a runtime directory of its own,
each stating the promise it keeps."""
from __future__ import annotations

import fcntl
import os
import random
import socket
import sys
import time
from pathlib import Path

import pytest

from lsp import framing
from lsp.rawclient import RawClient
from lsp_support import SAMPLE_TEXT, server_env
from test_shared_engine import _info, _lines, _ready, socket_path_in

REPO = Path(__file__).resolve().parent.parent
URI = "file:///work/same.py"


def _env(runtime: Path, **extra: str) -> dict[str, str]:
    env = server_env(COMPLETER_RUNTIME_DIR=str(runtime), COMPLETER_ENGINE_IDLE_EXIT_S="2", **extra)
    env.pop("COMPLETER_STANDALONE", None)
    return env


def _server(runtime: Path, options: dict | None = None, standalone: bool = False, cwd: str | None = None,
            **extra: str) -> RawClient:
    cmd = [sys.executable, "-m", "lsp", *(["--standalone"] if standalone else [])]
    client = RawClient(cmd, env=_env(runtime, **extra), cwd=cwd)
    client.initialize({"completer": {"searchAhead": False, **(options or {})}})
    return client


def test_a_windows_COMPLETER_MODEL_is_not_replaced_by_the_first_windows(tmp_path: Path):
    """A window's COMPLETER_MODEL means its own model, not that of the server that started the engine: servers
    send the model's folder resolved (lsp/settings.py engine_dict)."""
    first = _server(tmp_path)
    second = _server(tmp_path, COMPLETER_MODEL=str(REPO / "models" / "python-base"))
    try:
        assert _ready(first)["model"] == "python-small"
        info = _ready(second)
        assert info["server"]["shared_engine"]
        assert info["model"] == "python-base", "the second window's COMPLETER_MODEL was ignored"
    finally:
        first.close()
        second.close()


def test_a_relative_modelPath_is_read_from_the_windows_own_directory(tmp_path: Path):
    """A relative modelPath is read from the window's own working directory, not the engine's."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = _server(tmp_path / "run", cwd=str(elsewhere))
    second = _server(tmp_path / "run", {"modelPath": "models/python-base"}, cwd=str(REPO))
    try:
        _ready(first)
        deadline = time.monotonic() + 3
        while (info := _ready(second))["model"] != "python-base" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert info["server"]["shared_engine"]
        assert info["model"] == "python-base", "modelPath resolved against another window's directory"
    finally:
        first.close()
        second.close()


POSITIONS = [(13, 8), (14, 8), (17, 8), (18, 8), (21, 8), (30, 4), (31, 4), (33, 8), (20, 4), (12, 4)]


def test_one_windows_small_memory_budget_does_not_change_another_windows_answers(tmp_path: Path,
                                                                                  fp32_bundle_dir: Path):
    """Windows on one model share its caches, whose budget is the largest of theirs: one window's small
    memoryBudgetMb must not evict the others' documents and change their answers (Worker._engine_of). In fp32,
    so the searches that share batched calls answer exactly as alone."""
    options = {"beams": 2, "maxSuggestions": 1, "documentRepeats": False, "modelPath": str(fp32_bundle_dir)}
    private = _server(tmp_path / "private", options, standalone=True)
    try:
        _ready(private)
        private.open(URI, SAMPLE_TEXT)
        expected = [_lines(private.completion(URI, line, column, timeout=60)) for line, column in POSITIONS]
    finally:
        private.close()
    window = _server(tmp_path / "run", options)
    small = _server(tmp_path / "run", {"memoryBudgetMb": 1, "modelPath": str(fp32_bundle_dir)})
    try:
        _ready(window)
        _ready(small)
        window.open(URI, SAMPLE_TEXT)
        small.open(URI, SAMPLE_TEXT)
        got = []
        for line, column in POSITIONS:  # both windows typing at once
            params = {"textDocument": {"uri": URI}, "position": {"line": line, "character": column}}
            ids = [client.request_nowait("textDocument/completion", params) for client in (window, small)]
            got.append(_lines(window.wait(ids[0], timeout=60)))
            small.wait(ids[1], timeout=60)
        differ = [(POSITIONS[i], got[i], expected[i]) for i in range(len(POSITIONS)) if got[i] != expected[i]]
        assert not differ, f"answers differ from a private worker's: {differ}"
    finally:
        window.close()
        small.close()


def test_a_client_that_never_reads_its_replies_does_not_hang_every_window(tmp_path: Path):
    """A local client that sends thousands of jobs and never reads its replies is cut off once a reply has
    waited SEND_TIMEOUT_S to be written, and its queued jobs are dropped: the other windows go on being
    answered."""
    window = _server(tmp_path)
    rogue = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _ready(window)
        window.open(URI, SAMPLE_TEXT)
        assert _lines(window.completion(URI, 12, 4, timeout=30))
        rogue.connect(str(socket_path_in(tmp_path)))
        rogue.sendall(b"".join(framing.encode({"id": i, "op": "info"}) for i in range(1, 5000)))
        time.sleep(1.0)
        started = time.monotonic()
        reply = window.completion(URI, 20, 4, timeout=3)  # raises TimeoutError: no answer at all
        assert "result" in reply and time.monotonic() - started < 3
    finally:
        rogue.close()
        window.close()


def test_a_socket_path_too_long_for_AF_UNIX_falls_back_at_once(tmp_path: Path):
    """A socket path longer than sun_path holds is refused before any engine is started: the window runs a
    private worker at once."""
    runtime = tmp_path / ("x" * 90) / ("y" * 40)
    window = _server(runtime)
    try:
        window.open(URI, SAMPLE_TEXT)
        reply = window.completion(URI, 12, 4, timeout=3)  # raises TimeoutError: answered only after 20 s
        assert _lines(reply)
    finally:
        window.close(timeout=2)


def test_a_held_start_lock_does_not_leave_a_window_without_completions_forever(tmp_path: Path):
    """A start lock held by something stuck is waited for LOCK_WAIT_S at most; the window then runs a private
    worker and says so, and the wait (on a daemon thread) never keeps the server from exiting."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    holder = os.open(runtime / "engine.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    window = _server(runtime)
    try:
        time.sleep(7)  # the lock is waited for 5 s (LOCK_WAIT_S); a private worker starts in well under a second
        logged = "\n".join(n["params"]["message"] for n in window.notifications if n["method"] == "window/logMessage")
        assert "private worker" in logged, "after 7 s still waiting on the lock, and nothing said"
    finally:
        started = time.monotonic()
        window.close(timeout=2)
        os.close(holder)
    assert time.monotonic() - started < 2, "the server did not exit on shutdown + exit"


def test_a_window_that_switched_models_and_left_frees_its_caches(tmp_path: Path):
    """A window that switches models takes its documents out of the old model's engine, so a window that
    switched and left holds nothing in the other's engine."""
    stays = _server(tmp_path)
    leaves = _server(tmp_path)
    try:
        _ready(stays)
        _ready(leaves)
        stays.open(URI, SAMPLE_TEXT)
        stays.completion(URI, 12, 4, timeout=30)
        for index in range(5):
            leaves.open(f"file:///work/other{index}.py", SAMPLE_TEXT)
            leaves.completion(f"file:///work/other{index}.py", 12, 4, timeout=30)
        leaves.notify("workspace/didChangeConfiguration",
                      {"settings": {"completer": {"modelPath": "python-base", "searchAhead": False}}})
        deadline = time.monotonic() + 10
        while _info(leaves)["model"] != "python-base":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        leaves.close()
        time.sleep(0.5)
        info = _info(stays)
        assert info["engine"]["clients"] == 1
        assert info["documents_cached"] == 1, f"the departed window's caches are still held: {info['documents_cached']}"
    finally:
        stays.close()
        leaves.close()


def test_info_says_private_worker_when_the_shared_engine_could_not_be_reached(tmp_path: Path):
    """completer/info reports the worker in use: a private worker standing in for an unreachable engine is not
    reported as the shared engine."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    (runtime / "engine.lock").mkdir()
    window = _server(runtime)
    try:
        info = _ready(window)
        assert info["engine"]["shared"] is False  # the worker says it is private
        assert info["server"]["shared_engine"] is False, "reported as on the shared engine"
    finally:
        window.close()


def _answer_times(client: RawClient, uri: str) -> list[float]:
    """Open `uri` with the sample, ask at its first cursor of POSITIONS (its context computed, as the background
    prefill does while the user pauses), then at the others one after another: the seconds each took."""
    client.open(uri, SAMPLE_TEXT)
    assert _lines(client.completion(uri, *POSITIONS[0], timeout=120))
    times = []
    for line, column in POSITIONS[1:]:
        started = time.monotonic()
        assert "result" in client.completion(uri, line, column, timeout=120)
        times.append(time.monotonic() - started)
    return times


def test_a_window_that_floods_the_engine_does_not_slow_another_windows_answers(tmp_path: Path):
    """A window that asks in many long files at once and cancels none (a buggy plugin, a script: in one file, its
    newer request would make the older ones obsolete, test_lsp_wire.py) keeps the engine busy for a long while, each
    of its searches prefilling a whole context. Another window's requests meanwhile are answered about as fast as
    alone: the windows' searches share the model's time (completer/scheduler.py), so a request's beam steps do not
    each wait for a chunk of the flood's prefills."""
    lines = (REPO / "lsp" / "worker.py").read_text(encoding="utf-8").split("\n")
    cursors = [(i, len(text)) for i, text in enumerate(lines) if text.strip() and i > 100]
    window = _server(tmp_path)
    flood = _server(tmp_path)
    try:
        _ready(window)
        _ready(flood)
        alone = _answer_times(window, "file:///work/alone.py")
        uris = [f"file:///work/flood{index}.py" for index in range(20)]  # their caches within the memory budget
        for uri in uris:
            flood.open(uri, "\n".join(lines))
        params = [{"textDocument": {"uri": uri}, "position": {"line": line, "character": column}}
                  for uri, (line, column) in zip(uris, random.Random(7).sample(cursors, len(uris)))]
        ids = [flood.request_nowait("textDocument/completion", p) for p in params]
        time.sleep(1.0)  # the engine is at them: they prefill side by side, a chunk each in turn
        flooded = _answer_times(window, "file:///work/flooded.py")
        assert len(flood.responses) < len(ids) // 2, "the flood was over before the other window asked"
        assert sum(flooded) < 4 * sum(alone) + 0.5, f"answered in {flooded} s beside the flood, {alone} s alone"
    finally:
        flood.close()
        window.close()


KILL_FIRST_ENGINE = """import os, signal, sys
if "--listen" in sys.argv and os.path.basename(sys.argv[sys.argv.index("--listen") + 1]).startswith("engine-"):
    if not os.path.exists(os.environ["KILL_FIRST_ENGINE_MARKER"]):
        open(os.environ["KILL_FIRST_ENGINE_MARKER"], "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
"""
"""A sitecustomize that kills the first engine started (not the session host) before it listens, as the OOM killer
or a `kill` between its start and its listen would."""


def test_an_engine_killed_before_it_listens_is_started_again_not_given_up(tmp_path: Path):
    """The engine a window starts is killed by a signal before it listens: that is no fault of the install, so the
    window starts another and stays on the shared engine, rather than running a private worker (a model of its own
    in memory) for as long as it lives."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(KILL_FIRST_ENGINE)
    marker = tmp_path / "killed"
    window = _server(tmp_path / "run", PYTHONPATH=f"{REPO}{os.pathsep}{hooks}", KILL_FIRST_ENGINE_MARKER=str(marker))
    try:
        info = _ready(window)
        assert marker.exists(), "the first engine was not killed"
        assert info["server"]["shared_engine"], "the window gave up on the shared engine for good"
        window.open(URI, SAMPLE_TEXT)
        assert _lines(window.completion(URI, 12, 4, timeout=30))
    finally:
        window.close()


@pytest.mark.parametrize("relative", ["--log-file", "COMPLETER_LOG_DIR"])
def test_the_engine_runs_in_the_root_directory_not_in_the_first_windows_project(tmp_path: Path, relative: str):
    """The engine outlives the window that started it, serving the others: run in that window's project, it would
    keep the project's file system busy (an unmount, a USB drive's eject fails) long after the window closed. It runs
    in /, as the session host does; a relative --log-file or COMPLETER_LOG_DIR still puts its log where the
    server's is."""
    project = tmp_path / "project"
    project.mkdir()
    args = ["--log-file", "logs/lsp.log"] if relative == "--log-file" else []
    env = _env(tmp_path / "run", **({"COMPLETER_LOG_DIR": "logs"} if relative == "COMPLETER_LOG_DIR" else {}))
    window = RawClient([sys.executable, "-m", "lsp", *args], env=env, cwd=str(project))
    window.initialize({"completer": {"searchAhead": False}})
    try:
        engine = _ready(window)["server"]["worker_pid"]
        assert os.readlink(f"/proc/{engine}/cwd") == "/"
        assert (project / "logs" / "lsp-worker.log").is_file()
        if relative == "COMPLETER_LOG_DIR":  # the session host runs in / too
            assert (project / "logs" / "lsp-sessions.log").is_file()
    finally:
        window.close()


def test_a_first_window_whose_PYTHONPATH_is_its_project_does_not_break_the_engine_for_the_others(tmp_path: Path):
    """A shell that exports PYTHONPATH=. starts the first window in a project with a module named like one the engine
    imports (here tokenizers): the engine, run in that project, imported it and had no model, for every window on
    it until all had closed. Run in /, it imports its own."""
    project, other = tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    (project / "tokenizers.py").write_text("raise ImportError('the project has a tokenizers module')\n")
    first = RawClient([sys.executable, "-m", "lsp"], env=_env(tmp_path / "run", PYTHONPATH=f".{os.pathsep}{REPO}"),
                      cwd=str(project))
    first.initialize({"completer": {"searchAhead": False}})
    second = None
    try:
        _ready(first)
        second = RawClient([sys.executable, "-m", "lsp"], env=_env(tmp_path / "run"), cwd=str(other))
        second.initialize({"completer": {"searchAhead": False}})
        info = _ready(second)
        assert info["server"]["worker_pid"] == _info(first)["server"]["worker_pid"], "one engine"
    finally:
        first.close()
        if second is not None:
            second.close()


def _same_interpreter_by_another_name() -> str | None:
    """A sibling of sys.executable that is the same interpreter under another name (python, python3, python3.X):
    a console script's shebang names one, an editor's `python -m lsp` another."""
    here = Path(sys.executable)
    for name in ("python3", "python", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
        other = here.with_name(name)
        if other != here and other.exists() and os.path.realpath(other) == os.path.realpath(here):
            return str(other)
    return None


def test_one_interpreter_by_two_names_shares_one_engine_and_one_session_host(tmp_path: Path):
    """`completer serve` (a console script, whose shebang names python3.11) in one editor and `python -m lsp` in
    another are the same interpreter and install: they share one engine and one session host, not one each."""
    other = _same_interpreter_by_another_name()
    if other is None:
        pytest.skip("no other name for this interpreter beside it")
    windows = [RawClient([command, "-m", "lsp"], env=_env(tmp_path)) for command in (sys.executable, other)]
    try:
        for window in windows:
            window.initialize({"completer": {"searchAhead": False}})
        infos = [_ready(window)["server"] for window in windows]
        assert len({info["worker_pid"] for info in infos}) == 1, "one engine"
        assert len({info["session_host_pid"] for info in infos}) == 1, "one session host"
    finally:
        for window in windows:
            window.close()
