"""Editor windows as sessions of the user's session host (lsp/session_host.py, lsp/relay.py): real `python -m
lsp` processes started as an editor starts them, each test with a runtime directory of its own."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from lsprotocol import types

from lsp.rawclient import RawClient
from lsp.session_host import _valid_request
from lsp_support import SAMPLE_TEXT, gone_within, server_env
from test_shared_engine import COLUMN, LINE, URI, _info, _lines, _ready

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the session host runs on Linux")


def _env(runtime: Path, **extra: str) -> dict[str, str]:
    env = server_env(COMPLETER_RUNTIME_DIR=str(runtime), COMPLETER_ENGINE_IDLE_EXIT_S="3", **extra)
    env.pop("COMPLETER_STANDALONE", None)
    return env


def _window(runtime: Path, *args: str, cwd: Path | None = None, **extra: str) -> RawClient:
    client = RawClient([sys.executable, "-m", "lsp", "--log-level", "INFO", *args], env=_env(runtime, **extra),
                       cwd=str(cwd) if cwd else None, stderr=subprocess.PIPE)
    client.initialize({"completer": {"searchAhead": False}})
    return client


def _sessions_socket(runtime: Path) -> Path:
    """The host's socket as `python -m lsp` computes it (its path depends on the interpreter's import path)."""
    code = "from lsp.relay import host_socket_path; print(host_socket_path())"
    return Path(subprocess.run([sys.executable, "-c", code], env=_env(runtime), capture_output=True, text=True,
                               check=True, timeout=60).stdout.strip())


def _planted_host(runtime: Path) -> tuple[socket.socket, Path]:
    """A socket of this user, mode 0600, listening where the host's would: what a test plays the host with."""
    runtime.mkdir(mode=0o700)
    path = _sessions_socket(runtime)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(4)
    listener.settimeout(30)
    return listener, path


def test_windows_are_sessions_of_one_host_and_answer_as_a_server_in_its_own_process(tmp_path: Path,
                                                                                  fp32_bundle_dir: Path):
    model = str(fp32_bundle_dir)
    windows = [_window(tmp_path, COMPLETER_MODEL=model) for _ in range(2)]
    alone = _window(tmp_path / "alone", COMPLETER_SESSION_HOST="0", COMPLETER_MODEL=model)
    try:
        infos = [_ready(window)["server"] for window in windows]
        hosts = {info["session_host_pid"] for info in infos}
        assert len(hosts) == 1 and None not in hosts, "one host for both windows"
        for window, info in zip(windows, infos):
            assert info["pid"] != window.proc.pid and info["pid"] not in hosts
            # what the editor started now waits as a shell, not as an interpreter
            assert Path(f"/proc/{window.proc.pid}/cmdline").read_bytes().split(b"\0")[0] == b"completer-relay"
        assert len({info["worker_pid"] for info in infos}) == 1, "and one engine"
        private = _ready(alone)["server"]
        assert private["pid"] == alone.proc.pid and private["session_host_pid"] is None
        for index, window in enumerate([*windows, alone]):
            window.open(URI.format(index), SAMPLE_TEXT)
        answers = [_lines(window.completion(URI.format(index), LINE, COLUMN, timeout=60))
                   for index, window in enumerate([*windows, alone])]
        assert answers[0] and answers[0] == answers[1] == answers[2]
        path = _sessions_socket(tmp_path)
        assert stat.S_ISSOCK(path.lstat().st_mode) and stat.S_IMODE(path.lstat().st_mode) == 0o600
    finally:
        codes = [window.close() for window in [*windows, alone]]
    assert codes == [0, 0, 0], "shutdown then exit: code 0, through the relay too"
    host = hosts.pop()
    assert gone_within(host, 15), "the host outlived its last session by far more than 3 s"
    assert not _sessions_socket(tmp_path).exists()


def test_exit_without_shutdown_is_code_1_through_the_relay(tmp_path: Path):
    window = _window(tmp_path)
    session = _ready(window)["server"]["pid"]
    window.notify("exit")
    assert window.proc.wait(10) == 1
    assert gone_within(session, 5)


