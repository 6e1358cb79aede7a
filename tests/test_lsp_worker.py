"""The server's worker client against real worker processes: a worker that cannot be spawned, or
that does not finish loading the model, is replaced without anyone asking."""
from __future__ import annotations

import sys

import pytest

from lsp import worker_client
from lsp.settings import ServerSettings, engine_dict
from lsp.worker_client import WorkerClient


@pytest.fixture
async def client():
    worker = WorkerClient(lambda: engine_dict(ServerSettings()))
    yield worker
    await worker.stop()


async def test_a_worker_that_does_not_load_in_time_is_killed_and_replaced(client: WorkerClient, monkeypatch):
    monkeypatch.setattr(worker_client, "INIT_TIMEOUT", 0.01)
    error = await client.start()
    assert error is not None and "did not load the model" in error
    monkeypatch.setattr(worker_client, "INIT_TIMEOUT", 120.0)  # the replacement gets the usual time
    assert await client.wait_ready(60)
    assert client.restarts >= 1 and client.model_error is None and client.info.get("model")


async def test_a_worker_that_cannot_be_spawned_is_retried(client: WorkerClient, monkeypatch):
    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    error = await client.start()
    assert error is not None and "cannot start the inference worker" in error
    monkeypatch.undo()
    assert await client.wait_ready(60)
    assert client.restarts == 1 and client.info.get("model")


async def test_the_worker_never_imports_from_the_working_directory(client: WorkerClient, monkeypatch, tmp_path):
    """Editors start the server in the user's project; its own `lsp/` must not replace ours."""
    marker = tmp_path / "hijacked"
    for package in ("lsp", "completer"):
        (tmp_path / package).mkdir()
        for module in ("__init__.py", "worker.py"):
            (tmp_path / package / module).write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    assert await client.start() is None
    assert client.info.get("model") and not marker.exists()


async def test_a_job_sent_between_the_engines_death_and_its_replacement_is_answered(monkeypatch, tmp_path):
    """A request that found the worker ready just before the shared engine died sends its job while the
    replacement starts: it fails at once (and is asked again of the replacement), never waits forever on the
    dead engine's connection."""
    import asyncio
    import os
    import signal

    from lsp.worker_client import WorkerDied, WorkerError

    monkeypatch.setenv("COMPLETER_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("COMPLETER_ENGINE_IDLE_EXIT_S", "2")
    worker = WorkerClient(lambda: engine_dict(ServerSettings()), shared=True)
    try:
        assert await worker.start() is None and worker.on_shared_engine
        os.kill(worker.pid, signal.SIGKILL)
        for _ in range(10000):  # until the reader saw the engine die; its replacement is being started
            if not worker._event().is_set():
                break
            await asyncio.sleep(0.001)
        else:
            raise AssertionError("the reader never saw the engine die")
        try:  # sent between the death and the replacement: refused at once, or answered by the replacement
            _, future = worker.submit("info")
        except WorkerDied:
            return
        try:
            await asyncio.wait_for(future, 10)  # before the fix: waited forever on the dead connection
        except WorkerError:
            pass
    finally:
        await worker.stop()


async def test_after_a_pull_a_server_reconnects_to_its_engine_but_starts_none(monkeypatch, tmp_path):
    """Once the code on disk changed, the engine of the server's own code, still running, is still its engine
    (the connection may end without the engine: it cuts off a server that stopped reading for 2 s); only once
    that engine is gone does the server stay without one, rather than start one of the new code."""
    import asyncio
    import os
    import signal

    from lsp import engine_socket

    monkeypatch.setenv("COMPLETER_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("COMPLETER_ENGINE_IDLE_EXIT_S", "2")
    told: list[str] = []
    worker = WorkerClient(lambda: engine_dict(ServerSettings()), shared=True, tell_user=told.append)

    async def until(condition) -> None:
        for _ in range(1000):
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("not within 10 s")

    try:
        assert await worker.start() is None
        engine = worker.pid
        monkeypatch.setattr(engine_socket, "source_fingerprint", lambda *_: "pulled")  # what a pull does to it
        worker._channel.kill()  # the connection ends; the engine runs on
        await until(lambda: worker.restarts == 1 and worker.pid is not None and worker._event().is_set())
        assert worker.pid == engine and worker.on_shared_engine and not told
        os.kill(engine, signal.SIGKILL)
        await until(lambda: told)
        assert worker.pid is None and len(told) == 1 and "restart the language server" in told[0]
        assert worker.model_error == told[0]
        path = engine_socket.socket_path()
        assert not path.exists() or engine_socket._connected(path) is None, "an engine of the new code started"
    finally:
        await worker.stop()
