"""One engine for every editor window: real server processes on the user's shared engine (lsp/engine_socket.py,
lsp/worker.py --listen), each test with a runtime directory of its own."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import stat
import sys
import time
from pathlib import Path

import pytest

from lsp.engine_socket import socket_path
from lsp.rawclient import RawClient
from lsp_support import REPO, SAMPLE_TEXT, server_env

URI = "file:///work/window{}.py"
LINE, COLUMN = 12, 4  # a position of the sample where the model offers lines


def _env(runtime: Path, **extra: str) -> dict[str, str]:
    env = server_env(COMPLETER_RUNTIME_DIR=str(runtime), COMPLETER_ENGINE_IDLE_EXIT_S="3", **extra)
    env.pop("COMPLETER_STANDALONE", None)
    return env


def _server(runtime: Path, **extra: str) -> RawClient:
    client = RawClient([sys.executable, "-m", "lsp", "--log-level", "INFO"], env=_env(runtime, **extra))
    client.initialize({"completer": {"searchAhead": False}})
    return client


def _info(client: RawClient, timeout: float = 30.0) -> dict:
    return client.request("completer/info", timeout=timeout)["result"]


def _ready(client: RawClient, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while not ((info := _info(client)).get("model") and info["server"]["worker_pid"]):
        assert time.monotonic() < deadline, f"not ready: {info}"
        time.sleep(0.05)
    return info


def _lines(reply: dict) -> list[str]:
    return [item["textEdit"]["newText"] for item in (reply.get("result") or {}).get("items") or []]


def _engine_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # reap it if it is our child (it is not: it runs in its own session)
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_windows_share_one_engine_and_get_the_answers_a_private_worker_gives(tmp_path: Path, fp32_bundle_dir: Path):
    """Three windows ask at once, so their searches share the engine's batched calls: in fp32 every answer is
    exactly the one a private worker gives the same cursor alone."""
    model = str(fp32_bundle_dir)
    clients = [_server(tmp_path, COMPLETER_MODEL=model) for _ in range(3)]
    standalone = RawClient([sys.executable, "-m", "lsp", "--standalone"],
                           env=_env(tmp_path / "private", COMPLETER_MODEL=model))
    standalone.initialize({"completer": {"searchAhead": False}})
    try:
        infos = [_ready(client) for client in clients]
        pids = {info["server"]["worker_pid"] for info in infos}
        assert len(pids) == 1, "three windows, one engine"
        assert all(info["server"]["shared_engine"] for info in infos)
        assert _info(clients[-1])["engine"] == {"shared": True, "clients": 3, "models": 1}
        engine_pid = pids.pop()
        assert all(engine_pid != client.proc.pid for client in clients)
        # the same file in each window, at different cursors, asked at once: every answer is a private worker's
        private = _ready(standalone)
        assert not private["server"]["shared_engine"] and private["server"]["worker_pid"] != engine_pid
        lines = SAMPLE_TEXT.split("\n")
        for index, client in enumerate(clients):
            client.open(URI.format(index), SAMPLE_TEXT)
        standalone.open(URI.format(0), SAMPLE_TEXT)
        cursors = [(LINE, COLUMN), (LINE + 1, len(lines[LINE + 1]) // 2), (LINE + 2, 4)]
        ids = [client.request_nowait("textDocument/completion", {
            "textDocument": {"uri": URI.format(index)}, "position": {"line": cursors[index][0],
                                                                    "character": cursors[index][1]}})
               for index, client in enumerate(clients)]
        answers = [_lines(client.wait(msg_id, timeout=60)) for client, msg_id in zip(clients, ids)]
        for index, (line, column) in enumerate(cursors):
            expected = _lines(standalone.completion(URI.format(0), line, column, timeout=60))
            assert answers[index] == expected, f"window {index} at {line}:{column}"
        assert any(answers)
        path = socket_path_in(tmp_path)
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600 and stat.S_ISSOCK(path.lstat().st_mode)
        assert stat.S_IMODE(path.parent.lstat().st_mode) == 0o700
    finally:
        for client in [*clients, standalone]:
            client.close()
    assert _engine_gone(engine_pid, timeout=15), "the engine outlived its last client by far more than 3 s"
    assert not socket_path_in(tmp_path).exists()


def socket_path_in(runtime: Path) -> Path:
    old = os.environ.get("COMPLETER_RUNTIME_DIR")
    os.environ["COMPLETER_RUNTIME_DIR"] = str(runtime)
    try:
        return socket_path()
    finally:
        if old is None:
            del os.environ["COMPLETER_RUNTIME_DIR"]
        else:
            os.environ["COMPLETER_RUNTIME_DIR"] = old


def test_a_killed_engine_is_replaced_within_two_seconds(tmp_path: Path):
    clients = [_server(tmp_path) for _ in range(2)]
    try:
        engine_pid = _ready(clients[0])["server"]["worker_pid"]
        assert _ready(clients[1])["server"]["worker_pid"] == engine_pid
        for index, client in enumerate(clients):
            client.open(URI.format(index), SAMPLE_TEXT)
        os.kill(engine_pid, signal.SIGKILL)
        killed = time.monotonic()
        answered = {0: 0.0, 1: 0.0}
        while not all(answered.values()):
            for index, client in enumerate(clients):
                if answered[index]:
                    continue
                reply = client.completion(URI.format(index), LINE, COLUMN, timeout=10)  # every request answered
                assert "result" in reply or "error" in reply
                if _lines(reply):
                    answered[index] = time.monotonic() - killed
            assert time.monotonic() - killed < 10, "no server recovered"
        assert max(answered.values()) < 2.0, answered
        pids = {_info(client)["server"]["worker_pid"] for client in clients}
        assert len(pids) == 1 and engine_pid not in pids, "both servers on one new engine"
    finally:
        for client in clients:
            client.close()


def test_a_socket_others_could_open_is_refused(tmp_path: Path):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    planted = socket_path_in(runtime)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(planted))
    listener.listen(1)
    os.chmod(planted, 0o666)  # anyone may connect: not the user's engine, and not to be trusted
    if os.getuid() == 0:
        os.chown(planted, 65534, 65534)  # as root the test can also plant another user's socket
    client = _server(runtime)
    try:
        info = _ready(client)
        assert not info["server"]["shared_engine"], "fell back to a private worker"
        logged = "\n".join(n["params"]["message"] for n in client.notifications if n["method"] == "window/logMessage")
        assert "not using the shared engine" in logged and str(planted) in logged
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.accept()  # nothing ever connected to it
    finally:
        client.close()
        listener.close()


def test_a_directory_others_can_enter_is_refused(tmp_path: Path):
    runtime = tmp_path / "open"
    runtime.mkdir()
    os.chmod(runtime, 0o777)
    client = _server(runtime)
    try:
        info = _ready(client)
        assert not info["server"]["shared_engine"]
        assert not list(runtime.iterdir()), "nothing created in a directory others can enter"
    finally:
        client.close()


def test_two_servers_starting_at_once_start_one_engine(tmp_path: Path):
    clients = [RawClient([sys.executable, "-m", "lsp"], env=_env(tmp_path)) for _ in range(2)]
    try:
        ids = [client.request_nowait("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {}})
               for client in clients]
        for client, msg_id in zip(clients, ids):
            client.wait(msg_id, timeout=30)
            client.notify("initialized", {})
        pids = {_ready(client)["server"]["worker_pid"] for client in clients}
        assert len(pids) == 1
    finally:
        for client in clients:
            client.close()


def test_a_bundle_made_again_in_place_is_loaded_anew_by_the_next_window(tmp_path: Path):
    """A bundle a window still uses is made again in its folder (`completer convert --force`, or a copy): the next
    window to start (a restart) gets what the folder holds now, not the engine's copy of the old one; the first
    window keeps the model it has, its files still open."""
    bundle = tmp_path / "model"
    shutil.copytree(REPO / "models" / "python-small", bundle)
    options = {"completer": {"searchAhead": False, "modelPath": str(bundle)}}
    first = RawClient([sys.executable, "-m", "lsp"], env=_env(tmp_path / "run"))
    second = RawClient([sys.executable, "-m", "lsp"], env=_env(tmp_path / "run"))
    try:
        first.initialize(options)
        before = _ready(first)
        shutil.rmtree(bundle)
        shutil.copytree(REPO / "models" / "python-base", bundle)
        second.initialize(options)
        after = _ready(second)
        assert after["server"]["worker_pid"] == before["server"]["worker_pid"]  # one engine
        assert (before["vocab_size"], after["vocab_size"]) == (8192, 8195)
        assert _info(first)["vocab_size"] == 8192
    finally:
        first.close()
        second.close()


def test_cancelling_one_windows_search_leaves_the_others_running(tmp_path: Path, fp32_bundle_dir: Path):
    """Two windows search at once on one engine, in one batched call; the first cancels its request: it is
    answered as cancelled, and the second window's search goes on to the answer a private worker gives."""
    model = str(fp32_bundle_dir)
    slow = {"COMPLETER_WORKER_STEP_DELAY_MS": "20", "COMPLETER_MODEL": model}  # searches long enough to cancel
    first, second = _server(tmp_path, **slow), _server(tmp_path, **slow)
    standalone = RawClient([sys.executable, "-m", "lsp", "--standalone"],
                           env=_env(tmp_path / "private", COMPLETER_MODEL=model))
    standalone.initialize({"completer": {"searchAhead": False}})
    try:
        assert len({_ready(client)["server"]["worker_pid"] for client in (first, second)}) == 1
        _ready(standalone)
        for index, client in enumerate((first, second, standalone)):
            client.open(URI.format(index if client is not standalone else 1), SAMPLE_TEXT)
        params = [{"textDocument": {"uri": URI.format(index)}, "position": {"line": LINE, "character": COLUMN}}
                  for index in range(2)]
        cancelled = first.request_nowait("textDocument/completion", params[0])
        kept = second.request_nowait("textDocument/completion", params[1])
        time.sleep(0.3)  # both searches are under way
        first.notify("$/cancelRequest", {"id": cancelled})
        reply = first.wait(cancelled, timeout=60)
        assert reply.get("error", {}).get("code") == -32800, reply  # RequestCancelled
        answer = _lines(second.wait(kept, timeout=60))
        assert answer and answer == _lines(standalone.completion(URI.format(1), LINE, COLUMN, timeout=60))
    finally:
        for client in (first, second, standalone):
            client.close()


