"""A real OpenAI-compatible server on our own weights, for the remote backend's tests and benchmarks.

llama-cpp-python's server (`pip install 'llama-cpp-python[server]'`) runs offline from PyPI wheels; it
serves the GGUF that scripts/gguf_export.py writes from models/python-small/training, so no model is
downloaded and a test can expect our model's completions.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 60.0
STDERR_TAIL_CHARS = 3000


def our_gguf(directory: Path, kind: str = "f32") -> Path:
    """The GGUF of the embedded model in `directory`, written on first use (about a second): give it a
    session-wide folder, e.g. `tmp_path_factory.getbasetemp() / "gguf"`, so a session builds it once."""
    path = directory / f"python-small-{kind}.gguf"
    if not path.is_file():
        if str(REPO / "scripts") not in sys.path:
            sys.path.insert(0, str(REPO / "scripts"))
        from gguf_export import DEFAULT_SOURCE, export

        directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        export(DEFAULT_SOURCE, partial, kind)
        partial.replace(path)  # a file that exists is whole
    return path


def free_port() -> int:
    """A port nothing listens on now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(gguf_path: Path, port: int, n_ctx: int, threads: int, extra_args: Sequence[str]) -> list[str]:
    """llama-cpp-python 0.3.36's flags; the alias is the model name /v1/models reports."""
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path), "--model_alias", gguf_path.stem,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
            "--n_threads_batch", str(threads), *extra_args]


def _tail(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-STDERR_TAIL_CHARS:]


def wait_until_serving(base_url: str, process: subprocess.Popen, log: Path, timeout_s: float) -> None:
    """Poll GET /v1/models until it answers; a server that exits or stays silent fails with the tail of its
    output (stderr and stdout together)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode} before serving:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise TimeoutError(f"llama_cpp.server did not answer {base_url}/models within {timeout_s:.0f} s:\n{_tail(log)}")


def _stop(process: subprocess.Popen) -> None:
    """End the server's whole process group: politely, then for certain."""
    for sig, grace_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def llama_server(gguf_path: Path, *, n_ctx: int = 1024, threads: int = 2, extra_args: Sequence[str] = (),
                 timeout_s: float = STARTUP_TIMEOUT_S) -> Iterator[str]:
    """Serve `gguf_path` on a free local port for the block; yields the base URL, http://127.0.0.1:PORT/v1.

    `extra_args`: more server flags, e.g. ("--cache", "true") for its prompt cache."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory(prefix="llama-server-") as folder:
        log = Path(folder) / "server.log"
        with open(log, "wb") as sink:
            process = subprocess.Popen(server_command(Path(gguf_path), port, n_ctx, threads, extra_args),
                                       stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        try:
            wait_until_serving(base_url, process, log, timeout_s)
            yield base_url
        finally:
            _stop(process)