def test_a_killed_editor_process_ends_its_session_and_no_other(tmp_path: Path):
    killed, kept = _window(tmp_path), _window(tmp_path)
    try:
        session = _ready(killed)["server"]["pid"]
        _ready(kept)
        killed.proc.kill()  # the editor gives up on the process it started; it may keep the pipes open
        assert gone_within(session, 2.0), "the session outlived the editor's process"
        kept.open(URI.format(0), SAMPLE_TEXT)
        assert _lines(kept.completion(URI.format(0), LINE, COLUMN, timeout=60))
    finally:
        killed.close()
        assert kept.close() == 0


def test_a_killed_editor_process_ends_its_session_even_with_its_stderr_full(tmp_path: Path):
    """The editor stopped reading the server's stderr, which the session then leaves lines out of rather than wait
    (lsp/logs.py StderrHandler): killing the editor's process still ends it."""
    window = _window(tmp_path)  # stderr is a pipe this test never reads
    try:
        session = _ready(window)["server"]["pid"]
        for _ in range(2000):  # each logged as a warning, to stderr too: far more than a pipe holds
            window.send_raw(b"not json")
        time.sleep(1.0)
        window.proc.kill()
        assert gone_within(session, 2.0), "the session outlived the editor's process"
    finally:
        window.close()


def test_a_session_has_the_editors_directory_arguments_and_environment(tmp_path: Path, fp32_bundle_dir: Path):
    """Two windows started from different folders, with different environments and a relative log file: each
    session works in its own folder, with its own environment (the model comes from it)."""
    folders = [tmp_path / "a", tmp_path / "b"]
    windows = []
    for folder, model in zip(folders, ("", str(fp32_bundle_dir))):
        folder.mkdir()
        windows.append(_window(tmp_path / "run", "--log-file", "window.log", cwd=folder, COMPLETER_MODEL=model))
    try:
        infos = [_ready(window) for window in windows]
        assert infos[0]["server"]["session_host_pid"] == infos[1]["server"]["session_host_pid"]
        for folder, info in zip(folders, infos):
            log = (folder / "window.log").read_text(encoding="utf-8")
            assert f"pid {info['server']['pid']}" in log, "the relative log file is in the window's own folder"
            assert os.readlink(f"/proc/{info['server']['pid']}/cwd") == str(folder)
        assert str(fp32_bundle_dir) not in str(infos[0]) and str(fp32_bundle_dir) in str(infos[1])
    finally:
        for window in windows:
            window.close()


def test_the_host_imports_nothing_from_the_first_windows_folder(tmp_path: Path):
    """The host runs in /, with this package's root first on its import path, whichever window started it: a
    project's own module named like one a session imports later never runs in another window's session."""
    project = tmp_path / "project"
    project.mkdir()
    window = _window(tmp_path / "run", cwd=project)
    try:
        host = _ready(window)["server"]["session_host_pid"]
        assert os.readlink(f"/proc/{host}/cwd") == "/"
        boot = Path(f"/proc/{host}/cmdline").read_bytes().split(b"\0")
        assert boot[1] == b"-c" and boot[2].startswith(b"import sys; sys.path[0] = ")
    finally:
        window.close()


def test_a_session_has_the_editors_limits_and_niceness(tmp_path: Path):
    first = _window(tmp_path)  # starts the host with this test's limits
    wrapper = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (200, 4096)); os.nice(5); "
               "os.execv(sys.executable, [sys.executable, '-m', 'lsp'])")
    limited = RawClient([sys.executable, "-c", wrapper], env=_env(tmp_path), stderr=subprocess.PIPE)
    try:
        limited.initialize({"completer": {"searchAhead": False}})
        info = _ready(limited)["server"]
        assert info["session_host_pid"] == _info(first)["server"]["session_host_pid"]
        limits = Path(f"/proc/{info['pid']}/limits").read_text()
        assert re.search(r"Max open files\s+200\s+4096", limits), limits
        assert int(Path(f"/proc/{info['pid']}/stat").read_text().split(") ")[-1].split()[16]) == 5
        host_limits = Path(f"/proc/{info['session_host_pid']}/limits").read_text()
        assert not re.search(r"Max open files\s+200\s+4096", host_limits), "the host keeps its own"
    finally:
        limited.close()
        first.close()


def test_usage_errors_reach_the_editors_stderr_with_code_2(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "lsp", "--log-level", "NOPE"], env=_env(tmp_path),
                          capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and b"--log-level" in proc.stderr