def test_code_changed_on_disk_gets_its_own_engine_and_session_host(tmp_path: Path):
    """A checkout pulled while editors run: servers started after it must not reach the session host and engine
    still running the code from before (they would fork sessions of the old code). The socket names carry the
    state of the source files, taken as a process imports its code."""
    import shutil

    from lsp.engine_socket import PACKAGE_ROOT, SOURCE_PACKAGES

    for package in SOURCE_PACKAGES:  # a copy of the code, with no model: only its sockets' names are asked
        shutil.copytree(PACKAGE_ROOT / package, tmp_path / "checkout" / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.onnx", "samples"))
    ask = ("from lsp.engine_socket import socket_path; from lsp.relay import host_socket_path; "
           "print(socket_path().name, host_socket_path().name)")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "checkout"), "COMPLETER_RUNTIME_DIR": str(tmp_path / "run")}

    def names() -> str:
        done = subprocess.run([sys.executable, "-c", ask], env=env, capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)  # not the repository's root, which `-c` would put first on the path
        assert done.returncode == 0, done.stderr
        return done.stdout

    before = names()
    assert names() == before  # nothing changed: the same engine and host
    changed = tmp_path / "checkout" / "lsp" / "server.py"
    changed.write_text(changed.read_text() + "\n# pulled\n")
    after = names()
    assert after.split()[0] != before.split()[0] and after.split()[1] != before.split()[1]


