"""Adversarial reproductions for the "openai" backend, each through the real server process (`python -m lsp`,
driven by lsp.rawclient.RawClient) in front of a loopback endpoint written here with raw sockets. Each test
is one problem found; it fails until the problem is fixed.

The rules checked are the ones the project promises: the API key is never logged; a client's or an endpoint's
mistake is one log line, not a traceback, and shows as an error (completer/info); the back-off starts at 0.5 s.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from lsp.rawclient import RawClient
from lsp_support import REPO

pytest.importorskip("httpx")

URI = "file:///work/adder.py"
DOC = "import math\n\n\ndef add(a, b):\n\n\nprint(add(1, 2))\n"
SECRET = "sk-adversarial-5e1f"


class RawEndpoint:
    """A loopback HTTP/1.1 endpoint: `handler(conn, body)` writes the reply."""

    def __init__(self, handler: Callable[[socket.socket, bytes], None]) -> None:
        self.handler = handler
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                self.handler(conn, head + b"\r\n\r\n" + body)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def send(conn: socket.socket, body: bytes, status: int = 200) -> None:
    conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                 % (status, len(body)) + body)


def good(conn: socket.socket, _request: bytes) -> None:
    send(conn, json.dumps({"choices": [{"index": 0, "text": "    return a + b", "finish_reason": "stop"}]}).encode())


class Server:
    def __init__(self, options: dict[str, Any], **env: str) -> None:
        self.log_dir = tempfile.mkdtemp(prefix="completer-adversarial-")
        environ = dict(os.environ, COMPLETER_LOG_DIR=self.log_dir, PYTHONPATH=str(REPO), **env)
        self.stderr = open(Path(self.log_dir) / "stderr.txt", "wb")
        self.client = RawClient(env=environ, cwd=str(REPO), stderr=self.stderr)
        assert "result" in self.client.initialize(options)

    def inline(self, line: int, column: int, uri: str = URI, timeout: float = 10.0) -> list[str]:
        reply = self.client.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": column},
            "context": {"triggerKind": 2}}, timeout)
        assert "result" in reply, reply
        return [item["insertText"] for item in (reply["result"] or {}).get("items", [])]

    def info(self) -> dict[str, Any]:
        return self.client.request("completer/info", {}, 10)["result"]

    def logged(self) -> str:
        """The log files and stderr, and every window/logMessage and showMessage."""
        files = [p.read_text(errors="replace") for p in Path(self.log_dir).rglob("*") if p.is_file()]
        return "\n".join(files + [json.dumps(m, ensure_ascii=False) for m in self.client.notifications])

    def close(self) -> None:
        self.client.close()
        self.stderr.close()


def options(url: str, **extra: Any) -> dict[str, Any]:
    return {"backend": "openai", "endpoint": url, "model": "qwen2.5-coder-test", "requestTimeoutMs": 2000, **extra}


@pytest.fixture
def endpoint():
    made: list[RawEndpoint] = []

    def make(handler: Callable[[socket.socket, bytes], None] = good) -> RawEndpoint:
        made.append(RawEndpoint(handler))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.fixture
def servers():
    made: list[Server] = []

    def make(opts: dict[str, Any], **env: str) -> Server:
        made.append(Server(opts, **env))
        return made[-1]

    yield make
    for one in made:
        one.close()


def _no_traceback(server: Server) -> None:
    logged = server.logged()
    assert "Traceback" not in logged and "Task exception was never retrieved" not in logged, logged[-3000:]


# -- the key is never logged ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", [SECRET + "\r", SECRET + " "])
def test_a_key_with_a_stray_cr_or_space_is_not_logged(endpoint, servers, value):
    """A key read from a CRLF .env file keeps its \\r: h11 refuses the header with "Illegal header value
    b'Bearer <key>\\r'", and remote_backend._post logs that message (and completer/info shows it)."""
    server = servers(options(endpoint().url, apiKeyEnv="ADVERSARIAL_KEY"), ADVERSARIAL_KEY=value)
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    assert SECRET not in json.dumps(server.info())
    assert SECRET not in server.logged()


