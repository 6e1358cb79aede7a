"""The "openai" backend against a hostile or broken world, each test through the real server process
(`python -m lsp`, driven by lsp.rawclient.RawClient) in front of a loopback endpoint written here with raw
sockets. Each test is a problem an adversarial run found, kept so that it stays fixed.

The rules checked are the ones the project promises: the API key is never logged; a client's or an endpoint's
mistake is one log line, not a traceback, and shows as an error (completer/info); the back-off starts at 0.5 s.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsp_support import REPO

from lsp.rawclient import RawClient

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
    def __init__(self, options: dict[str, Any], root: Path | None = None, **env: str) -> None:
        self.log_dir = tempfile.mkdtemp(prefix="completer-adversarial-")
        environ = dict(os.environ, COMPLETER_LOG_DIR=self.log_dir, PYTHONPATH=str(REPO), COMPLETER_STANDALONE="1",
                       **env)
        self.stderr = open(Path(self.log_dir) / "stderr.txt", "wb")  # noqa: SIM115 (closed in close())
        self.client = RawClient(env=environ, cwd=str(REPO), stderr=self.stderr)
        reply = self.client.request("initialize", {"processId": None, "rootUri": root.as_uri() if root else None,
                                                   "capabilities": {}, "initializationOptions": options}, 30)
        assert "result" in reply, reply
        self.client.notify("initialized", {})

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
        shutil.rmtree(self.log_dir, ignore_errors=True)


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

    def make(opts: dict[str, Any], root: Path | None = None, **env: str) -> Server:
        made.append(Server(opts, root, **env))
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
    """A key read from a CRLF .env file keeps its \\r, which h11 refuses in a header with a message that quotes
    the header: the key is stripped before it is sent, and messages never quote it."""
    server = servers(options(endpoint().url, apiKeyEnv="ADVERSARIAL_KEY"), ADVERSARIAL_KEY=value)
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == ["    return a + b"]  # the stray character is stripped: the key works
    assert SECRET not in json.dumps(server.info())
    assert SECRET not in server.logged()


def test_an_error_body_that_echoes_the_key_is_not_logged(endpoint, servers):
    """A 401 whose body quotes the Authorization header it refused: the part of the body that is logged has
    the key taken out."""
    def echo(conn: socket.socket, request: bytes) -> None:
        auth = next(line for line in request.split(b"\r\n") if line.lower().startswith(b"authorization"))
        send(conn, b'{"error": "invalid credentials: ' + auth + b'"}', status=401)

    server = servers(options(endpoint(echo).url, apiKeyEnv="ADVERSARIAL_KEY"), ADVERSARIAL_KEY=SECRET)
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    assert SECRET not in json.dumps(server.info())
    assert SECRET not in server.logged()


def test_a_token_pasted_into_api_key_env_is_not_logged(endpoint, servers):
    """Many keys look like variable names (Hugging Face "hf_...", Groq "gsk_...", Fireworks "fw_...", hex
    keys): apiKeyEnv takes only capitals, digits and underscores without a key-like run, so one pasted there
    is refused, and the refusal does not quote it (the settings, their log lines and completer/info would)."""
    token = "hf_QzXwVbNmLkJhGfDsAaPoIuYtReWq12345678"
    server = servers(options(endpoint().url, apiKeyEnv=token))
    server.client.open(URI, DOC)
    server.inline(4, 0)
    assert token not in server.logged()


def test_a_redirect_is_an_error_not_an_answer_and_is_not_followed(endpoint, servers):
    """A 302 to another server, with a body shaped like completions: neither its body is shown nor the
    redirect followed (the code and the key go only to the endpoint the settings name), and the error says
    where it pointed."""
    elsewhere = endpoint()

    def redirect(conn: socket.socket, _request: bytes) -> None:
        body = json.dumps({"choices": [{"index": 0, "text": "    return a + b", "finish_reason": "stop"}]}).encode()
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://localhost:%d/v1/completions\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n" % (elsewhere.port, len(body)) + body)

    server = servers(options(endpoint(redirect).url, apiKeyEnv="ADVERSARIAL_KEY"), ADVERSARIAL_KEY=SECRET)
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    state = server.info()["remote"]
    assert state["state"] == "error" and "redirect" in state["last_error"], state
    assert f"localhost:{elsewhere.port}" in state["last_error"]
    assert elsewhere.requests == 0
    _no_traceback(server)
    assert SECRET not in server.logged()


def _peak_rss_kib(pid: int) -> int:
    return next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's peak memory from /proc")
def test_a_gzip_bomb_is_refused_without_unpacking_it(endpoint, servers):
    """Asked for no encoding, an endpoint gzips 1 GiB of spaces into 1 MiB anyway: the 1 MiB cap counts the bytes
    that arrive and unpacks at most 1 MiB of them (httpx would unpack each 64 KiB chunk into 64 MiB first), and a
    small gzipped reply still answers."""
    bomb = gzip.compress(b" " * (1 << 30))
    answer = gzip.compress(json.dumps({"choices": [{"index": 0, "text": "    return a + b"}]}).encode())

    def gzipped(conn: socket.socket, _request: bytes) -> None:
        body = bomb if replies.requests == 1 else answer
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                     % len(body) + body)

    replies = endpoint(gzipped)
    server = servers(options(replies.url))
    pid = server.info()["server"]["pid"]
    server.client.open(URI, DOC)
    before = _peak_rss_kib(pid)
    assert server.inline(4, 0) == []
    assert _peak_rss_kib(pid) - before < 32 << 10, "the server unpacked far more than the 1 MiB cap"
    assert "over 1,048,576 bytes" in server.info()["remote"]["last_error"]
    time.sleep(0.6)  # the back-off
    assert server.inline(4, 0) == ["    return a + b"]
    _no_traceback(server)


# -- a mistake is one log line, not a traceback ----------------------------------------------------------
def test_a_key_that_is_not_ascii_is_one_error_not_a_traceback_per_request(endpoint, servers):
    """A header cannot carry it: one error of its own kind, with the back-off and remote.state "error"."""
    server = servers(options(endpoint().url, apiKeyEnv="ADVERSARIAL_KEY"), ADVERSARIAL_KEY="sk-clé")
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    _no_traceback(server)
    assert server.info()["remote"]["state"] == "error"


def test_a_deeply_nested_reply_is_a_malformed_reply_not_a_traceback(endpoint, servers):
    """json.loads raises RecursionError, not ValueError, on 600,000 nested brackets, well under 1 MiB."""
    server = servers(options(endpoint(lambda conn, _r: send(conn, b'{"choices": ' + b"[" * 600_000)).url))
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    _no_traceback(server)
    state = server.info()["remote"]
    assert state["state"] == "error" and state["last_error"]


@pytest.mark.parametrize("how", ["initialize", "didChangeConfiguration"])
def test_an_endpoint_httpx_cannot_parse_is_refused_or_reported(endpoint, servers, how):
    """urlsplit drops a tab inside a URL that httpx.URL refuses: the setting is refused (or, for what only
    httpx refuses, the backend reports model_error), never a traceback with completions silently off."""
    ep = endpoint()
    bad = ep.url[:-1] + "\t1"
    server = servers(options(bad if how == "initialize" else ep.url))
    if how == "didChangeConfiguration":
        server.client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"endpoint": bad}}})
    server.client.open(URI, DOC)
    assert server.inline(4, 0) in ([], ["    return a + b"])
    info = server.info()
    _no_traceback(server)
    refused = "\t" not in (info["server"]["settings"]["endpoint"] or "")
    assert refused or info["model_error"], info


def test_a_socks_proxy_in_the_environment_is_reported(servers):
    """An https endpoint takes proxies from the environment (trust_env); with ALL_PROXY=socks5://... and no
    socksio, httpx.AsyncClient() raises ImportError: reported as the backend's model_error."""
    server = servers(options("https://completions.invalid/v1"), ALL_PROXY="socks5://127.0.0.1:9",
                     HTTPS_PROXY="socks5://127.0.0.1:9")
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    info = server.info()
    _no_traceback(server)
    assert info["model_error"] or info["remote"]["state"] == "error", info


