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