def _served_here_without_the_host(window: RawClient, listener: socket.socket) -> None:
    """The window's server runs in the process the editor started, and the planted host's socket is not
    connected to (again)."""
    window.initialize({"completer": {"searchAhead": False}})
    assert _ready(window)["server"]["pid"] == window.proc.pid
    listener.settimeout(0.2)
    with pytest.raises(socket.timeout):
        listener.accept()


def test_a_socket_that_hangs_up_or_others_could_open_is_not_used(tmp_path: Path):
    """A socket at the host's path that takes the pipes and hangs up, and one that anyone could open: the
    window is served in its own process, says why on stderr, and loses no request."""
    runtime = tmp_path / "run"
    listener, planted = _planted_host(runtime)
    window = RawClient([sys.executable, "-m", "lsp"], env=_env(runtime), stderr=subprocess.PIPE)
    for reads_first in (True, False):  # a host exiting as it is reached hangs up like this: the relay tries again
        conn, _ = listener.accept()
        if reads_first:  # the relay may be writing the rest when it hangs up (a broken pipe), or be done
            conn.recv(65536)
        conn.close()
    try:
        window.initialize({"completer": {"searchAhead": False}})
        info = _ready(window)["server"]
        assert info["pid"] == window.proc.pid and info["session_host_pid"] is None
    finally:
        window.close()
    assert b"hung up before it started a session: serving in this process" in window.proc.stderr.read()
    os.chmod(planted, 0o666)
    window = RawClient([sys.executable, "-m", "lsp"], env=_env(runtime), stderr=subprocess.PIPE)
    try:
        _served_here_without_the_host(window, listener)
    finally:
        window.close()
        listener.close()
    assert b"not using the session host" in window.proc.stderr.read()


def test_a_refusal_is_served_in_the_editors_process_at_once(tmp_path: Path):
    """A host that says it refuses: the relay does not try again, and serves in its own process."""
    runtime = tmp_path / "run"
    listener, _ = _planted_host(runtime)
    window = RawClient([sys.executable, "-m", "lsp"], env=_env(runtime), stderr=subprocess.PIPE)
    conn, _ = listener.accept()
    conn.recv(4)  # the header only: the host refuses before it reads the rest (a malformed header, say)
    conn.sendall(b"refused 0\n")
    conn.close()
    try:
        started = time.monotonic()
        _served_here_without_the_host(window, listener)
        assert time.monotonic() - started < 20, "no wait for a second attempt"
    finally:
        window.close()
        listener.close()
    assert b"refused this session" in window.proc.stderr.read()


def test_a_bad_request_is_refused_and_the_host_serves_the_next_window(tmp_path: Path):
    first = _window(tmp_path)
    try:
        host = _ready(first)["server"]["session_host_pid"]
        path = _sessions_socket(tmp_path)
        for junk in (b"", b"\x00\x00\x00\x05{not json", struct.pack("!I", 1 << 30)):
            rogue = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            rogue.connect(str(path))
            if junk:
                rogue.sendall(junk)
            rogue.close()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as rogue:  # well formed, another version
            rogue.connect(str(path))
            body = b'{"version": "0.0.0"}'
            r, w = os.pipe()
            socket.send_fds(rogue, [struct.pack("!I", len(body))], [r, w, w])
            rogue.sendall(body)
            assert rogue.recv(100) == b"refused 0\n", "refused, in a line the relay reads"
            os.close(r)
            os.close(w)
        second = _window(tmp_path)
        try:
            assert _ready(second)["server"]["session_host_pid"] == host
        finally:
            assert second.close() == 0
    finally:
        first.close()


@pytest.mark.parametrize("field, value", [("argv", "--tcp"), ("argv", [1]), ("cwd", None), ("umask", -1),
                                          ("umask", True), ("env", {"A": 1}), ("env", {"A=B": "1"}),
                                          ("env", {"A": "a\0b"}), ("env", {"": "1"}), ("prog", None), ("nice", 40),
                                          ("limits", {"RLIMIT_NOFILE": [1]}), ("limits", {"NOFILE": [1, 2]})])
def test_a_malformed_request_field_is_refused(field: str, value: object):
    request = {"version": __import__("lsp").__version__, "argv": [], "prog": "python -m lsp", "cwd": "/",
               "env": {}, "umask": 0o022, "nice": 0, "limits": {"RLIMIT_NOFILE": [1024, 4096]}}
    assert _valid_request(dict(request)) == request
    with pytest.raises(ValueError):
        _valid_request({**request, field: value})