def _checkout_copy(tmp_path: Path) -> Path:
    """A copy of the code (not the models: servers of it read the repository's, by COMPLETER_MODEL), which a test
    can change as a `git pull` would while its servers run."""
    import shutil

    from lsp.engine_socket import PACKAGE_ROOT, SOURCE_PACKAGES

    for package in SOURCE_PACKAGES:
        shutil.copytree(PACKAGE_ROOT / package, tmp_path / "checkout" / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.onnx"))
    return tmp_path / "checkout"


def _pull(checkout: Path) -> None:
    """What a pull does to a running window's code: a source file of the engine's changes size and time."""
    changed = checkout / "lsp" / "worker.py"
    changed.write_text(changed.read_text() + "\n# pulled\n")


def _listening(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def test_a_window_whose_code_changed_on_disk_starts_no_engine_of_the_new_code(tmp_path: Path):
    """A pull while a window runs, then its engine dies: an engine started now would import the new code and listen
    on the old code's socket, serving windows that speak the protocol of before. The window starts none, tells the
    user once to restart it, and answers every request at once; a window started after the pull runs the new code
    on an engine of its own."""
    checkout = _checkout_copy(tmp_path)
    runtime = tmp_path / "run"
    env = _env(runtime, PYTHONPATH=str(checkout), COMPLETER_MODEL=str(Path(__file__).parent.parent / "models"
                                                                      / "python-small"))
    old = RawClient([sys.executable, "-m", "lsp"], env=env, cwd=str(tmp_path))  # not the repository's root
    old.initialize({"completer": {"searchAhead": False}})
    new = None
    try:
        engine_pid = _ready(old)["server"]["worker_pid"]
        (old_socket,) = runtime.glob("engine-*.sock")
        old.open(URI.format(0), SAMPLE_TEXT)
        _pull(checkout)
        os.kill(engine_pid, signal.SIGKILL)
        told = old.wait_for(lambda m: m["method"] == "window/showMessage" and "restart" in m["params"]["message"],
                            timeout=10)
        assert "changed" in told["params"]["message"] and "\n" not in told["params"]["message"]
        started = time.monotonic()
        reply = old.completion(URI.format(0), LINE, COLUMN, timeout=10)
        assert reply.get("result") is not None and not _lines(reply) and time.monotonic() - started < 2.0
        info = _info(old)
        assert info["server"]["worker_pid"] is None and "changed" in info["model_error"]
        time.sleep(1.0)  # any restart would be under way by now
        assert not _listening(old_socket), "an engine of the new code on the old code's socket"
        assert len([m for m in old.notifications if m["method"] == "window/showMessage"]) == 1, "told once"
        old.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"beams": 2}}})
        assert _info(old)["server"]["settings"]["beams"] == 2  # kept for the restart, applied to no worker
        assert len([m for m in old.notifications if m["method"] == "window/showMessage"]) == 1, "told once only"
        new = RawClient([sys.executable, "-m", "lsp"], env=env, cwd=str(tmp_path))
        new.initialize({"completer": {"searchAhead": False}})
        info = _ready(new)
        assert info["server"]["shared_engine"] and info["server"]["worker_pid"] != engine_pid
        (new_socket,) = set(runtime.glob("engine-*.sock")) - {old_socket}  # the old one may stay, stale
        assert _listening(new_socket)
        new.open(URI.format(1), SAMPLE_TEXT)
        assert _lines(new.completion(URI.format(1), LINE, COLUMN, timeout=60))
    finally:
        for client in (old, new):
            if client is not None:
                client.close()


