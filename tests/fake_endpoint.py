"""A small OpenAI-compatible /v1/completions server on loopback that misbehaves on purpose, for the remote
backend's tests: it records every request and can answer well, slowly, with garbage, with a huge body, with
an error status, or a trickle of bytes; a slow answer notices when the client closes the connection."""
from __future__ import annotations

import json
import select
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Seen:
    """One request as the endpoint received it."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    closed_early: bool = False  # the client closed the connection before the answer


@dataclass
class Behaviour:
    mode: str = "ok"  # ok, slow, garbage, huge, status, trickle
    line: Callable[[str], str] = lambda prompt: "    return a + b"  # the completion of a prompt, in mode ok
    choices: Callable[[str], list[str]] | None = None  # each choice's completion instead, when set (mode ok)
    delay_s: float = 5.0  # how long `slow` waits before answering
    status: int = 500
    finish_reason: str = "stop"


@dataclass
class FakeEndpoint:
    behaviour: Behaviour = field(default_factory=Behaviour)
    seen: list[Seen] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> "FakeEndpoint":
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError:
                    body = {}
                seen = Seen(self.path, body, {k.lower(): v for k, v in self.headers.items()})
                with endpoint.lock:
                    endpoint.seen.append(seen)
                    endpoint.in_flight += 1
                    endpoint.most_in_flight = max(endpoint.most_in_flight, endpoint.in_flight)
                try:
                    endpoint._answer(self, seen)
                except (BrokenPipeError, ConnectionResetError):
                    seen.closed_early = True
                finally:
                    with endpoint.lock:
                        endpoint.in_flight -= 1

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:  # a client that hung up: expected
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        behaviour = self.behaviour
        if behaviour.mode == "slow" and self._client_closes(handler, behaviour.delay_s):
            seen.closed_early = True
            return
        if behaviour.mode == "status":
            self._send(handler, behaviour.status, b'{"error": {"message": "something broke"}}')
        elif behaviour.mode == "garbage":
            self._send(handler, 200, b"<html>not an API</html>")
        elif behaviour.mode == "huge":
            self._send(handler, 200, b'{"choices": [{"text": "' + b"x" * (2 << 20) + b'"}]}')
        elif behaviour.mode == "trickle":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "100000")
            handler.end_headers()
            for _ in range(200):
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.05)
        else:
            prompt = seen.body.get("prompt", "")
            n = int(seen.body.get("n") or 1)
            texts = behaviour.choices(prompt)[:n] if behaviour.choices else [behaviour.line(prompt)] * n
            choices = [{"index": i, "text": text, "finish_reason": behaviour.finish_reason}
                       for i, text in enumerate(texts)]
            self._send(handler, 200, json.dumps({"id": "cmpl-1", "object": "text_completion",
                                                 "choices": choices}).encode())

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()

    @staticmethod
    def _client_closes(handler: BaseHTTPRequestHandler, seconds: float) -> bool:
        """Wait up to `seconds`; True as soon as the client closes its end (the socket reads EOF)."""
        deadline = time.monotonic() + seconds
        connection = handler.connection
        while time.monotonic() < deadline:
            readable, _, _ = select.select([connection], [], [], 0.05)
            if readable and not connection.recv(1, 2):  # MSG_PEEK: EOF means closed
                return True
        return False