def test_an_error_body_that_echoes_the_key_is_not_logged(endpoint, servers):
    """A 401 whose body quotes the Authorization header it refused: _post logs the body's first 200 bytes."""
    def echo(conn: socket.socket, request: bytes) -> None:
        auth = next(line for line in request.split(b"\r\n") if line.lower().startswith(b"authorization"))
        send(conn, b'{"error": "invalid credentials: ' + auth + b'"}', status=401)

    server = servers(options(endpoint(echo).url, apiKeyEnv="ADVERSARIAL_KEY"), ADVERSARIAL_KEY=SECRET)
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    assert SECRET not in json.dumps(server.info())
    assert SECRET not in server.logged()


# -- a mistake is one log line, not a traceback ----------------------------------------------------------
def test_a_key_that_is_not_ascii_is_one_error_not_a_traceback_per_request(endpoint, servers):
    """httpx raises UnicodeEncodeError building the header: not an httpx.HTTPError, so _complete's catch-all
    logs a traceback at every request, with no back-off and remote.state still "ready"."""
    server = servers(options(endpoint().url, apiKeyEnv="ADVERSARIAL_KEY"), ADVERSARIAL_KEY="sk-clé")
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    _no_traceback(server)
    assert server.info()["remote"]["state"] == "error"


def test_a_deeply_nested_reply_is_a_malformed_reply_not_a_traceback(endpoint, servers):
    """json.loads raises RecursionError (not a ValueError) on 600,000 nested brackets, well under 1 MiB."""
    server = servers(options(endpoint(lambda conn, _r: send(conn, b'{"choices": ' + b"[" * 600_000)).url))
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    _no_traceback(server)
    state = server.info()["remote"]
    assert state["state"] == "error" and state["last_error"]


@pytest.mark.parametrize("how", ["initialize", "didChangeConfiguration"])
def test_an_endpoint_httpx_cannot_parse_is_refused_or_reported(endpoint, servers, how):
    """urlsplit drops a tab inside the URL, so check_endpoint accepts "http://127.0.0.1:PORT/v\\t1"; httpx.URL
    then raises InvalidURL in OpenAIBackend.start(), which nothing catches: a traceback, no message to the
    user, completions silently off (remote.state "not started", model_error None)."""
    ep = endpoint()
    bad = ep.url[:-1] + "\t1"
    server = servers(options(bad if how == "initialize" else ep.url))
    if how == "didChangeConfiguration":
        server.client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"endpoint": bad}}})
    server.client.open(URI, DOC)
    assert server.inline(4, 0) in ([], ["    return a + b"])
    info = server.info()
    _no_traceback(server)
    refused = "\t" not in info["server"]["settings"]["endpoint"]
    assert refused or info["model_error"], info


def test_a_socks_proxy_in_the_environment_is_reported(servers):
    """An https endpoint takes proxies from the environment (trust_env); with ALL_PROXY=socks5://... and no
    socksio, httpx.AsyncClient() raises ImportError in OpenAIBackend.start(): same silent failure."""
    server = servers(options("https://completions.invalid/v1"), ALL_PROXY="socks5://127.0.0.1:9",
                     HTTPS_PROXY="socks5://127.0.0.1:9")
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    info = server.info()
    _no_traceback(server)
    assert info["model_error"] or info["remote"]["state"] == "error", info


# -- the back-off ---------------------------------------------------------------------------------------
def test_one_outage_seen_by_several_documents_backs_off_for_half_a_second_not_thirty(endpoint, servers):
    """Eight documents' requests in flight fail together in one endpoint hiccup: _failed counts each as a
    failure "in a row", so the back-off is BACKOFF_S[6] = 30 s instead of the documented 0.5 s."""
    failing = threading.Event()
    failing.set()

    def flaky(conn: socket.socket, request: bytes) -> None:
        time.sleep(0.3)
        if failing.is_set():
            send(conn, b'{"error": "loading"}', status=503)
        else:
            good(conn, request)

    server = servers(options(endpoint(flaky).url))
    uris = [f"file:///work/doc{i}.py" for i in range(8)]
    for uri in uris:
        server.client.open(uri, DOC)
    ids = [server.client.request_nowait("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": 4, "character": 0}, "context": {"triggerKind": 2}})
        for uri in uris]
    for msg_id in ids:
        server.client.wait(msg_id, 10)
    failing.clear()
    deadline = time.monotonic() + 3.0  # the first failure backs off 0.5 s; 1 s after a second
    while not server.inline(4, 0, uris[0]):
        assert time.monotonic() < deadline, f"still backing off: {server.info()['remote']}"
        time.sleep(0.25)