def test_a_killed_host_leaves_its_sessions_running_and_is_replaced(tmp_path: Path):
    first = _window(tmp_path)
    try:
        host = _ready(first)["server"]["session_host_pid"]
        os.kill(host, signal.SIGKILL)
        assert gone_within(host, 5)
        first.open(URI.format(0), SAMPLE_TEXT)
        assert _lines(first.completion(URI.format(0), LINE, COLUMN, timeout=60)), "the session outlives its host"
        second = _window(tmp_path)
        try:
            replaced = _info(second)["server"]["session_host_pid"]
            assert replaced not in (None, host), "a new host on the stale socket's path"
        finally:
            assert second.close() == 0
    finally:
        assert first.close() == 0


def test_a_session_sets_only_the_variables_its_window_changes():
    """The window's environment, made by unsetting what it lacks and setting what differs: a variable the host
    already has with the same value is not set again (each set allocates in the C heap the host shares)."""
    script = textwrap.dedent("""
        import json, os, tempfile
        from lsp.session_host import _adopt_environment
        os.environ.update({"KEEP": "same", "CHANGE": "old", "DROP": "gone", "TMPDIR": os.getcwd() + "/tests"})
        hosts_tmp = tempfile.gettempdir()
        calls = []
        real_putenv, real_unsetenv = os.putenv, os.unsetenv
        os.putenv = lambda name, value: (calls.append(["set", os.fsdecode(name)]), real_putenv(name, value))
        os.unsetenv = lambda name: (calls.append(["unset", os.fsdecode(name)]), real_unsetenv(name))
        wanted = {name: value for name, value in os.environ.items() if name != "DROP"}
        wanted.update({"CHANGE": "new", "ADD": "more", "TMPDIR": os.getcwd() + "/docs"})
        _adopt_environment(wanted)
        print(json.dumps({"calls": calls, "same": dict(os.environ) == wanted,
                          "c": os.popen("echo $CHANGE$DROP$ADD").read(), "tmp": [hosts_tmp, tempfile.gettempdir()]}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert sorted(result["calls"]) == [["set", "ADD"], ["set", "CHANGE"], ["set", "TMPDIR"], ["unset", "DROP"]]
    assert result["same"]
    assert result["c"].strip() == "newmore", "a child process sees the new environment"
    repo = Path(__file__).resolve().parent.parent
    assert result["tmp"] == [str(repo / "tests"), str(repo / "docs")], "the window's TMPDIR, not the host's"


def test_a_sessions_server_is_the_hosts_spare_set_up_with_the_windows_arguments(tmp_path: Path):
    """The host builds one server, with its handlers and converter hooks, before it forks; each session takes
    its own copy and gives it its own log level, log files and engine, as a server built in the session would
    have."""
    from lsp import server as server_module
    from lsp.worker_client import WorkerClient

    server_module.prepare_spare_server()
    spare = server_module._take_spare_server()
    assert server_module._take_spare_server() is None, "taken once"
    assert spare is not None and types.TEXT_DOCUMENT_COMPLETION in spare.protocol.fm.features
    spare.set_up_run("DEBUG", tmp_path / "lsp.log", str(tmp_path / "worker.log"), shared_engine=False)
    built = server_module.CompleterServer("DEBUG", tmp_path / "lsp.log", str(tmp_path / "worker.log"))
    for server in (spare, built):
        assert isinstance(server.worker, WorkerClient) and not server.worker.shared
        assert server.searches._worker is server.worker
    assert (spare.log_level, spare.log_file, spare.worker_log_file) == (
        built.log_level, built.log_file, built.worker_log_file)
    assert (spare.worker._log_level, spare.worker._log_file) == ("DEBUG", str(tmp_path / "worker.log"))


def test_a_debug_session_logs_its_handlers_and_their_options(tmp_path: Path):
    """The spare server registered its handlers in the host, before the session's logging existed: the session
    still names them, with the completion's trigger characters, in a DEBUG log."""
    window = _window(tmp_path / "run", "--log-level", "DEBUG", "--log-file", str(tmp_path / "debug.log"))
    try:
        assert _ready(window)["server"]["session_host_pid"]
        handlers = [line for line in (tmp_path / "debug.log").read_text(encoding="utf-8").splitlines()
                    if "handlers: " in line]
        assert len(handlers) == 1 and "textDocument/completion" in handlers[0] and "trigger_characters" in handlers[0]
    finally:
        window.close()
