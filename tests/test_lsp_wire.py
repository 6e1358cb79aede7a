"""Wire-level tests of the language server: malformed and hostile input through a raw JSON-RPC
client (typed clients refuse to send it), plus the TCP transport. Every request must get exactly
one response and the server must go on serving."""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import pytest

from completer.text import split_lines
from lsp.documents import LONG_LINE_CHARS
from lsp.rawclient import RawClient
from lsp_support import REPO, SAMPLE_TEXT, SERVER_CMD, candidate_positions, gone_within, process_alive, server_env

URI = "file:///work/sample.py"


@pytest.fixture
def raw():
    client = RawClient(SERVER_CMD, env=server_env())
    yield client
    client.close()


def _ready(client: RawClient) -> None:
    deadline = time.monotonic() + 30
    while not client.request("completer/info")["result"]["server"]["worker_pid"] or \
            not client.request("completer/info")["result"].get("model"):
        assert time.monotonic() < deadline, "worker never became ready"
        time.sleep(0.05)


def _logged_once(client: RawClient, name: str) -> dict:
    """The one window/logMessage that names `name`, however many requests led to it."""
    def about(message: dict) -> bool:
        return message.get("method") == "window/logMessage" and name in message["params"]["message"]

    logged = client.wait_for(about)
    assert sum(map(about, list(client.notifications))) == 1
    return logged


def _still_serving(client: RawClient) -> None:
    response = client.request("completer/info", timeout=10)
    assert "result" in response, response
    _ready(client)  # and its worker has (or, right after initialize, soon has) the model


def test_requests_before_initialize_are_rejected_then_served(raw: RawClient):
    response = raw.request("textDocument/completion", {
        "textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}})
    assert response["error"]["code"] == -32002  # ServerNotInitialized
    raw.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"beams": 2}}})  # dropped, as LSP says
    assert "result" in raw.initialize()
    _ready(raw)
    assert raw.request("completer/info")["result"]["settings"]["beams"] != 2


def test_malformed_json_gets_a_parse_error_and_the_server_carries_on(raw: RawClient):
    raw.initialize()
    _ready(raw)
    for body in (b"{not json", b'{"jsonrpc": "2.0", "id": 7, "method": ', b"\xff\xfe\x00garbage", b"[" * 100_000):
        raw.send_raw(body)
    deadline = time.monotonic() + 10
    while len(raw.null_id_errors) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [e["error"]["code"] for e in raw.null_id_errors] == [-32700] * 4
    assert all(e["id"] is None for e in raw.null_id_errors)
    _still_serving(raw)


def test_non_objects_and_wrong_versions_are_invalid_requests(raw: RawClient):
    raw.initialize()
    raw.send_raw(b"[1, 2, 3]")
    raw.send_raw(b"42")
    raw.request_nowait("completer/info", None, msg_id="ok")
    raw.send({"jsonrpc": "1.0", "id": "v1", "method": "completer/info"})
    assert raw.wait("v1")["error"]["code"] == -32600
    assert "result" in raw.wait("ok")  # the valid request in between was answered too
    deadline = time.monotonic() + 5
    while len(raw.null_id_errors) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [e["error"]["code"] for e in raw.null_id_errors] == [-32600, -32600]
    _still_serving(raw)


@pytest.mark.parametrize("params", [
    {"textDocument": 5},
    {"textDocument": {"uri": URI}, "position": {"line": "three", "character": 0}},
    {"textDocument": {"uri": URI}, "position": {"line": -1, "character": 0}},
    {"textDocument": {"uri": URI}},
    [1, 2],
    "nonsense",
    None,
])
def test_params_of_the_wrong_type_get_invalid_params(raw: RawClient, params):
    raw.initialize()
    for method in ("textDocument/completion", "textDocument/inlineCompletion"):
        response = raw.request(method, params, timeout=10)
        assert response["error"]["code"] == -32602, response
    _still_serving(raw)


def test_a_second_initialize_is_refused_and_the_first_ones_position_encoding_stays(raw: RawClient):
    """LSP allows one initialize. A second was answered with the capabilities its own offer would get, utf-8 here,
    while the server went on counting columns in the first's utf-32: a client that took the second answer at its
    word had its edits and requests read at other columns, and the items' ranges ended elsewhere than it counted."""
    first = raw.initialize(capabilities={"general": {"positionEncodings": ["utf-32"]}})
    assert first["result"]["capabilities"]["positionEncoding"] == "utf-32"
    _ready(raw)
    second = raw.request("initialize", {"processId": None, "rootUri": None,
                                        "capabilities": {"general": {"positionEncodings": ["utf-8"]}}})
    assert second.get("error", {}).get("code") == -32600, second
    assert "already initialized" in second["error"]["message"]
    assert raw.request("completer/info")["result"]["server"]["position_encoding"] == "utf-32"
    line = '    label = "naïve café 😀 " + os.path.jo'
    raw.open(URI, f"import os\n\n\ndef greet(name):\n{line}")
    items = raw.completion(URI, 4, len(line))["result"]["items"]
    assert items and all(item["textEdit"]["range"]["end"] == {"line": 4, "character": len(line)} for item in items)
    _logged_once(raw, "already initialized")


def _utf16(text: str) -> bytes:
    """`text` as a UTF-16 client holds it: a surrogate pair and the astral character it encodes are the same."""
    return text.encode("utf-16-le", "surrogatepass")


def test_edits_between_the_halves_of_an_astral_character_leave_the_clients_text(raw: RawClient):
    """A UTF-16 client's text (a JavaScript string) can hold half an astral character: an emoji put in as its two
    surrogates one edit at a time, or text put between the two. The server put the second half before the first (it
    read the column just after a lone high surrogate as inside a pair) and the text between them before both, and
    the items gave the client back a line with an emoji's halves swapped or moved."""
    raw.initialize()
    _ready(raw)
    raw.open(URI, 'import os\n\n\ndef f(path):\n    s = "\U0001F600"; return os.path.jo')
    for version, (column, half) in enumerate([(4, "\\ud83d"), (5, "\\ude00"), (12, "x")], 2):
        raw.send_raw(b'{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": "%s", '
                     b'"version": %d}, "contentChanges": [{"range": {"start": {"line": 4, "character": %d}, "end": '
                     b'{"line": 4, "character": %d}}, "text": "%s"}]}}'
                     % (URI.encode(), version, column, column, half.encode()))
    line = '    \ud83d\ude00s = "\ud83dx\ude00"; return os.path.jo'  # the client's, in code units
    end = len(_utf16(line)) // 2
    items = raw.completion(URI, 4, end)["result"]["items"]
    assert items
    for item in items:
        assert item["textEdit"]["range"] == {"start": {"line": 4, "character": 0}, "end": {"line": 4, "character": end}}
        assert _utf16(item["textEdit"]["newText"]).startswith(_utf16(line)), item["textEdit"]["newText"]


