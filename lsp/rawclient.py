"""A tiny synchronous LSP client over a subprocess's stdio, for the benchmark and wire-level tests.

Typed clients (pytest-lsp, pygls) refuse to send malformed JSON or wrongly typed params and drop
responses they cannot match to a request; this one sends raw bytes and records every message,
so tests can check exactly what the server answers to bad input.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any


class RawClient:
    def __init__(self, cmd: list[str] | None = None, env: dict[str, str] | None = None, cwd: str | None = None,
                 stderr: Any = None) -> None:
        self.cmd = cmd or [sys.executable, "-m", "lsp"]
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                     env=env, cwd=cwd)
        self._cond = threading.Condition()
        self.responses: dict[Any, dict[str, Any]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.null_id_errors: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []  # what the server asked of us (all answered)
        self.configuration: dict[str, Any] = {}  # workspace/configuration's answer for each section (else null)
        self.arrival: dict[Any, float] = {}
        self._next_id = 0
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- wire ------------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    with self._cond:
                        self._cond.notify_all()
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii", "replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if length is None:
                continue
            body = out.read(length)
            now = time.perf_counter()
            message = json.loads(body)
            with self._cond:
                if "id" in message and "method" not in message:
                    if message["id"] is None:
                        self.null_id_errors.append(message)
                    else:
                        self.responses[message["id"]] = message
                        self.arrival[message["id"]] = now
                elif "method" in message and "id" in message:  # a server->client request
                    self._answer_server_request(message)
                else:
                    self.notifications.append(message)
                self._cond.notify_all()

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        self.server_requests.append(message)
        result: Any = None
        if message["method"] == "workspace/configuration":
            items = message.get("params", {}).get("items", [])
            result = [self.configuration.get(item.get("section")) for item in items]
        threading.Thread(target=self.send, args=({"jsonrpc": "2.0", "id": message["id"], "result": result},),
                         daemon=True).start()

    def send_bytes(self, data: bytes) -> None:
        """These bytes as they are, headers included: for framing the server must survive."""
        with self._write_lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send_raw(self, body: bytes) -> None:
        """One frame with the given body, whatever it contains."""
        self.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode("utf-8"))

    # -- JSON-RPC --------------------------------------------------------------------------------
    def new_id(self) -> int:
        with self._cond:
            self._next_id += 1
            return self._next_id

    def request_nowait(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        msg_id = self.new_id() if msg_id is None else msg_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    def wait(self, msg_id: Any, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while msg_id not in self.responses:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no response to request {msg_id!r} within {timeout} s")
                if self.proc.poll() is not None and self.proc.stdout is not None and not self._reader.is_alive():
                    raise ConnectionError(f"server exited with code {self.proc.returncode}")
                self._cond.wait(min(remaining, 0.5))
            return self.responses.pop(msg_id)

    def request(self, method: str, params: Any = None, timeout: float = 30.0) -> dict[str, Any]:
        """The whole response message ({"result": ...} or {"error": ...})."""
        return self.wait(self.request_nowait(method, params), timeout)

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> dict[str, Any]:
        """The first notification matching `predicate`, waiting for it if need be."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for message in self.notifications:
                    if predicate(message):
                        return message
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("no matching notification")
                self._cond.wait(min(remaining, 0.5))

    # -- LSP conveniences ------------------------------------------------------------------------
    def initialize(self, options: Any = None, capabilities: dict[str, Any] | None = None,
                   timeout: float = 30.0) -> dict[str, Any]:
        response = self.request("initialize", {
            "processId": os.getpid(), "rootUri": None,
            "capabilities": capabilities or {},
            "initializationOptions": options,
        }, timeout)
        self.notify("initialized", {})
        return response

    def open(self, uri: str, text: str, language_id: str = "python", version: int = 1) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": language_id, "version": version, "text": text}})

    def change(self, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        self.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": start[0], "character": start[1]},
                                          "end": {"line": end[0], "character": end[1]}}, "text": text}]})

    def completion(self, uri: str, line: int, character: int, timeout: float = 30.0) -> dict[str, Any]:
        return self.request("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character}}, timeout)

    def close(self, timeout: float = 10.0) -> int | None:
        """shutdown + exit, then make sure the process is gone; returns its exit code."""
        try:
            if self.proc.poll() is None:
                self.request("shutdown", None, timeout)
                self.notify("exit")
                self.proc.wait(timeout)
        except Exception:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except Exception:
                    pass
        return self.proc.returncode

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