def test_a_lone_surrogate_in_another_open_document_is_not_a_traceback_per_request(endpoint, servers, tmp_path):
    """With workspaceContext, snippets of the other open documents' unsaved text go into the prompt; a lone
    surrogate there (valid in LSP's JSON: "\\ud800") cannot be encoded as UTF-8, so snippets are cleaned and
    the body is sent as ASCII JSON: no traceback at every request while that document is open."""
    seen: list[bytes] = []

    def recording(conn: socket.socket, request: bytes) -> None:
        seen.append(request)
        good(conn, request)

    body = ("def add_numbers(first, second):\n    total = first + second\n    return total\n\n\n"
            "def mul_numbers(first, second):\n    product = first * second\n")
    (tmp_path / "a.py").write_text(body + "    return product\n")
    (tmp_path / "b.py").write_text(body)
    server = servers(options(endpoint(recording).url, workspaceContext=True), tmp_path)
    server.client.open((tmp_path / "a.py").as_uri(), body + "    return product  # \ud800 odd\n")
    server.client.open((tmp_path / "b.py").as_uri(), body)
    deadline = time.monotonic() + 5
    for version in range(2, 100):  # until the index is built and a prompt holds a snippet
        server.inline(7, 4, (tmp_path / "b.py").as_uri())
        if any(b"similar part" in r for r in seen) or "Traceback" in server.logged() or time.monotonic() > deadline:
            break
        server.client.change((tmp_path / "b.py").as_uri(), version, (7, 0), (7, 100), "    " + "r" * version)
        time.sleep(0.2)
    _no_traceback(server)