def test_edits_in_a_long_line_leave_the_clients_text(raw: RawClient):
    """A line longer than LONG_LINE_CHARS (a minified file's) has its positions converted from the last edit's, and
    an edit within it put in without splitting it anew. Edited near its start and its end (text put between an
    emoji's halves and taken out, a word replaced, typing and backspaces), then cut short by a range the client
    counts in UTF-16 units, it is the client's line: the items begin with it and end where it ends."""
    raw.initialize()
    _ready(raw)
    head, pad, tail = '    label = "naïve café 😀 ', "😀é" * LONG_LINE_CHARS, '" + os.path.jo'
    raw.open(URI, f"import os\n\n\ndef greet(name):\n{head}{pad}{tail}\n")
    client = [head, pad, tail]  # the client's line, in three parts

    def edit(part: int, start: int, end: int, text: str) -> None:  # in UTF-16 units of `client[part]`
        before = len(_utf16("".join(client[:part]))) // 2
        units = _utf16(client[part])
        raw.change(URI, edit.version, (4, before + start), (4, before + end), text)
        client[part] = (units[:2 * start] + _utf16(text) + units[2 * end:]).decode("utf-16-le", "surrogatepass")
        edit.version += 1
    edit.version = 2
    emoji = len(_utf16(head[:head.index("😀")])) // 2
    edit(0, emoji + 1, emoji + 1, "x")  # between the halves
    edit(0, emoji + 1, emoji + 2, "")  # side by side again
    edit(0, 13, 19, "naive 😀 ")  # "naïve " -> "naive 😀 "
    for column, ch in enumerate("x😀y", 9):  # typed after "label", then taken back by backspaces
        edit(0, column + (ch == "y"), column + (ch == "y"), ch)
    for column in (12, 10, 9):
        edit(0, column, column + (1 if column != 10 else 2), "")
    edit(2, len(_utf16(tail)) // 2, len(_utf16(tail)) // 2, "i")  # typed at the line's end
    edit(2, len(_utf16(tail)) // 2, len(_utf16(tail)) // 2 + 1, "")
    edit(1, 0, len(_utf16(client[1])) // 2, "")  # the long part cut out
    assert client == ['    label = "naive 😀 café 😀 ', "", tail]
    short = "".join(client)
    end = len(_utf16(short)) // 2
    items = raw.completion(URI, 4, end)["result"]["items"]
    assert items
    for item in items:
        assert item["textEdit"]["range"] == {"start": {"line": 4, "character": 0}, "end": {"line": 4, "character": end}}
        assert item["textEdit"]["newText"].startswith(short), item["textEdit"]["newText"]


def test_unknown_methods_and_bad_notifications(raw: RawClient):
    raw.initialize()
    assert raw.request("completer/noSuchThing", {})["error"]["code"] == -32601
    assert raw.request("$/noSuchThing", {})["error"]["code"] == -32601
    raw.notify("completer/unknownNotification", {"x": 1})
    raw.notify("textDocument/didChange", {"textDocument": 3})  # bad params: no reply, no harm
    raw.notify("textDocument/didChange", {"textDocument": {"uri": "file:///never.py", "version": 2},
                                          "contentChanges": [{"text": "x"}]})  # unopened document
    raw.notify("workspace/didChangeConfiguration", {"settings": None})
    raw.notify("workspace/didChangeConfiguration", {"settings": [1, 2]})
    raw.notify("$/cancelRequest", {"id": 12345})
    _still_serving(raw)


def _info_request(msg_id: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "completer/info"}).encode()


def test_headers_in_another_case_spacing_or_line_end_are_read(raw: RawClient):
    raw.initialize()
    headers = (b"content-length: %d\r\n\r\n", b"Content-Length:%d\r\n\r\n", b"Content-Length: %d\n\n",
               b"Content-Length:  %d \r\n\r\n",
               b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH: %d\r\n\r\n")
    for n, header in enumerate(headers):
        body = _info_request(f"lenient-{n}")
        raw.send_bytes(header % len(body) + body)
        assert "result" in raw.wait(f"lenient-{n}", timeout=10), header
    assert not raw.null_id_errors
    _still_serving(raw)


def test_a_frame_that_cannot_be_read_costs_that_frame_and_at_most_the_next(raw: RawClient):
    """pygls' own reader answered nothing ever again after any of these (and died of a MemoryError on the
    huge length); each now gets one parse error, and reading resumes at the next header."""
    raw.initialize()
    unreadable = (b"Content-Length: abc\r\n\r\n{}", b"Content-Length: -5\r\n\r\n{}",
                  b"Content-Length: 1000000000000000\r\n\r\n{}", b"X-Other: 1\r\n\r\n{}",
                  b"no header at all {\"jsonrpc\": \"2.0\"}\r\n\r\n")
    for n, frame in enumerate(unreadable):
        body = _info_request(f"after-{n}")
        raw.send_bytes(frame + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert "result" in raw.wait(f"after-{n}", timeout=10), frame
    errors_so_far = len(raw.null_id_errors)
    assert errors_so_far == 4  # the junk without any header is skipped with a log line, not answered
    for n, wrong_by in enumerate((-3, 3)):  # a length off by a few bytes either way
        body = _info_request(f"wrong-{n}")
        raw.send_bytes(b"Content-Length: %d\r\n\r\n" % (len(body) + wrong_by) + body)
        raw.send_raw(_info_request(f"next-{n}"))  # lost when the bad frame's body took its header
        raw.send_raw(_info_request(f"then-{n}"))
        assert "result" in raw.wait(f"then-{n}", timeout=10)
    assert "result" in raw.wait("next-0", timeout=1)  # a short length leaves the next header whole
    assert [e["error"]["code"] for e in raw.null_id_errors] == [-32700] * (errors_so_far + 3)
    _still_serving(raw)


def test_wrongly_typed_methods_and_ids_and_notifications_sent_as_requests_are_invalid_requests(raw: RawClient):
    raw.initialize()
    for message in ({"jsonrpc": "2.0", "id": 8, "method": 123}, {"jsonrpc": "2.0", "id": {"a": 1}, "method": "x"},
                    {"jsonrpc": "2.0", "id": 1.5, "method": "completer/info"},
                    {"jsonrpc": "2.0", "id": True, "method": "completer/info"}):
        raw.send(message)
    response = raw.request("textDocument/didOpen", {"textDocument": {
        "uri": URI, "languageId": "python", "version": 1, "text": SAMPLE_TEXT}})
    assert response["error"]["code"] == -32600 and "notification" in response["error"]["message"]
    assert raw.wait(8)["error"]["code"] == -32600  # its id is readable: the error goes to it
    assert [(e["error"]["code"], "data" in e["error"]) for e in raw.null_id_errors] == [(-32600, False)] * 3
    assert not raw.responses  # none of the other three got an answer under its own id
    _still_serving(raw)


def test_strings_and_integers_of_another_type_are_refused_not_converted(raw: RawClient):
    """cattrs would have made `"text": null` the text "None", and a column of 2.5 column 2."""
    raw.initialize()
    _ready(raw)
    raw.open(URI, "import os\nos.pa")
    for text in (None, 12345, ["a"]):  # each would have reopened the document as one line: "None", ...
        raw.notify("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 2,
                                                             "text": text}})
    items = raw.completion(URI, 1, 5)["result"]["items"]
    assert items and all(item["textEdit"]["newText"].startswith("os.pa") for item in items), items
    response = raw.request("textDocument/completion", {"textDocument": {"uri": URI},
                                                       "position": {"line": 1, "character": 2.5}})
    assert response["error"]["code"] == -32602
    _still_serving(raw)


def test_a_change_that_cannot_be_read_stops_completions_there_until_the_whole_text_comes(raw: RawClient):
    """The server's copy would differ from the editor's in a way it cannot know: it says so once and answers
    empty, instead of completing from the wrong text, until a full change brings the text back."""
    raw.initialize()
    _ready(raw)
    raw.open(URI, "import os\nos.pa")
    assert raw.completion(URI, 1, 5)["result"]["items"]
    raw.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 1, "character": 5}, "end": {"line": 1, "character": 5}}, "text": "th"},
        {"range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x"}]})
    for _ in range(2):
        assert raw.completion(URI, 1, 5)["result"]["items"] == []
    assert "whole text" in _logged_once(raw, "could not be read")["params"]["message"]  # once, for both requests
    raw.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 3},
                                          "contentChanges": [{"text": "import os\nos.path.jo"}]})
    items = raw.completion(URI, 1, 10)["result"]["items"]
    assert items and all(item["textEdit"]["newText"].startswith("os.path.jo") for item in items), items


def test_a_cancel_for_a_request_already_answered_is_not_a_warning(tmp_path):
    """Routine while typing: the editor cancels what the server has just answered. pygls warned for each."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.initialize()
            answered = client.request_nowait("completer/info")
            client.wait(answered)
            client.notify("$/cancelRequest", {"id": answered})
            assert "result" in client.request("completer/info")
        finally:
            client.close()
    assert "WARNING" not in (tmp_path / "stderr").read_text(), (tmp_path / "stderr").read_text()


def _logged_lines(path: Path, *names: str) -> list[str]:
    """The server's stderr lines that name all of `names`; and no traceback or error anywhere in it."""
    text = path.read_text()
    assert "Traceback" not in text and " ERROR " not in text, text
    return [line for line in text.splitlines() if all(name in line for name in names)]