def test_a_private_worker_is_not_restarted_from_code_changed_on_disk(tmp_path: Path):
    """`--standalone` after a pull: the worker that replaces a dead one would run the new code too."""
    checkout = _checkout_copy(tmp_path)
    env = _env(tmp_path / "run", PYTHONPATH=str(checkout),
               COMPLETER_MODEL=str(Path(__file__).parent.parent / "models" / "python-small"))
    client = RawClient([sys.executable, "-m", "lsp", "--standalone"], env=env, cwd=str(tmp_path))
    client.initialize({"completer": {"searchAhead": False}})
    try:
        worker_pid = _ready(client)["server"]["worker_pid"]
        _pull(checkout)
        os.kill(worker_pid, signal.SIGKILL)
        client.wait_for(lambda m: m["method"] == "window/showMessage" and "restart" in m["params"]["message"])
        client.open(URI.format(0), SAMPLE_TEXT)
        assert not _lines(client.completion(URI.format(0), LINE, COLUMN, timeout=5))
        assert _info(client)["server"]["worker_pid"] is None
    finally:
        client.close()


def test_a_worker_of_other_code_than_its_servers_exits_at_once(tmp_path: Path):
    """The pull can land between the server's look at its files and the worker's import of them: the worker
    started with the server's fingerprint refuses to run, in one line, before it listens or loads anything."""
    from lsp.engine_socket import CODE_CHANGED_EXIT
    from lsp.worker_client import PACKAGE_ROOT, WORKER_BOOT

    done = subprocess.run([sys.executable, "-c", WORKER_BOOT.format(root=str(PACKAGE_ROOT)), "--source", "0" * 12,
                           "--listen", str(tmp_path / "engine.sock")], capture_output=True, text=True, timeout=60,
                          env=_env(tmp_path))
    assert done.returncode == CODE_CHANGED_EXIT
    assert done.stderr.count("\n") == 1 and "changed since the server started" in done.stderr
    assert not (tmp_path / "engine.sock").exists()