def test_a_request_read_with_a_backend_change_is_answered(endpoint, tmp_path):
    """`completer serve --tcp` reads messages from an asyncio stream: an inline request and a
    didChangeConfiguration that arrive together are handled in one loop step. The request's job goes to the
    old backend, which the change stops before the job's task first runs: stopping answers every pending job
    (as a dead worker's, so the server asks the new backend), or the request would never be answered."""
    first, second = endpoint(), endpoint()
    environ = dict(os.environ, COMPLETER_LOG_DIR=str(tmp_path), PYTHONPATH=str(REPO), COMPLETER_STANDALONE="1")
    proc = subprocess.Popen([sys.executable, "-m", "lsp", "--tcp", "--port", "0"], env=environ, cwd=str(REPO),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    conn: socket.socket | None = None
    try:
        line = b""
        while b"listening on" not in line:
            line = proc.stderr.readline()
            assert line, "the server did not start"
        port = int(re.search(rb":(\d+) for one client", line).group(1))
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        replies = _LspSocket(conn)
        replies.send({"id": 0, "method": "initialize", "params": {
            "processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": options(first.url)}})
        replies.wait(0)
        replies.send({"method": "initialized", "params": {}})
        replies.send({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": URI, "languageId": "python", "version": 1, "text": DOC}}})
        replies.send({"id": 5, "method": "textDocument/inlineCompletion", "params": {  # alone: answered
            "textDocument": {"uri": URI}, "position": {"line": 3, "character": 0}, "context": {"triggerKind": 2}}})
        assert "result" in replies.wait(5, 5.0)
        for msg_id, url in ((10, second.url), (11, first.url)):
            request = {"id": msg_id, "method": "textDocument/inlineCompletion", "params": {
                "textDocument": {"uri": URI}, "position": {"line": 4, "character": 0}, "context": {"triggerKind": 2}}}
            change = {"method": "workspace/didChangeConfiguration", "params": {"settings": {"completer": {"endpoint": url}}}}
            replies.send(request, change)
            replies.wait(msg_id, 3.0)
        replies.send({"id": 99, "method": "shutdown"})
        replies.wait(99)
        replies.send({"method": "exit"})
    finally:
        if conn is not None:
            conn.close()  # the server ends with its client
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


class _LspSocket:
    """LSP over a socket, several messages per write."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.buffer, self.replies = conn, b"", {}

    def send(self, *messages: dict[str, Any]) -> None:
        data = b""
        for message in messages:
            body = json.dumps({"jsonrpc": "2.0", **message}).encode()
            data += b"Content-Length: %d\r\n\r\n" % len(body) + body
        self.conn.sendall(data)

    def wait(self, msg_id: int, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while msg_id not in self.replies:
            while b"\r\n\r\n" in self.buffer:
                head, _, rest = self.buffer.partition(b"\r\n\r\n")
                length = int(re.search(rb"Content-Length: *(\d+)", head, re.IGNORECASE).group(1))
                if len(rest) < length:
                    break
                message, self.buffer = json.loads(rest[:length]), rest[length:]
                if "id" in message and "method" not in message:
                    self.replies[message["id"]] = message
            if msg_id in self.replies:
                break
            left = deadline - time.monotonic()
            assert left > 0, f"request {msg_id} was never answered"
            self.conn.settimeout(left)
            try:
                chunk = self.conn.recv(65536)
            except TimeoutError:
                continue
            assert chunk, "the server closed the connection"
            self.buffer += chunk
        return self.replies.pop(msg_id)


# -- the back-off ---------------------------------------------------------------------------------------
def test_one_outage_seen_by_several_documents_backs_off_for_half_a_second_not_thirty(endpoint, servers):
    """Eight documents' requests in flight fail together in one endpoint hiccup: one failure, not eight in a
    row, so the back-off is 0.5 s (BACKOFF_S[0]), not 30 s."""
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


def test_a_rate_limited_endpoint_is_left_alone_as_long_as_its_retry_after_asks(endpoint, servers):
    """A 429 with Retry-After: 3 while the user types on: no request reaches the endpoint for those 3 s (the
    back-off alone would send one at 0.5 s and another at 1.5 s, each answered 429), and the first one after
    them is answered."""
    asked: list[float] = []

    def rate_limited(conn: socket.socket, request: bytes) -> None:
        asked.append(time.monotonic())
        if len(asked) > 1:
            good(conn, request)
            return
        body = b'{"error": {"message": "Rate limit reached"}}'
        conn.sendall(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)

    server = servers(options(endpoint(rate_limited).url))
    server.client.open(URI, DOC)
    while server.inline(4, 0) == []:
        assert not asked or time.monotonic() - asked[0] < 6, f"not asked again: {server.info()['remote']}"
        time.sleep(0.2)
    assert len(asked) == 2 and asked[1] - asked[0] >= 3.0, [round(t - asked[0], 2) for t in asked]
    assert "no requests for 3.0 s" in server.logged()
    assert server.info()["remote"]["state"] == "ready"
    _no_traceback(server)


@pytest.mark.parametrize("header", [b"\xb2", b"\xb9\xb2"])  # `²`, `¹²`: digits to str.isdigit, not to float
def test_an_unreadable_retry_after_is_a_back_off_as_usual_not_a_traceback(endpoint, servers, header):
    """A 429 whose Retry-After is no number a server may send (`²`, which str.isdigit takes and float refuses):
    a traceback for every keystroke, each one sent to the endpoint that asked to be left alone, and the status
    bar said "ready". It is read as no Retry-After: the 429 is shown and the usual back-off holds."""
    asked: list[float] = []

    def rate_limited(conn: socket.socket, request: bytes) -> None:
        asked.append(time.monotonic())
        body = b'{"error": {"message": "Rate limit reached"}}'
        conn.sendall(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: " + header + b"\r\nContent-Type: "
                     b"application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)

    server = servers(options(endpoint(rate_limited).url))
    server.client.open(URI, DOC)
    assert [server.inline(4, 0) for _ in range(3)] == [[], [], []]
    assert len(asked) < 3, "the back-off sends nothing for 0.5 s, then nothing for 1 s"
    remote = server.info()["remote"]
    assert remote["state"] == "error" and "429" in remote["last_error"], remote
    _no_traceback(server)


def _reset(conn: socket.socket, _request: bytes) -> None:
    """Close with a TCP reset, as a load balancer or a crashed server does."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.mark.parametrize("how, says", [("refused", "cannot connect to {url}/completions: Connection refused"),
                                       ("reset", "{url}/completions: ReadError: Connection reset by peer")])
def test_a_connection_error_says_what_happened_in_one_line(endpoint, servers, how, says):
    """The status bar shows remote.last_error: httpx says 'All connection attempts failed' for a port nobody
    listens on and nothing at all for a reset connection ('ReadError: '); the socket error under it says which."""
    if how == "refused":
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    else:
        url = endpoint(_reset).url
    server = servers(options(url))
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    assert server.info()["remote"]["last_error"] == says.format(url=url)
    _no_traceback(server)


def test_a_key_in_the_endpoints_query_is_refused_not_logged(endpoint, servers):
    """`?api_key=...` pasted with the endpoint would go into every log line and completer/info that names the
    endpoint (and the status bar's tooltip): the endpoint is refused as one holding user:password is, without
    quoting it, and nothing is sent."""
    keyed = endpoint()
    server = servers(options(f"{keyed.url}?api_key={SECRET}"))
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    info = server.info()
    assert info["remote"]["endpoint"] is None and info["model_error"], info
    assert SECRET not in json.dumps(info) and SECRET not in server.logged()
    assert "apiKeyEnv" in server.logged() and keyed.requests == 0
    _no_traceback(server)


def test_a_proxy_in_the_environment_sees_no_code(endpoint, servers):
    """With HTTP_PROXY, HTTPS_PROXY and ALL_PROXY set (README: an https endpoint goes through the proxy, one on
    this machine never does): the loopback endpoint is asked directly, and for an https one the proxy is asked
    only to CONNECT to its host, the code going inside TLS."""
    asked: list[bytes] = []

    def proxy(conn: socket.socket, request: bytes) -> None:
        asked.append(request)
        conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    proxy_url = f"http://127.0.0.1:{endpoint(proxy).port}"
    env = {name: proxy_url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")}
    env.update(NO_PROXY="", no_proxy="")
    local = servers(options(endpoint().url), **env)
    local.client.open(URI, DOC)
    assert local.inline(4, 0) == ["    return a + b"] and asked == []
    remote = servers(options("https://completions.invalid/v1"), **env)
    remote.client.open(URI, DOC)
    assert remote.inline(4, 0) == []
    assert len(asked) == 1 and asked[0].startswith(b"CONNECT completions.invalid:443 "), asked
    assert b"def add" not in asked[0]
    said = remote.info()["remote"]["last_error"]
    assert said == ("https://completions.invalid/v1/completions through the proxy "
                    f"127.0.0.1:{proxy_url.rsplit(':', 1)[1]} (HTTPS_PROXY): ProxyError: 502 Bad Gateway"), said


def test_a_proxy_that_refuses_is_named_not_the_endpoint(servers):
    """HTTPS_PROXY names a proxy that is down: the status bar said 'cannot connect to <endpoint>: Connection
    refused', sending the user to a GPU box that was never asked. It names the proxy (not its password)."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    server = servers(options("https://completions.invalid/v1"), HTTPS_PROXY=f"http://me:{SECRET}@127.0.0.1:{port}",
                     NO_PROXY="", no_proxy="")
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    assert server.info()["remote"]["last_error"] == ("cannot connect to https://completions.invalid/v1/completions "
                                                      f"through the proxy 127.0.0.1:{port} (HTTPS_PROXY): "
                                                      "Connection refused")
    assert SECRET not in server.logged()


@pytest.mark.parametrize("key_env", [{"apiKeyEnv": "ADVERSARIAL_UNSET_KEY"}, {}])
def test_a_401_for_a_key_never_sent_says_which_setting_to_fix(endpoint, servers, key_env):
    """The endpoint says "invalid API key"; the status bar (remote.last_error) says why none was sent: the variable
    apiKeyEnv names is not in the server's environment (VS Code started from a dock has not the shell's), or
    apiKeyEnv is not set."""
    refused = endpoint(lambda conn, _request: send(conn, b'{"error": "You didn\'t provide an API key."}', 401))
    server = servers(options(refused.url, **key_env))
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    said = server.info()["remote"]["last_error"]
    assert said.startswith(f"{refused.url}/completions answered 401 (no API key was sent: "), said
    assert ("ADVERSARIAL_UNSET_KEY" if key_env else "set completer.apiKeyEnv") in said


@pytest.mark.parametrize("where", ["body", "location"])
def test_a_key_echoed_across_the_cut_of_a_logged_reply_leaves_none_of_it(endpoint, servers, where):
    """The logged part of an error's body, and of a redirect's Location, is its first 200 characters: the key
    echoed across that cut left its head in the log (10 of its 19 characters here), no longer matching the key
    that is taken out. The key is taken out first, then the text cut."""
    def echo(conn: socket.socket, _request: bytes) -> None:
        if where == "body":
            send(conn, b'{"error": "' + b"x" * 170 + b" bad key " + SECRET.encode() + b'"}', status=401)
        else:
            location = b"https://elsewhere.example/" + b"p" * 159 + b"?key=" + SECRET.encode()
            conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                         % location)

    server = servers(options(endpoint(echo).url, apiKeyEnv="ADVERSARIAL_KEY"), ADVERSARIAL_KEY=SECRET)
    server.client.open(URI, DOC)
    assert server.inline(4, 0) == []
    assert "<API key>" in server.info()["remote"]["last_error"]
    assert SECRET[:10] not in json.dumps(server.info()) and SECRET[:10] not in server.logged()