def test_a_cancel_whose_id_is_no_request_id_is_one_log_line(tmp_path):
    """An object or a list as the id reached pygls' table of requests: TypeError, unhashable, with a traceback."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.initialize()
            for bad in ({"id": 1}, [1], True, None):
                client.notify("$/cancelRequest", {"id": bad})
            assert "result" in client.request("completer/info")
        finally:
            client.close()
    assert len(_logged_lines(tmp_path / "stderr", "$/cancelRequest")) == 4


def test_a_response_to_an_id_the_server_never_sent_leaves_the_running_request_alone(tmp_path):
    """pygls filed the client's running requests and the server's own in one table: a response reusing a running
    request's id tried to settle its task (RuntimeError) and took it off the table, so a cancel no longer found it."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(COMPLETER_WORKER_STEP_DELAY_MS="300"), stderr=stderr)
        try:
            client.initialize()
            _ready(client)
            client.open(URI, SAMPLE_TEXT)
            running = client.request_nowait("textDocument/completion", {
                "textDocument": {"uri": URI}, "position": {"line": 12, "character": 4}}, msg_id=1000)
            time.sleep(0.2)
            client.send({"jsonrpc": "2.0", "id": 1000, "result": None})
            client.send({"jsonrpc": "2.0", "id": 1000, "error": {"code": -32603, "message": "no"}})
            client.send({"jsonrpc": "2.0", "id": [1000], "result": None})
            client.notify("$/cancelRequest", {"id": running})
            assert client.wait(running, timeout=5)["error"]["code"] == -32800  # RequestCancelled
            _still_serving(client)
        finally:
            client.close()
    assert not _logged_lines(tmp_path / "stderr", "1000")


def test_an_invalid_request_whose_id_is_readable_is_answered_under_that_id(raw: RawClient):
    raw.initialize()
    raw.send({"jsonrpc": "2.0", "id": 77, "method": 7})
    raw.send({"jsonrpc": None, "id": 78, "method": "completer/info"})
    raw.send({"jsonrpc": None, "id": "79", "method": "textDocument/completion",
              "params": {"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}})
    raw.send({"jsonrpc": None, "method": "completer/unknownNotification"})  # a notification: no answer
    for msg_id in (77, 78, "79"):
        assert raw.wait(msg_id, timeout=10)["error"]["code"] == -32600, msg_id
    _still_serving(raw)
    assert not raw.null_id_errors


def test_an_unknown_command_is_invalid_params_and_one_log_line(tmp_path):
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.initialize()
            for _ in range(2):
                response = client.request("workspace/executeCommand", {"command": "completer.nope", "arguments": []})
                assert response["error"]["code"] == -32602 and "completer.nope" in response["error"]["message"]
            assert "result" in client.request("completer/info")
        finally:
            client.close()
    assert len(_logged_lines(tmp_path / "stderr", "completer.nope")) == 2


@pytest.mark.parametrize("language_id", ["", "py", "my-own-python"])
def test_an_empty_or_unknown_language_id_falls_back_to_the_files_extension(raw: RawClient, language_id: str):
    """Neovim with filetype detection off sends ""; other editors send their own names for a language."""
    raw.initialize()
    _ready(raw)
    raw.open("file:///work/x.py", "import os\nos.pa", language_id=language_id)
    items = raw.completion("file:///work/x.py", 1, 5)["result"]["items"]
    assert items and all(item["textEdit"]["newText"].startswith("os.pa") for item in items), items
    raw.open("file:///work/notes.txt", "import os\nos.pa", language_id=language_id)  # not Python: no suggestions
    assert raw.completion("file:///work/notes.txt", 1, 5)["result"]["items"] == []
    raw.open("file:///work/y.py", "import os\nos.pa", language_id="plaintext")  # an id LSP knows is taken as it is
    assert raw.completion("file:///work/y.py", 1, 5)["result"]["items"] == []


def test_info_asked_right_after_a_model_reload_names_the_new_state(raw: RawClient):
    """A status bar asks completer/info as soon as it sends settings that reload the model: the answer must
    not be the cached one from before (many threads make this reload take over a second)."""
    raw.initialize()
    _ready(raw)
    raw.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"threads": 64}}})
    info = raw.request("completer/info", timeout=30)["result"]
    assert info["threads"] == 64 and info["server"]["settings"]["threads"] == 64
    _still_serving(raw)


def test_huge_document_and_nul_characters(raw: RawClient):
    raw.initialize()
    _ready(raw)
    # ~10 MB of Python with NULs sprinkled in, cursor at the very end
    chunk = "def f_{i}(x):\n    return x * {i}  # \x00 nul\n\n"
    text = "".join(chunk.format(i=i) for i in range(250_000))
    assert len(text) > 10_000_000
    text += "def g(y):\n    "
    big = "file:///work/big.py"
    started = time.monotonic()
    raw.open(big, text)
    last = text.count("\n")
    response = raw.completion(big, last, 4, timeout=30)
    assert isinstance(response["result"]["items"], list)
    assert time.monotonic() - started < 10
    for item in response["result"]["items"]:
        assert item["textEdit"]["newText"].startswith("    ")
    # typing into it stays quick
    started = time.monotonic()
    raw.change(big, 2, (last, 4), (last, 4), "r")
    response = raw.completion(big, last, 5, timeout=30)
    assert "result" in response and time.monotonic() - started < 5
    # minified code: one 9 MB line, cursor at its end and at its start
    line = "x = [" + "1, " * 3_000_000
    raw.open("file:///work/min.py", line)
    started = time.monotonic()
    assert "result" in raw.completion("file:///work/min.py", 0, len(line), timeout=30)
    assert "result" in raw.completion("file:///work/min.py", 0, 5, timeout=30)
    assert time.monotonic() - started < 5
    assert "longer than" in _logged_once(raw, "min.py")["params"]["message"]  # once per document
    # a document that is nothing but NULs, and lone surrogates from a JSON escape
    raw.open("file:///work/nul.py", "\x00" * 5000 + "\n\x00\x00import \x00")
    assert "result" in raw.completion("file:///work/nul.py", 1, 3)
    raw.send_raw(json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": "file:///work/sur.py", "languageId": "python", "version": 1, "text": "x = '\ud800'\n    "}}}).encode())
    assert "result" in raw.completion("file:///work/sur.py", 1, 4)
    _still_serving(raw)


def test_binary_document_gets_no_completions_and_one_log_line(raw: RawClient):
    raw.initialize()
    _ready(raw)
    weights = (REPO / "models" / "python-small" / "model.onnx").read_bytes()
    blob = weights[len(weights) // 2:][:50_000].decode("utf-8", "replace")  # INT8 weights opened as text
    uri = "file:///work/blob.py"
    raw.open(uri, blob)
    last = len(split_lines(blob)) - 1
    for _ in range(3):
        assert raw.completion(uri, last, 0)["result"]["items"] == []

    logged = _logged_once(raw, "blob.py")
    assert "binary" in logged["params"]["message"] and logged["params"]["type"] == 2  # Warning
    raw.open("file:///work/sample.py", SAMPLE_TEXT)  # source code next to it still completes
    assert any(raw.completion("file:///work/sample.py", line, col)["result"]["items"]
               for line, col in candidate_positions())
    _still_serving(raw)


def test_an_edit_while_the_worker_boots_makes_the_waiting_request_stale(raw: RawClient):
    """The request waits for the worker (it is still loading the model); the edit that arrives
    meanwhile must not let the old text be searched and answered."""
    raw.initialize()
    raw.open(URI, SAMPLE_TEXT)
    waiting = raw.request_nowait("textDocument/completion",
                                 {"textDocument": {"uri": URI}, "position": {"line": 3, "character": 4}})
    raw.change(URI, 2, (3, 4), (3, 4), "x")
    response = raw.wait(waiting, timeout=60)
    assert response.get("error", {}).get("code") == -32801, response  # ContentModified
    _ready(raw)
    assert "result" in raw.completion(URI, 3, 5)


def test_the_same_whole_text_sent_again_leaves_the_waiting_request_to_be_answered(raw: RawClient):
    """ALE sends the buffer whole at every check it runs, the same text when nothing was typed: a search for it is
    not stale. Before, the request that waited for the worker was abandoned (ContentModified) and Vim's menu empty
    (a whole text that differs: test_lsp_units.py)."""
    raw.initialize()
    raw.open(URI, SAMPLE_TEXT)
    waiting = raw.request_nowait("textDocument/completion",
                                 {"textDocument": {"uri": URI}, "position": {"line": 3, "character": 4}})
    raw.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 2},
                                          "contentChanges": [{"text": SAMPLE_TEXT}]})
    assert "result" in raw.wait(waiting, timeout=60)