@pytest.mark.parametrize("xdg", ["missing", "file", "relative", "another user's"])
def test_an_unusable_XDG_RUNTIME_DIR_falls_back_to_the_temporary_directory(tmp_path: Path, xdg: str):
    """$XDG_RUNTIME_DIR removed (a tmux session that outlived the login: systemd removed /run/user/<uid>),
    not a directory, relative (each project would get a socket directory and an engine of its own), or another
    user's (`sudo -E` keeps the user's: root would make a completer directory of its own there, which the user's
    windows then refuse, running private workers until the next login): the sockets go to <tmp>/completer-<uid>,
    and the windows still share one engine; nothing is made where the variable points."""
    import shutil
    import tempfile

    if xdg == "another user's" and os.getuid() != 0:
        pytest.skip("only root may write in another user's directory (others fall back already: not writable)")
    project, temporary = tmp_path / "project", Path(tempfile.mkdtemp(prefix="xdg"))  # pytest's are too long for
    project.mkdir()                                                                    # a socket's address
    (tmp_path / "file").touch()
    theirs = Path(tempfile.mkdtemp(prefix="theirs"))  # 0700
    if os.getuid() == 0:
        os.chown(theirs, 65534, 65534)
    value = {"missing": str(tmp_path / "run" / "user" / "1000"), "file": str(tmp_path / "file"),
             "relative": "run", "another user's": str(theirs)}[xdg]
    env = _env(tmp_path, XDG_RUNTIME_DIR=value, TMPDIR=str(temporary))
    del env["COMPLETER_RUNTIME_DIR"]
    client = RawClient([sys.executable, "-m", "lsp"], env=env, cwd=str(project))
    client.initialize({"completer": {"searchAhead": False}})
    try:
        assert _ready(client)["server"]["shared_engine"]
        assert list((temporary / f"completer-{os.getuid()}").glob("engine-*.sock"))
        assert not (tmp_path / "run").exists() and not (project / "run").exists()
        assert not list(theirs.iterdir())
    finally:
        client.close()
        shutil.rmtree(temporary, ignore_errors=True)
        shutil.rmtree(theirs, ignore_errors=True)
