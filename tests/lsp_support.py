"""Helpers for the language server tests (kept out of conftest.py, which is shared).

Every test talks to the real server process (`python -m lsp`) and its real worker running the
committed model bundle. Logs go to a throwaway directory, never to the user's log dir.
"""
from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "completer" / "samples" / "sample.py"
SAMPLE_TEXT = SAMPLE.read_text(encoding="utf-8")
SAMPLE_LINES = SAMPLE_TEXT.split("\n")
SERVER_CMD = [sys.executable, "-m", "lsp"]
REPEATED_CALL = '''import os


def load(path):
    blob = frobnicate_payload(path, mode="xz", strict=False, chunk_size=4093)
    return blob


def save(path, blob):
    other = frobnicate_payload('''
"""A call written out above and begun again: the model alone ends it with `path)`, the document's repeats
with the argument list above, whose odd size it does not guess (tests of documentRepeats in the engine and
through the server)."""
REPEATED_ARGUMENTS = 'path, mode="xz", strict=False, chunk_size=4093)'

LONG_CALL = ('    table = tables.build_table("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", '
             '"iota")')
LINE_ABOVE = (f"import tables\n\n\ndef build():\n{LONG_CALL}\n    return table\n\n\n"
              "def rebuild():\n    table = tables.build")
"""A call of more tokens than max_tokens, begun again: the beam search cannot finish it, only the offer of a
line further up the file can (tests of earlier lines in the engine and through the server)."""

NAMES_LIST = 'NAMES = [\n    "alpha", "beta", "gamma", "delta",\n    "epsilon", "zeta", "eta", "theta",\n    '
"""A list whose next line holds four more names: with maxTokens 6 no line of them can end, so only the start
of one is offered (tests of partial lines in the engine and through the server)."""

CALL_BELOW = ("import os\n\n\ndef save(path, blob):\n    other = frobnicate_payload(path, mode=\n    return other\n\n\n"
              "def load(path):\n    blob = frobnicate_payload(path, mode=\"xz\", strict=False, chunk_size=4096)\n"
              "    return blob\n")
CALL_BELOW_CURSOR = (4, len("    other = frobnicate_payload(path, mode="))
"""A call begun with the same call written out further down: only the lines below hold its `mode="xz"`."""

OTHER_FILE = ("from handlers import handle_zq_alpha, handle_zq_beta\n\n\ndef setup(registry):\n"
              "    registry.register_handler(\"zq_alpha\", handle_zq_alpha, priority=7)\n"
              "    registry.register_handler(\"zq_beta\", handle_zq_beta, priority=3)\n")
BESIDE_OTHER_FILE = "import handlers\n\n\ndef install(registry):\n    registry.register_handler(\"zq_al"
BESIDE_OTHER_FILE_CURSOR = (4, len("    registry.register_handler(\"zq_al"))
FROM_OTHER_FILE = "    registry.register_handler(\"zq_alpha\", handle_zq_alpha, priority=7)"
"""A registration begun in one file and written out in another open file: only that file holds its arguments."""

LOG_DIR = tempfile.mkdtemp(prefix="completer-lsp-test-logs-")
atexit.register(shutil.rmtree, LOG_DIR, True)