def test_requests_a_client_never_cancels_are_answered_empty_once_it_asks_at_another_cursor(raw: RawClient):
    """A client that never cancels (a script, a plugin) asks at 40 cursors of one document it does not edit. Each
    request is answered, empty, once a newer one at another cursor comes, and its search stops: only the newest
    cursor is searched, not every one the client left, in turn, before it. Completion items and inline completions
    at that newest cursor (one keystroke's) still share their search, and both get its lines."""
    raw.initialize({"completer": {"searchAhead": False}})
    _ready(raw)
    raw.open(URI, SAMPLE_TEXT)
    cursors = candidate_positions()[:40]
    line, column = cursors[-1]
    left = [raw.request_nowait("textDocument/completion", {"textDocument": {"uri": URI},
                                                           "position": {"line": r, "character": c}})
            for r, c in cursors[:-1]]
    at = {"textDocument": {"uri": URI}, "position": {"line": line, "character": column}}
    newest = raw.request_nowait("textDocument/completion", at)
    inline = raw.request_nowait("textDocument/inlineCompletion", {**at, "context": {"triggerKind": 2}})
    answers = [raw.wait(msg_id, timeout=120) for msg_id in left]
    assert all(answer.get("result") == {"isIncomplete": True, "items": []} for answer in answers), \
        [answer.get("result", answer) for answer in answers if answer.get("result", {}).get("items") != []]
    items = [item["textEdit"]["newText"] for item in raw.wait(newest, timeout=60)["result"]["items"]]
    assert items, "the newest cursor got no lines"
    assert [item["insertText"] for item in raw.wait(inline, timeout=60)["result"]["items"]] == items
    server = raw.request("completer/info")["result"]["server"]
    assert server["superseded"] == len(left) and server["answered"] == 2


SLOW_SNIPPETS_SERVER = [sys.executable, "-c", "import sys, time, lsp.server, lsp.workspace as w; "
                        "pick = w.WorkspaceFiles.snippets; "
                        "w.WorkspaceFiles.snippets = lambda *a, **k: (time.sleep(0.5), pick(*a, **k))[1]; "
                        "sys.exit(lsp.server.main())"]
"""The server, its workspace's snippets picked from a slow disk (half a second)."""
TYPED_OVER = {"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 5}}, "text": "os.ge"}
"""`os.pa` typed over with `os.ge`: the cursor's line and column stay the same, its text does not."""


def _typed_over(uri: str) -> dict:
    return {"jsonrpc": "2.0", "method": "textDocument/didChange",
            "params": {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [TYPED_OVER]}}


def _indexed_beside_lib(command: list[str], folder: Path) -> RawClient:
    """The server `command` runs, on `folder` with a lib.py in it, once it has indexed the folder and loaded the
    model."""
    (folder / "lib.py").write_text("import os\n\n\ndef here():\n    return os.getcwd()\n")
    client = RawClient(command, env=server_env())
    client.request("initialize", {"processId": None, "rootUri": folder.as_uri(), "capabilities": {}})
    client.notify("initialized", {})
    deadline = time.monotonic() + 30
    while (client.request("completer/info")["result"]["server"]["workspace_index"] or {}).get("building", True):
        assert time.monotonic() < deadline, "the workspace was never indexed"
        time.sleep(0.05)
    _ready(client)
    return client


def test_a_first_request_waits_for_its_snippets_a_moment_not_as_long_as_picking_them_takes(tmp_path):
    """A document's first request waited for its snippets however long picking them took: the pick reads and
    indexes up to eight files by line, 1.8 s for files of a megabyte of generated code, before the search began.
    It waits SNIPPETS_WAIT at most, is searched without them, and the keystrokes meanwhile wait no more."""
    slow = [*SLOW_SNIPPETS_SERVER[:2], SLOW_SNIPPETS_SERVER[2].replace("time.sleep(0.5)", "time.sleep(4)")]
    client = _indexed_beside_lib(slow, tmp_path)
    try:
        uri = (tmp_path / "doc.py").as_uri()
        client.open(uri, "import os\nos.pa")
        for _ in range(2):
            started = time.monotonic()
            assert client.completion(uri, 1, 5)["result"]["items"]
            assert time.monotonic() - started < 2.5
    finally:
        client.close()


def _completion_at_os_pa(client: RawClient, uri: str) -> Any:
    """A completion request after `os.pa` on line 1, not waited for."""
    return client.request_nowait("textDocument/completion", {"textDocument": {"uri": uri},
                                                             "position": {"line": 1, "character": 5}})


def test_an_edit_while_the_request_picks_the_workspaces_snippets_makes_it_stale(tmp_path):
    """The first request in a document waits for its snippets to be picked. An edit then: the request was
    searched for the text before the edit and its answer kept as the answer for the text after it, so the next
    request at the same place was shown `os.geth.join(` after `os.ge`."""
    client = _indexed_beside_lib(SLOW_SNIPPETS_SERVER, tmp_path)
    try:
        uri = (tmp_path / "doc.py").as_uri()
        client.open(uri, "import os\nos.pa")
        waiting = _completion_at_os_pa(client, uri)
        time.sleep(0.1)  # the request waits for its snippets
        client.send(_typed_over(uri))
        assert client.wait(waiting).get("error", {}).get("code") == -32801  # ContentModified
        items = client.completion(uri, 1, 5)["result"]["items"]
        assert items and all(item["textEdit"]["newText"].startswith("os.ge") for item in items), items
        assert not any(item["textEdit"]["newText"].startswith("os.geth") for item in items), items
    finally:
        client.close()


SLOW_FOLLOWERS_SERVER = [sys.executable, "-c", "import sys, time, lsp.server, lsp.line_order as o, lsp.workspace as w; "
                         "o.FOLLOWERS_WAIT = 5.0; find = w.WorkspaceFiles.followers; "
                         "w.WorkspaceFiles.followers = lambda *a, **k: (time.sleep(1.5), find(*a, **k))[1]; "
                         "sys.exit(lsp.server.main())"]
"""The server, the lines after copies of the line above found on a slow disk, and waited for as long."""


def test_an_edit_while_the_other_files_lines_are_awaited_makes_the_answer_stale(tmp_path):
    """After the search the answer waits a moment for the line that follows copies of the line above in other
    files, and orders the lines with the document's lines: an edit then was not noticed."""
    client = _indexed_beside_lib(SLOW_FOLLOWERS_SERVER, tmp_path)
    try:
        uri = (tmp_path / "doc.py").as_uri()
        client.open(uri, "import os\nos.pa")
        time.sleep(0.5)  # its prefill
        waiting = _completion_at_os_pa(client, uri)
        time.sleep(0.8)  # searched; the lines from the other files are still being found
        client.send(_typed_over(uri))
        assert client.wait(waiting).get("error", {}).get("code") == -32801  # ContentModified
    finally:
        client.close()


@contextlib.contextmanager
def _tcp_server() -> Iterator[tuple[subprocess.Popen, socket.socket]]:
    """A server on loopback TCP (`--tcp`) and a connection to it, reads timing out after 30 s; the server is killed
    after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(SERVER_CMD + ["--tcp", "--port", str(port)], env=server_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "TCP server did not come up"
                time.sleep(0.1)
        sock.settimeout(30)
        with sock:
            yield proc, sock
    finally:
        proc.kill()
        proc.wait()


def _next_message(replies: BinaryIO) -> dict:
    """The next message the server wrote, read from a TCP connection's file."""
    length = None
    while (line := replies.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    assert length is not None, "the server closed the connection"
    return json.loads(replies.read(length))


def test_an_edit_read_with_the_request_before_it_ran_makes_it_stale():
    """Over TCP the messages that came together are read at once, before the request's handler runs: it was
    searched at its position in the text after the edit, which it was never sent for."""
    with _tcp_server() as (proc, sock), sock.makefile("rb") as replies:
        def answer(msg_id: int) -> dict:
            while True:
                message = _next_message(replies)
                if message.get("id") == msg_id and "method" not in message:
                    return message

        sock.sendall(_frames({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"processId": None, "rootUri": None, "capabilities": {}}},
                             {"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        answer(1)
        deadline = time.monotonic() + 30
        for msg_id in itertools.count(2):
            sock.sendall(_frames({"jsonrpc": "2.0", "id": msg_id, "method": "completer/info"}))
            info = answer(msg_id)["result"]
            if info.get("model") and info["server"]["worker_pid"]:
                break
            assert time.monotonic() < deadline, "worker never became ready"
            time.sleep(0.05)
        uri = "file:///work/tcp.py"
        request = {"jsonrpc": "2.0", "id": 100, "method": "textDocument/completion",
                   "params": {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 5}}}
        sock.sendall(_frames({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": "import os\nos.pa"}}}, request,
            _typed_over(uri)))
        assert answer(100).get("error", {}).get("code") == -32801, "answered for `os.ge`"  # ContentModified
        sock.sendall(_frames({**request, "id": 101}))
        items = answer(101)["result"]["items"]
        assert items and all(item["textEdit"]["newText"].startswith("os.ge") for item in items), items


def test_notifications_leave_nothing_behind(raw: RawClient):
    """A long session of keystrokes must not grow the server's table of futures."""
    raw.initialize()
    _ready(raw)
    raw.open(URI, SAMPLE_TEXT)
    for version in range(2, 302):
        raw.change(URI, version, (0, 0), (0, 0), "#" if version % 2 else "")
    raw.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"beams": 3}}})
    raw.notify("textDocument/didClose", {"textDocument": {"uri": URI}})
    server = raw.request("completer/info")["result"]["server"]
    assert server["open_documents"] == 0
    assert server["requests_in_flight"] <= 1, server  # at most the info request itself


def test_requests_after_shutdown_are_refused_and_exit_code_is_zero(raw: RawClient):
    raw.initialize()
    raw.open(URI, SAMPLE_TEXT)
    assert raw.request("shutdown")["result"] is None
    assert raw.completion(URI, 3, 0)["error"]["code"] == -32600
    raw.notify("exit")
    assert raw.proc.wait(10) == 0


class _SilentClient(RawClient):
    """A client that never answers what the server asks of it (client/registerCapability, workspace/configuration)."""

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        self.server_requests.append(message)


def test_shutdown_while_the_client_has_not_answered_a_registration_is_answered(tmp_path):
    """The `initialized` handler waits for the client to take the file watchers' registration. A `shutdown` read
    meanwhile (a client that never answers, or a script that shuts down at once) cancelled that handler inside
    pygls' loop over the table it was being taken off: answered with an internal error and a traceback."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = _SilentClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.request("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {
                "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}})
            client.notify("initialized", {})
            deadline = time.monotonic() + 10
            while not client.server_requests:
                assert time.monotonic() < deadline, "the server never asked to register its file watchers"
                time.sleep(0.02)
            assert client.request("shutdown", timeout=10) == {"jsonrpc": "2.0", "id": 2, "result": None}
            client.notify("exit")
            assert client.proc.wait(10) == 0
        finally:
            client.close()
    _logged_lines(tmp_path / "stderr")


def test_exit_without_shutdown_exits_nonzero_and_takes_the_worker_along(raw: RawClient):
    raw.initialize()
    _ready(raw)
    worker = raw.request("completer/info")["result"]["server"]["worker_pid"]
    raw.notify("exit")
    assert raw.proc.wait(10) == 1
    deadline = time.monotonic() + 5
    while process_alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(worker)


def test_an_interrupt_ends_the_server_while_the_client_keeps_its_input_open(tmp_path):
    """SIGINT (Ctrl-C where the server shares the terminal's process group, or a client that stops it so) stopped the
    worker, then left the server waiting forever for the thread that reads its input, which only the client's
    closing its end would have ended."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.initialize()
            _ready(client)
            worker = client.request("completer/info")["result"]["server"]["worker_pid"]
            client.proc.send_signal(signal.SIGINT)
            assert client.proc.wait(10) == 1
            assert gone_within(worker, 5)
        finally:
            client.close()
    _logged_lines(tmp_path / "stderr")


def test_a_client_gone_without_exit_stops_the_worker_and_starts_no_other():
    """Its input ends (the editor crashed): exit code 1, the worker stopped, and no worker started after it
    (the loop's teardown used to wait 5 s on the worker, kill it, and restart it just before quitting)."""
    log_dir = tempfile.mkdtemp()
    client = RawClient(SERVER_CMD, env=server_env(COMPLETER_LOG_DIR=log_dir))
    try:
        client.initialize()
        _ready(client)
        worker = client.request("completer/info")["result"]["server"]["worker_pid"]
        assert client.proc.stdin is not None
        client.proc.stdin.close()
        assert client.proc.wait(10) == 1
        assert not process_alive(worker)
        logged = "".join(p.read_text() for p in Path(log_dir).glob("*.log"))
        assert "exited" in logged and "restarting" not in logged and "died" not in logged
    finally:
        if client.proc.poll() is None:
            client.proc.kill()


def test_tcp_transport_binds_loopback_only_and_serves_one_client():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(SERVER_CMD + ["--tcp", "--port", str(port), "--log-level", "DEBUG"],
                            env=server_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def listening() -> list[str]:
        rows = open("/proc/net/tcp").read().splitlines()[1:] + open("/proc/net/tcp6").read().splitlines()[1:]
        return [row.split()[1] for row in rows if row.split()[1].endswith(f":{port:04X}") and row.split()[3] == "0A"]

    try:
        deadline = time.monotonic() + 20
        while not listening():
            assert time.monotonic() < deadline and proc.poll() is None, "TCP server did not come up"
            time.sleep(0.1)
        assert all(address.startswith("0100007F:") for address in listening()), listening()
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        with sock:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"processId": None, "rootUri": None, "capabilities": {}}}).encode()
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            reply = _read_message(sock)
            assert reply["id"] == 1 and "completionProvider" in reply["result"]["capabilities"]
            # the first client has the server: nobody else may connect and take over its replies
            assert not listening()
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
            body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "completer/info"}).encode()
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            assert _read_message(sock)["id"] == 2
        assert proc.wait(20) == 1  # the client went away without shutdown/exit
    finally:
        proc.kill()
        proc.wait()


def _initialize_as(uid: int, port: int) -> bytes:
    """Connect to `port` as the account `uid` (a forked child that drops to it) and send initialize: what came
    back before the server closed the connection or 10 s passed."""
    import encodings.idna  # noqa: F401 (a host name is encoded with it: imported where the child cannot read it)

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child, which never returns into pytest)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": {"processId": None, "rootUri": None, "capabilities": {}}}).encode()
                sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                got = b""
                while b"capabilities" not in got and (chunk := sock.recv(65536)):
                    got += chunk
            os.write(write_end, got[:60000])
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(child, 0)
    with os.fdopen(read_end, "rb") as answer:
        return answer.read()


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp") or os.geteuid() != 0,
                    reason="Linux's table of sockets, and root to connect as another account")