def server_env(**extra: str) -> dict[str, str]:
    """The server's environment: repo importable, logs in a temp dir, plus `extra`."""
    env = dict(os.environ)
    env["COMPLETER_LOG_DIR"] = LOG_DIR
    env["COMPLETER_STANDALONE"] = "1"  # a private worker per server; tests/test_shared_engine.py shares one
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def counting(base: type, method: str) -> type:
    """A subclass of `base` whose `method` counts its calls in the class's `calls`: the work a search did in a text,
    for tests that bound it where a time would be flaky."""
    def counted(self: Any, *args: Any) -> Any:
        counter.calls += 1
        return getattr(base, method)(self, *args)

    counter = type(f"Counting{base.__name__.title()}", (base,), {method: counted, "calls": 0})
    return counter


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, not reaped yet by a parent that is not the test, has ended), by /proc."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def gone_within(pid: int, timeout: float) -> bool:
    """Whether `pid` ends within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.02)
    return False


def workspace_server(root: Path, **settings: Any) -> Any:
    """The real server over a RawClient, with `root` as its workspace folder and `settings`, once its worker has
    loaded the model."""
    from lsp.rawclient import RawClient

    client = RawClient(SERVER_CMD, env=server_env())
    client.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
                                  "initializationOptions": {"completer": settings}})
    client.notify("initialized", {})
    deadline = time.monotonic() + 60
    while not client.request("completer/info")["result"].get("model"):
        assert time.monotonic() < deadline, "the worker never loaded the model"
        time.sleep(0.05)
    return client


def lines_beside_other_file(client: Any, uri: str) -> list[str]:
    """The lines offered at BESIDE_OTHER_FILE_CURSOR: FROM_OTHER_FILE among them only if OTHER_FILE was read."""
    result = client.completion(uri, *BESIDE_OTHER_FILE_CURSOR)["result"]
    return [item["textEdit"]["newText"] for item in result["items"]]


def candidate_positions(lines: list[str] = SAMPLE_LINES) -> list[tuple[int, int]]:
    """Cursor positions worth asking about: after the indentation of code lines, and mid-line."""
    out: list[tuple[int, int]] = []
    for index, line in enumerate(lines):
        code = line.strip()
        if not code or code.startswith(("#", '"', "'")) or index < 3:
            continue
        indent = len(line) - len(code)
        out.append((index, indent))
        out.append((index, indent + max(1, len(code) // 2)))
    return out


def doc_id(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


def completion_params(uri: str, line: int, character: int) -> types.CompletionParams:
    return types.CompletionParams(text_document=doc_id(uri), position=types.Position(line, character))


def inline_params(uri: str, line: int, character: int) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=doc_id(uri), position=types.Position(line, character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
    )


def open_doc(client: Any, uri: str, text: str, language_id: str = "python", version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=version, text=text)))


def change_doc(client: Any, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(*start), types.Position(*end)), text=text)]))


def plain(value: Any) -> Any:
    """pygls hands untyped results over as namedtuples; turn them back into dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


async def info(client: Any) -> dict[str, Any]:
    return plain(await client.protocol.send_request_async("completer/info", {}))


async def wait_ready(client: Any, timeout: float = 30.0) -> dict[str, Any]:
    """completer/info once the worker has loaded the model."""
    deadline = time.monotonic() + timeout
    while True:
        result = await info(client)
        if result.get("model") and result["server"]["worker_pid"]:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"the worker did not become ready: {result}")
        await asyncio.sleep(0.05)


async def first_completing_position(client: Any, uri: str, lines: list[str] = SAMPLE_LINES
                                    ) -> tuple[int, int, types.CompletionList]:
    """The first candidate position where the server offers at least one line (model-agnostic)."""
    for line, col in candidate_positions(lines):
        result = await client.text_document_completion_async(completion_params(uri, line, col))
        if result is not None and result.items:
            return line, col, result
    raise AssertionError("the server offered no completion anywhere in the sample file")


def units(text: str, encoding: str) -> int:
    """The length of `text` in a position encoding's code units."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def column_of(line: str, character: int, encoding: str) -> int:
    """A client's column, in `encoding`'s code units, as an index into `line`, by LSP's rules (a column past the
    end is the end)."""
    for index in range(len(line) + 1):
        if units(line[:index], encoding) >= character:
            return index
    return len(line)


def apply_line_edit(lines: list[str], edit: types.TextEdit, encoding: str = "utf-32") -> list[str]:
    """Apply a single-line TextEdit as a client that negotiated `encoding` does (utf-32: code points)."""
    rng = edit.range
    assert rng.start.line == rng.end.line, "whole-line edits must stay on one line"
    out = list(lines)
    line = out[rng.start.line]
    start, end = column_of(line, rng.start.character, encoding), column_of(line, rng.end.character, encoding)
    out[rng.start.line] = line[:start] + edit.new_text + line[end:]
    return out