def test_tcp_turns_away_another_users_client_and_serves_its_own():
    """Any account on the machine can connect to 127.0.0.1: the first one to had a server running as this user, to
    have it index this user's folders and send them, and the value of an environment variable it named in
    apiKeyEnv, to an endpoint of its own. Another account's client is turned away; the user's own is served."""
    proc = subprocess.Popen(SERVER_CMD + ["--tcp", "--port", "0"], env=server_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline().decode()
        port = int(re.fullmatch(r"completer serve: listening on 127\.0\.0\.1:(\d+) for one client\n", said)[1])
        assert _initialize_as(65534, port) == b""  # nobody's
        assert b"completionProvider" in _initialize_as(os.getuid(), port)
        assert proc.wait(20) == 1  # the user's client went away without shutdown/exit
    finally:
        proc.kill()
        proc.wait()
    assert "refused a TCP client of another user (uid 65534)" in proc.stderr.read().decode()


def test_the_owner_of_a_loopback_connection_is_read_from_the_kernels_table(tmp_path: Path):
    from lsp.transport import PROC_NET_TCP, peer_uid

    if not os.path.exists(PROC_NET_TCP):
        assert peer_uid(("127.0.0.1", 1), ("127.0.0.1", 2)) is None  # no table: served as before
        return
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            accepted, peer = listener.accept()
            with accepted:
                assert peer_uid(peer, accepted.getsockname()) == os.getuid()
                assert peer_uid(accepted.getsockname(), peer) == os.getuid()  # the server's own end
                assert peer_uid(("127.0.0.1", client.getsockname()[1] ^ 1), accepted.getsockname()) == -1
    assert peer_uid(("127.0.0.1", 1), ("127.0.0.1", 2), table=str(tmp_path / "none")) is None


def test_tcp_on_any_free_port_says_which_ends_cleanly_and_a_taken_port_is_one_line():
    proc = subprocess.Popen(SERVER_CMD + ["--tcp", "--port", "0"], env=server_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline().decode()
        port = int(re.fullmatch(r"completer serve: listening on 127\.0\.0\.1:(\d+) for one client\n", said)[1])
        taken = subprocess.run(SERVER_CMD + ["--tcp", "--port", str(port)], env=server_env(), capture_output=True,
                               text=True, timeout=30)
        assert taken.returncode == 1 and "Traceback" not in taken.stderr
        assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            for msg_id, method, params in ((1, "initialize", {"processId": None, "rootUri": None, "capabilities": {}}),
                                           (2, "shutdown", None)):
                body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()
                sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                assert _read_message(sock)["id"] == msg_id
            body = json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode()
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            assert proc.wait(20) == 0
        rest = proc.stderr.read().decode()
        assert "Traceback" not in rest and "Unhandled exception" not in rest, rest
    finally:
        proc.kill()
        proc.wait()


def _read_message(sock: socket.socket) -> dict:
    data = b""
    sock.settimeout(20)
    while True:
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        header, _, rest = data.partition(b"\r\n\r\n")
        length = int([h for h in header.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
        while len(rest) < length:
            rest += sock.recv(65536)
        message = json.loads(rest[:length])
        data = rest[length:]
        if "id" in message and "method" not in message:
            return message


def test_server_help_and_bad_arguments():
    out = subprocess.run(SERVER_CMD + ["--help"], capture_output=True, text=True, env=server_env(), timeout=30)
    assert out.returncode == 0 and "--tcp" in out.stdout and "--log-level" in out.stdout
    bad = subprocess.run(SERVER_CMD + ["--log-level", "LOUD"], capture_output=True, text=True, env=server_env(),
                         timeout=30)
    assert bad.returncode == 2



def test_an_opened_document_is_prefilled_while_the_worker_is_idle(raw: RawClient):
    """didOpen lets the worker run the file's context before any keystroke: the first completion at the end of
    a long file runs only its last tokens."""
    import argparse

    raw.initialize({"completer": {"searchAhead": False}})
    _ready(raw)
    text = Path(argparse.__file__).read_text()[:6000]
    text = text[:text.rfind("\n") + 1] + "    parser = argparse.Arg"
    lines = text.split("\n")
    raw.open("file:///work/opened.py", text)
    deadline = time.monotonic() + 30
    cached = [-1]
    while time.monotonic() < deadline:  # the prefill grows the document's cache, chunk by chunk, until it is done
        time.sleep(0.5)  # (each poll is a job that pauses the prefill; the worker resumes it once idle again)
        cached.append(raw.request("completer/info")["result"].get("cache_bytes") or 0)
        if cached[-1] and cached[-1] == cached[-2]:
            break
    raw.completion("file:///work/opened.py", len(lines) - 1, len(lines[-1]))
    server = raw.request("completer/info")["result"]["server"]
    assert server["last_context_tokens"] > 500 and server["last_new_tokens"] <= 2, server


def _prefilled(client: RawClient, timeout: float = 30) -> int:
    """The engine's cache bytes once they stop growing (a background prefill grows them chunk by chunk)."""
    deadline = time.monotonic() + timeout
    cached = [-1]
    while time.monotonic() < deadline:
        time.sleep(0.5)  # (each poll is a job that pauses the prefill; the worker resumes it once idle again)
        cached.append(client.request("completer/info")["result"].get("cache_bytes") or 0)
        if cached[-1] == cached[-2]:
            break
    return cached[-1]


def test_documents_opened_while_both_answers_were_off_are_prefilled_once_one_is_turned_on(raw: RawClient):
    """With completion items and inline completions off (VS Code's toggle) an opened file is not prefilled:
    nothing would use it. Turned on again, every open document is prefilled as if just opened, so the first
    keystroke in a long file runs only its last tokens, not the whole file."""
    import argparse

    raw.initialize({"completer": {"searchAhead": False, "completionItems": False, "inlineCompletions": False}})
    _ready(raw)
    text = Path(argparse.__file__).read_text()[:6000]
    text = text[:text.rfind("\n") + 1] + "    parser = argparse.Arg"
    lines = text.split("\n")
    raw.open("file:///work/opened.py", text)
    assert _prefilled(raw, timeout=2) == 0
    raw.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"completionItems": True}}})
    assert _prefilled(raw) > 0, "nothing was prefilled once completion items were turned on"
    raw.completion("file:///work/opened.py", len(lines) - 1, len(lines[-1]))
    server = raw.request("completer/info")["result"]["server"]
    assert server["last_context_tokens"] > 500 and server["last_new_tokens"] <= 2, server


def test_a_line_just_accepted_gets_no_suggestion_to_extend_it(raw: RawClient):
    """After the client applies a suggestion, a request at the end of that line answers nothing (no `.close()`
    after `main(sys.stdout)`); typing on asks the model again."""
    raw.initialize({"completer": {"searchAhead": False}})
    _ready(raw)
    uri = "file:///work/accepted.py"
    text = "import sys\n\n\ndef main(out):\n    out.write(\"hello\")\n    out.fl"
    raw.open(uri, text)
    items = raw.completion(uri, 5, len("    out.fl"))["result"]["items"]
    assert items, "no suggestion to accept"
    line = items[0]["textEdit"]["newText"]
    raw.change(uri, 2, (5, 0), (5, len("    out.fl")), line)  # what accepting the item does
    assert raw.completion(uri, 5, len(line))["result"]["items"] == []
    assert raw.request("completer/info")["result"]["server"]["last_model_runs"] == 0  # answered without a search
    raw.change(uri, 3, (5, len(line)), (5, len(line)), "\n")
    assert "result" in raw.completion(uri, 6, 0)


@pytest.mark.parametrize(("client", "filter_text"), [
    ({"name": "Neovim", "version": "0.9.5"}, False),  # its omnifunc reads the textEdit only without filterText
    ({"name": "Neovim", "version": "0.7.2"}, False),
    ({"name": "Neovim", "version": "0.10.0"}, True),
    ({"name": "Visual Studio Code", "version": "1.96.0"}, True),
])
def test_items_carry_filter_text_for_every_client_but_neovim_before_0_10(raw: RawClient, client: dict,
                                                                         filter_text: bool):
    """filterText is the whole line, indentation included, as the textEdit's range starts at the line's start;
    Neovim 0.7 to 0.9's omnifunc then completes the word before the cursor instead, so it gets none (the label,
    the line without its indentation, filters there); tests/test_lsp_neovim.py accepts its items."""
    response = raw.request("initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                          "clientInfo": client})
    assert "result" in response, response
    raw.notify("initialized", {})
    _ready(raw)
    raw.open("file:///work/home.py", "import os\n\n\ndef home():\n    return os.pa")
    items = raw.completion("file:///work/home.py", 4, len("    return os.pa"))["result"]["items"]
    assert items and all(item["textEdit"]["newText"].startswith("    return os.pa") for item in items), items
    if filter_text:
        assert all(item["filterText"] == item["textEdit"]["newText"] for item in items), items
    else:
        assert all("filterText" not in item for item in items), items


DYNAMIC_COMPLETION = {"textDocument": {"completion": {"dynamicRegistration": True}}}


def _server_request(client: RawClient, method: str, timeout: float = 10.0) -> dict:
    """The first request the server sent of `method`, waiting for it if need be (RawClient answers them)."""
    deadline = time.monotonic() + timeout
    while not (found := [r for r in client.server_requests if r["method"] == method]):
        assert time.monotonic() < deadline, f"the server sent no {method}"
        time.sleep(0.05)
    return found[0]


def test_completion_items_off_leave_out_the_provider_and_are_registered_when_turned_on(raw: RawClient):
    """VS Code's extension starts with completionItems off: a completion provider whose triggers are every
    printable character would open the suggest widget at each keystroke, and Tab would take its item instead of
    the ghost text. The provider is registered when the setting turns items on, and unregistered again."""
    result = raw.initialize({"completer": {"completionItems": False}}, capabilities=DYNAMIC_COMPLETION)["result"]
    assert "completionProvider" not in result["capabilities"] or result["capabilities"]["completionProvider"] is None
    assert "inlineCompletionProvider" in result["capabilities"]
    _ready(raw)
    raw.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"completionItems": True}}})
    registered = _server_request(raw, "client/registerCapability")
    assert registered["params"]["registrations"][0]["method"] == "textDocument/completion"
    options = registered["params"]["registrations"][0]["registerOptions"]
    assert "." in options["triggerCharacters"] and options["documentSelector"] is None
    raw.open(URI, SAMPLE_TEXT)
    line, column = candidate_positions()[0]
    assert raw.completion(URI, line, column, timeout=60)["result"]["items"] is not None
    raw.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"completionItems": False}}})
    gone = _server_request(raw, "client/unregisterCapability")
    assert gone["params"]["unregisterations"][0]["id"] == registered["params"]["registrations"][0]["id"]


def test_completion_items_keep_their_static_provider_where_the_client_cannot_register(raw: RawClient):
    """A client without dynamic registration gets the provider at initialize whatever the setting says: it
    could not be given it later."""
    result = raw.initialize({"completer": {"completionItems": False}}, capabilities={})["result"]
    assert result["capabilities"]["completionProvider"]["triggerCharacters"]


def _still_completing(client: RawClient, uri: str = "file:///work/after.py") -> None:
    """A normal completion after the bad input: answered, with lines that begin as the cursor's line does."""
    client.open(uri, "import os\nos.pa")
    items = client.completion(uri, 1, 5, timeout=30)["result"]["items"]
    assert items and all(item["textEdit"]["newText"].startswith("os.pa") for item in items), items


def test_a_context_window_too_large_to_send_to_the_worker_is_an_invalid_setting(tmp_path):
    """contextTokens had no upper bound: a number past 64 bits reached the worker as a string (msgpack's fallback
    for it), whose own check failed with a TypeError, logged with a traceback for each change."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.initialize()
            _ready(client)
            for huge in (10**30, 2**64, 1e300):
                client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"contextTokens": huge}}})
            assert client.request("completer/info")["result"]["server"]["settings"]["contextTokens"] == 0
            _still_completing(client)
        finally:
            client.close()
    assert len(_logged_lines(tmp_path / "stderr", "Ignoring invalid setting completer.contextTokens")) == 3


UNREADABLE_URI = "file://[::1/work/x.py"
"""urllib refuses it ("Invalid IPv6 URL")."""
TOO_LONG_FOLDER = "file:///tmp/" + "a" * 5000
"""A name every look at the disk refuses (ENAMETOOLONG), which pathlib's is_dir() raises for."""


@pytest.mark.parametrize("root", [UNREADABLE_URI, TOO_LONG_FOLDER], ids=["unreadable", "too-long"])
def test_a_workspace_root_that_names_no_folder_is_left_out_and_initialize_answers(tmp_path, root: str):
    """pygls' workspace (for an unreadable rootUri) and the index's look at the folder (for a name too long) raised
    in initialize: the client got an internal error with a traceback, and the worker was never started."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            response = client.request("initialize", {"processId": None, "rootUri": root, "capabilities": {},
                                                     "workspaceFolders": [{"uri": root, "name": "x"}]})
            assert "capabilities" in response["result"], response
            client.notify("initialized", {})
            _ready(client)
            _still_completing(client)
        finally:
            client.close()
    _logged_lines(tmp_path / "stderr")


def test_documents_and_folders_whose_uris_name_no_file_are_served_without_errors(tmp_path):
    """A document or an event whose URI urllib cannot read, or whose path is too long for the system or holds a
    lone surrogate: the completion for the document failed with an internal error (the workspace lookups read its
    path), indexing its unsaved text or the folder raised on a thread, and a path with a lone surrogate made the
    log file's handler print a traceback."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.py").write_text("import os\n\n\ndef f():\n    return os.path.join('a', 'b')\n")
    uris = [UNREADABLE_URI, TOO_LONG_FOLDER + ".py", "file:///tmp/\ud800/x.py"]
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.initialize(capabilities={"workspace": {"workspaceFolders": True}})
            _ready(client)
            client.change("file:///work/never-opened-\ud800.py", 2, (0, 0), (0, 0), "x")  # logged, with its URI
            for uri in uris:
                client.notify("workspace/didChangeWorkspaceFolders", {"event": {"added": [{"uri": uri, "name": "x"}],
                                                                                "removed": []}})
            client.notify("workspace/didChangeWorkspaceFolders", {"event": {"removed": [], "added": [
                {"uri": (tmp_path / "ws").as_uri(), "name": "ws"}]}})
            for uri in uris:
                client.open(uri, "import os\nos.pa", language_id="")
                client.change(uri, 2, (1, 5), (1, 5), "t")
                items = client.completion(uri, 1, 6)["result"]["items"]
                assert items and all(item["textEdit"]["newText"].startswith("os.pat") for item in items), items
                client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
                client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": uri, "type": 2}]})
            time.sleep(1.5)  # the unsaved texts are indexed a second after the last edit
            for uri in uris:
                client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            _still_completing(client)
        finally:
            client.close()
    _logged_lines(tmp_path / "stderr")


def test_exit_without_shutdown_logs_no_error(tmp_path):
    """`exit` closed the output, and the lines logged while the server tore down (the worker it killed had exited)
    went on to the client as window/logMessage: pygls logged "write to closed file" with a traceback."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.initialize()
            _ready(client)
            client.notify("exit")
            assert client.proc.wait(10) == 1
        finally:
            client.close()
    _logged_lines(tmp_path / "stderr")


def test_a_client_that_stops_reading_costs_one_log_line(tmp_path):
    """Its end of the server's output closed while it still sends requests: pygls logged a traceback for each
    answer it could not write (tens of lines per request)."""
    with open(tmp_path / "stderr", "wb") as stderr:
        proc = subprocess.Popen(SERVER_CMD, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                env=server_env())
        try:
            assert proc.stdin is not None and proc.stdout is not None
            messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"processId": None, "rootUri": None, "capabilities": {}}}]
            messages += [{"jsonrpc": "2.0", "id": n, "method": "completer/info"} for n in range(2, 12)]
            proc.stdout.close()
            for message in messages:
                proc.stdin.write(_frames(message))
                proc.stdin.flush()
                time.sleep(0.05)
            time.sleep(1)
            proc.stdin.close()
            assert proc.wait(10) == 1
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert len(_logged_lines(tmp_path / "stderr", "gone")) == 1


def test_a_bundle_whose_manifest_the_graph_contradicts_is_refused_and_the_loaded_model_answers(tmp_path):
    """The checksums cover the model's files, not the manifest: one saying 7 layers where the graph has 8 loaded,
    and every completion after it failed in the worker, with a traceback each, until the user changed modelPath."""
    source = REPO / "models" / "python-small"
    bundle = tmp_path / "damaged"
    bundle.mkdir()
    manifest = json.loads((source / "manifest.json").read_text())
    for name in manifest["files"]:
        (bundle / name).write_bytes((source / name).read_bytes())
    manifest["architecture"]["n_layer"] = 7
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.initialize()
            _ready(client)
            client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"modelPath": str(bundle)}}})
            assert client.request("completer/info")["result"]["server"]["settings"]["modelPath"] is None
            _still_completing(client)
        finally:
            client.close()
    assert len(_logged_lines(tmp_path / "stderr", "its architecture says n_layer 7, but model.onnx has 8")) == 1


def test_a_tcp_client_that_resets_its_connection_is_one_log_line(tmp_path):
    """A client that crashed resets the connection: the ConnectionResetError out of the reader reached asyncio,
    which logged it with a traceback as an unhandled exception."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with open(tmp_path / "stderr", "wb") as stderr:
        proc = subprocess.Popen(SERVER_CMD + ["--tcp", "--port", str(port)], env=server_env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                    break
                except OSError:
                    assert time.monotonic() < deadline and proc.poll() is None, "TCP server did not come up"
                    time.sleep(0.1)
            sock.sendall(_frames({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                  "params": {"processId": None, "rootUri": None, "capabilities": {}}}))
            assert _read_message(sock)["id"] == 1
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
            sock.close()
            assert proc.wait(20) == 1
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert len(_logged_lines(tmp_path / "stderr", "connection was lost")) == 1


def _read_available(fd: int) -> bytes:
    """What a pipe holds now, without waiting for more."""
    os.set_blocking(fd, False)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


@pytest.mark.parametrize("layout", ["in-process", "session-host"])
def test_an_editor_that_never_reads_stderr_does_not_hang_the_server(tmp_path, layout: str):
    """Each frame that is not JSON is one warning, in the log file and on stderr. An editor that never reads the
    server's stderr let its pipe fill after a few hundred, and the next warning blocked the server for good: no
    request was answered again. A line stderr has no room for is left out of it, and the next line written there
    says how many were; the log file has every one."""
    env = server_env(COMPLETER_LOG_DIR=str(tmp_path))
    if layout == "session-host":
        env.update(COMPLETER_RUNTIME_DIR=str(tmp_path / "run"), COMPLETER_ENGINE_IDLE_EXIT_S="3")
        env.pop("COMPLETER_STANDALONE")
    client = RawClient(SERVER_CMD, env=env, stderr=subprocess.PIPE)  # not read until the server has answered
    try:
        client.initialize()
        for _ in range(2000):
            client.send_raw(b"not json")
        assert "result" in client.request("completer/info", timeout=30)  # raises TimeoutError: the server hung
        assert client.proc.stderr is not None
        _read_available(client.proc.stderr.fileno())
        client.send_raw(b"not json")
        assert "result" in client.request("completer/info", timeout=30)
        said = _read_available(client.proc.stderr.fileno()).decode()
        assert re.search(r"\(\d+ log lines left out here: stderr was not being read\)\n.*not JSON", said), said
    finally:
        client.close()
    logged = (tmp_path / "lsp.log").read_text(encoding="utf-8").count("a message body that is not JSON")
    assert logged == 2001, "the log file lost lines"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the server's memory is read in /proc")
def test_a_tcp_client_that_stops_reading_is_not_read_either():
    """Over TCP the answers are written without blocking: a client that stopped reading them and went on sending
    had every answer kept for it in the server (each of these echoes an id of 100 kB: 500 grew it by over 50 MB,
    and a client flooding keystrokes grew it by 25 MB a minute). Its messages are now read as it takes the answers,
    as on stdio, where a write blocks; once it reads again, every request is answered."""
    with _tcp_server() as (proc, sock), sock.makefile("rb") as replies:
        def answer() -> dict:
            while True:
                message = _next_message(replies)
                if "id" in message and "method" not in message:
                    return message

        sock.sendall(_frames({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"processId": None, "rootUri": None, "capabilities": {}}}))
        assert answer()["id"] == 1
        before = _rss_mb(proc.pid)
        ids = [f"{n}:{'x' * 100_000}" for n in range(500)]
        sent: list[str] = []

        def flood() -> None:
            for msg_id in ids:
                sock.sendall(_frames({"jsonrpc": "2.0", "id": msg_id, "method": "completer/noSuchMethod"}))
                sent.append(msg_id)

        sender = threading.Thread(target=flood, daemon=True)
        sender.start()
        progress, since = -1, time.monotonic()
        while sender.is_alive() and time.monotonic() - since < 3:  # all sent, or the server reads no more
            if len(sent) != progress:
                progress, since = len(sent), time.monotonic()
            time.sleep(0.1)
        grown = _rss_mb(proc.pid) - before
        answered = {answer()["id"] for _ in ids}
        sender.join(30)
        assert grown < 25, f"the server grew by {grown:.0f} MB holding answers its client did not read"
        assert answered == set(ids), "not every request was answered once the client read again"


def _frames(*messages: dict) -> bytes:
    bodies = [json.dumps(message).encode() for message in messages]
    return b"".join(b"Content-Length: %d\r\n\r\n" % len(body) + body for body in bodies)


@pytest.mark.parametrize("ending, code", [("end of input", 1), ("shutdown", 0)])
def test_a_client_gone_right_after_initialize_leaves_a_server_that_exits_quietly(tmp_path, ending: str, code: int):
    """The worker's process was still starting when the client left: the loop's teardown cancelled its start, and
    Python 3.11's asyncio then waited forever for a process whose pipes it had not connected (the server never
    exited); a `shutdown` stopped the worker while it loaded the model, and its start logged two errors, "no model
    loaded, completions are off"; and an `exit` right behind the `shutdown` could arrive before the worker was
    stopped, which pygls took for an exit without shutdown (code 1)."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    after = [{"jsonrpc": "2.0", "id": 2, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"}] \
        if ending == "shutdown" else []
    for attempt in range(4):
        with open(tmp_path / f"stderr-{attempt}", "wb") as stderr:
            proc = subprocess.Popen(SERVER_CMD, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr,
                                    env=server_env())
            try:
                assert proc.stdin is not None
                proc.stdin.write(_frames(initialize, *after))
                proc.stdin.close()
                assert proc.wait(15) == code
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        _logged_lines(tmp_path / f"stderr-{attempt}")


@pytest.mark.parametrize("model_path", ["ollama:\ud800", "ollama:code\x00llama"], ids=["lone-surrogate", "nul"])
def test_a_model_path_no_file_can_have_is_an_invalid_setting(tmp_path, model_path: str):
    """It named a model to convert, whose converter could not be given it as an argument: the conversion's task died
    of a UnicodeEncodeError (or ValueError) with a traceback, and completer/info said "converting" ever after."""
    with open(tmp_path / "stderr", "wb") as stderr:
        client = RawClient(SERVER_CMD, env=server_env(), stderr=stderr)
        try:
            client.initialize()
            _ready(client)
            client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"modelPath": model_path}}})
            time.sleep(0.5)  # a conversion would have started and failed by now
            info = client.request("completer/info")["result"]
            assert info["server"]["settings"]["modelPath"] is None and info["model_conversion"] is None, info
            _still_completing(client)
        finally:
            client.close()
    assert len(_logged_lines(tmp_path / "stderr", "Ignoring invalid setting completer.modelPath")) == 1


def test_a_line_copied_from_further_up_keeps_the_tabs_inside_it():
    """The engine reads tabs as spaces; a line it offers from further up the file was given back with four spaces
    for each tab inside it, which is not the line the file has."""
    uri = "file:///work/table.py"
    text = ('ROWS = [\n    row("alpha",\t"beta",\t"gamma"),\n    row("delta",\t"epsilon"),\n]\n'
            'MORE = [\n    row("alpha",')
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.initialize()
        _ready(client)
        client.open(uri, text)
        lines = [item["textEdit"]["newText"] for item in client.completion(uri, 5, 16)["result"]["items"]]
    assert '    row("alpha",\t"beta",\t"gamma"),' in lines, lines
    assert '    row("alpha",    "beta",    "gamma"),' not in lines, lines


def test_the_line_after_a_copy_of_the_lines_above_keeps_the_tabs_inside_it():
    """The line that follows an earlier copy of the lines above is put first (following_first) from the text the
    engine reads, tabs as spaces: it came first with four spaces for each tab, and the engine's own copy of it,
    tabs given back, second, the same line twice to the eye."""
    uri = "file:///work/table.py"
    text = 'ROWS = [\n    row("alpha",\t"beta"),\n    row("delta",\t"epsilon"),\n]\n' \
        'MORE = [\n    row("alpha",\t"beta"),\n    '
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.initialize()
        _ready(client)
        client.open(uri, text)
        lines = [item["textEdit"]["newText"] for item in client.completion(uri, 6, 4)["result"]["items"]]
    assert lines[0] == '    row("delta",\t"epsilon"),', lines
    assert '    row("delta",    "epsilon"),' not in lines, lines


def test_the_logs_are_readable_by_their_user_alone_whatever_the_umask(tmp_path: Path):
    """The log names the user's files and, at --log-level DEBUG, holds the code suggested (pygls logs each message
    it sends); with the common umask 022 it was written 0644 in a folder of 0755, for every account on the machine
    to read. A log of an older version is made private too."""
    log_dir = tmp_path / "state" / "log"
    old_backup = log_dir / "lsp.log.1"
    log_dir.parent.mkdir()
    umask = os.umask(0o022)
    try:
        client = RawClient(SERVER_CMD + ["--log-level", "DEBUG"], env=server_env(COMPLETER_LOG_DIR=str(log_dir)))
    finally:
        os.umask(umask)
    try:
        client.initialize()
        _ready(client)
        client.open("file:///tmp/secret_module.py", "import os\nos.pa")
        items = client.completion("file:///tmp/secret_module.py", 1, 5)["result"]["items"]
    finally:
        client.close()
    logs = sorted(log_dir.glob("*.log"))
    assert {p.name for p in logs} >= {"lsp.log", "lsp-worker.log"}
    assert items and json.dumps(items[0]["label"]) in (log_dir / "lsp.log").read_text(encoding="utf-8")  # code
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in logs} == {p.name: 0o600 for p in logs}
    old_backup.write_text("an older version's log\n")
    old_backup.chmod(0o644)
    (log_dir / "lsp.log").chmod(0o644)
    with RawClient(SERVER_CMD, env=server_env(COMPLETER_LOG_DIR=str(log_dir))) as again:
        again.initialize()
    assert stat.S_IMODE((log_dir / "lsp.log").stat().st_mode) == 0o600
    assert stat.S_IMODE(old_backup.stat().st_mode) == 0o600
