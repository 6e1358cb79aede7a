"""Notebooks (LSP 3.17 notebook sync) through the real server: a cell is completed with the code cells above it
as the text before the cursor, in the notebook's order, as it changes; markdown cells and cells of other
languages are not read; a notebook closed leaves nothing open."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_endpoint import Behaviour, FakeEndpoint
from lsp_support import SERVER_CMD, server_env

from lsp.documents import DocumentStore
from lsp.notebooks import Cell, NotebookStore, runs_other_language
from lsp.rawclient import RawClient

NOTEBOOK = "file:///work/analysis.ipynb"
CAPABILITIES = {"notebookDocument": {"synchronization": {"dynamicRegistration": False}}}
DEFINES = "import math\n\n\ndef frobnicate_the_widgets(count):\n    return math.sqrt(count) * 2\n"


def _cell(index: int) -> str:
    return f"vscode-notebook-cell:/work/analysis.ipynb#W{index}sZmlsZQ%3D%3D"


def _item(uri: str, text: str, language: str = "python", version: int = 1) -> dict:
    return {"uri": uri, "languageId": language, "version": version, "text": text}


def _open(client: RawClient, cells: list[tuple[int, str, str, int]]) -> None:
    """cells: (index, text, language, kind), kind 2 for code and 1 for markdown."""
    client.notify("notebookDocument/didOpen", {
        "notebookDocument": {"uri": NOTEBOOK, "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": kind, "document": _cell(i)} for i, _, _, kind in cells]},
        "cellTextDocuments": [_item(_cell(i), text, language) for i, text, language, _ in cells]})


def _change(client: RawClient, version: int, cells: dict) -> None:
    client.notify("notebookDocument/didChange", {"notebookDocument": {"uri": NOTEBOOK, "version": version},
                                                  "change": {"cells": cells}})


def _ready(client: RawClient) -> None:
    deadline = time.monotonic() + 60
    while not client.request("completer/info")["result"].get("model"):
        assert time.monotonic() < deadline, "the worker never loaded the model"
        time.sleep(0.05)


def _lines(client: RawClient, uri: str, line: int, column: int) -> list[str]:
    result = client.completion(uri, line, column)["result"]
    return [item["textEdit"]["newText"] for item in (result or {}).get("items", [])]


def _context_tokens(client: RawClient) -> int:
    return client.request("completer/info")["result"]["server"]["last_context_tokens"]


def test_the_server_offers_notebook_sync_to_a_client_that_has_it():
    with RawClient(SERVER_CMD, env=server_env()) as client:
        offered = client.initialize(capabilities=CAPABILITIES)["result"]["capabilities"]
    assert offered["notebookDocumentSync"] == {"notebookSelector": [{"notebook": "*"}]}
    with RawClient(SERVER_CMD, env=server_env()) as client:
        assert "notebookDocumentSync" not in client.initialize()["result"]["capabilities"]


def test_a_cell_reads_the_code_cells_above_it_as_they_change(tmp_path):
    with open(tmp_path / "stderr", "wb") as stderr, RawClient(SERVER_CMD, env=server_env(), stderr=stderr) as client:
        client.initialize(capabilities=CAPABILITIES)
        _ready(client)
        notes = "# Notes\n\nCall frobnicate_everything_else first.\n"
        _open(client, [(0, DEFINES, "python", 2), (1, notes, "markdown", 1), (2, "total = frob", "python", 2)])
        first = _lines(client, _cell(2), 0, 12)
        assert any(line.startswith("total = frobnicate_the_widgets(") for line in first), first
        assert not any("everything" in line for line in first), first  # the markdown cell is not read
        tokens_with_cells = _context_tokens(client)
        assert tokens_with_cells > 25  # the cell alone is a handful

        # An edit in the first cell: the next completion in the last reads the new name.
        _change(client, 2, {"textContent": [{"document": {"uri": _cell(0), "version": 2}, "changes": [
            {"range": {"start": {"line": 3, "character": 4}, "end": {"line": 3, "character": 26}},
             "text": "summarize_the_gadgets"}]}]})
        after = _lines(client, _cell(2), 0, 12)
        assert not any("frobnicate_the_widgets" in line for line in after), after
        _change(client, 3, {"textContent": [{"document": {"uri": _cell(2), "version": 2}, "changes": [
            {"range": {"start": {"line": 0, "character": 8}, "end": {"line": 0, "character": 12}},
             "text": "summ"}]}]})
        assert any(line.startswith("total = summarize_the_gadgets(") for line in _lines(client, _cell(2), 0, 12))

        # A cell inserted at the top, then the defining cell removed: the last cell no longer reads it.
        _change(client, 4, {"structure": {"array": {"start": 0, "deleteCount": 0, "cells": [
            {"kind": 2, "document": _cell(3)}]}, "didOpen": [_item(_cell(3), "import os\n")]}})
        assert _lines(client, _cell(3), 1, 0) is not None  # the new cell completes, above every other
        _change(client, 5, {"structure": {"array": {"start": 1, "deleteCount": 1},
                                          "didClose": [{"uri": _cell(0)}]}})
        _lines(client, _cell(2), 0, 12)
        assert _context_tokens(client) < tokens_with_cells - 20

        # Closed: its cells are no documents any more.
        client.notify("notebookDocument/didClose", {"notebookDocument": {"uri": NOTEBOOK}, "cellTextDocuments": [
            {"uri": _cell(i)} for i in (3, 1, 2)]})
        assert _lines(client, _cell(2), 0, 12) == []
        info = client.request("completer/info")["result"]
    assert "Traceback" not in Path(tmp_path / "stderr").read_text()
    assert info["server"]["open_documents"] == 0


def test_a_cells_context_is_the_code_cells_of_its_language_in_the_notebooks_order():
    """The store alone: markdown cells and cells of another language are left out, an empty line between cells,
    and a cell moved reads what is above it now."""
    documents, notebooks = DocumentStore(), NotebookStore()
    cells = [("a", "python", 2, "import os\n"), ("md", "markdown", 1, "# title"), ("sh", "shellscript", 2, "ls"),
             ("b", "python", 2, "x = 1\ny = 2"), ("c", "python", 2, "z = 3")]
    for uri, language, _, text in cells:
        documents.open(uri, language, 1, text)
    notebooks.open("nb", [Cell(uri, kind) for uri, _, kind, _ in cells])
    around = notebooks.around(documents.get("b"), documents)
    assert around is not None and around.lines == ["import os", "", "", "x = 1", "y = 2", "", "z = 3"]
    assert around.lines[around.first] == "x = 1"
    assert notebooks.around(documents.get("md"), documents) is None  # a markdown cell is completed as its own text
    assert [notebooks.shared_document(uri, documents) for uri in ("a", "md", "sh", "b", "c", "x")] == \
        ["nb", None, None, "nb", "nb", None]  # one cache for the code cells in the first one's language
    assert notebooks.around(documents.get("sh"), documents).lines == ["ls"]
    notebooks.splice("nb", 4, 1, [])  # c removed, then put first
    notebooks.splice("nb", 0, 0, [Cell("c", 2)])
    around = notebooks.around(documents.get("a"), documents)
    assert around.lines[:around.first] == ["z = 3", ""]
    assert notebooks.cells_of("a") == ["c", "a", "md", "sh", "b"] and notebooks.cells_of("elsewhere") == []
    assert notebooks.close("nb") == ["c", "a", "md", "sh", "b"]
    assert notebooks.around(documents.get("a"), documents) is None


class _ComparedUri(str):
    """A cell's URI that counts the comparisons made with it."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _ComparedUri.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_other_files_of_a_cell_in_a_notebook_of_a_thousand_cells_are_found_in_a_pass_over_them():
    """The other open files a cell's search reads leave out its notebook's cells, which the server passed as a list:
    each open document was looked for in it, a million comparisons (6 ms of every keystroke) in a notebook of a
    thousand cells. Each document is now compared with the cells about once."""
    documents, notebooks = DocumentStore(), NotebookStore()
    documents.open("file:///work/helpers.py", "python", 1, "def helper():\n    return 1\n")
    documents.open("file:///work/notes.md", "markdown", 1, "# notes\n")
    cells = [_ComparedUri(_cell(i)) for i in range(1_000)]
    for uri in cells:
        documents.open(uri, "python", 1, "x = 1\n")
    notebooks.open(NOTEBOOK, [Cell(uri, 2) for uri in cells])
    _ComparedUri.compared = 0
    assert documents.others(cells[500], 5, notebooks.cells_of(cells[500])) == ["def helper():\n    return 1\n"]
    assert _ComparedUri.compared < 3 * len(cells)


def test_a_notebook_opened_again_leaves_no_cell_of_the_first_open_behind():
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.initialize(capabilities=CAPABILITIES)
        _ready(client)
        _open(client, [(0, "import os\n", "python", 2), (1, "x = 1\n", "python", 2)])
        _open(client, [(2, "import sys\n", "python", 2)])
        assert client.request("completer/info")["result"]["server"]["open_documents"] == 1
        assert _lines(client, _cell(0), 0, 3) == []  # the first open's cells are gone


def test_a_change_to_a_notebook_never_opened_is_one_log_line(tmp_path):
    with open(tmp_path / "stderr", "wb") as stderr, RawClient(SERVER_CMD, env=server_env(), stderr=stderr) as client:
        client.initialize(capabilities=CAPABILITIES)
        _ready(client)
        _change(client, 2, {"textContent": [{"document": {"uri": _cell(0), "version": 2}, "changes": [
            {"text": "x = 1"}]}]})
        client.notify("notebookDocument/didClose", {"notebookDocument": {"uri": NOTEBOOK}, "cellTextDocuments": []})
        _open(client, [(0, "import os\nos.pa", "python", 2)])
        assert all(line.startswith("os.pa") for line in _lines(client, _cell(0), 1, 5))
    text = Path(tmp_path / "stderr").read_text()
    assert "Traceback" not in text and " ERROR " not in text, text
    assert sum("not open" in line and "notebook" in line for line in text.splitlines()) == 1, text


def test_the_code_cells_share_one_cache_so_a_cells_first_keystroke_reuses_the_cells_above():
    """A cell's context begins with the cells above it, as every other cell's does: the engine keeps one cache for
    the notebook's code cells, so the first completion in a cell that was never completed in runs only what
    differs from the last context run in the notebook (here the prefill of its last cell on opening)."""
    body = "".join(f"def step_{i}(value):\n    return value * {i} + offset_{i}\n\n\n" for i in range(20))
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.initialize(capabilities=CAPABILITIES)
        _ready(client)
        _open(client, [(0, body, "python", 2), (1, "first = step_1(2)\n", "python", 2),
                       (2, "second = st", "python", 2), (3, "third = 3\n", "python", 2)])
        time.sleep(1.0)  # the last cell's prefill, while the worker is idle
        _lines(client, _cell(2), 0, 11)
        server = client.request("completer/info")["result"]["server"]
    assert server["last_context_tokens"] > 300
    assert server["last_new_tokens"] < 30, server  # alone, the cell's cache would have run all of it


def test_only_the_notebooks_first_code_line_gets_the_header_the_workspaces_files_start_with(tmp_path):
    """The workspace's common first line (a licence header) is for a file's first line: a cell below others is
    the middle of the notebook's code, and a new cell's first line was offered the header each time."""
    header = "# SPDX-License-Identifier: Apache-2.0 OR MIT"
    for i in range(3):
        (tmp_path / f"part{i}.py").write_text(f"{header}\n\n\ndef part_{i}():\n    return {i}\n")
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": CAPABILITIES,
                                      "initializationOptions": {"completer": {"workspaceContext": True}}})
        client.notify("initialized", {})
        _ready(client)
        time.sleep(0.5)  # the index is built on a thread
        _open(client, [(0, "", "python", 2), (1, "import os\n", "python", 2), (2, "", "python", 2)])
        assert _lines(client, _cell(0), 0, 0)[:1] == [header]  # the notebook's first line
        assert header not in _lines(client, _cell(2), 0, 0)


def test_a_name_a_cell_above_defines_is_a_known_name(tmp_path):
    """The line that finishes the word at the cursor with a name the code uses comes first (known_names_first):
    a name the cells above define counts, as it would in one file of the notebook's code."""
    pytest.importorskip("httpx")  # the remote backend's (the test extra); CI fails on a skip
    endpoint = FakeEndpoint(Behaviour(choices=lambda prompt: ["th(data)", "yload(data)", "ck(data)"])).start()
    options = {"completer": {"backend": "openai", "endpoint": endpoint.url, "model": "qwen2.5-coder-test",
                             "endpointChoices": 3}}
    try:
        with RawClient(SERVER_CMD, env=server_env()) as client:
            client.initialize(options, capabilities=CAPABILITIES)
            _open(client, [(0, "def tokenize_payload(data):\n    return data.split()\n", "python", 2),
                           (1, "words = tokenize_pa", "python", 2)])
            assert _lines(client, _cell(1), 0, 19) == ["words = tokenize_payload(data)", "words = tokenize_path(data)",
                                                       "words = tokenize_pack(data)"]
    finally:
        endpoint.stop()


@contextlib.contextmanager
def _searching_the_second_cell(delay_s: float) -> Iterator[tuple[RawClient, Any]]:
    """A notebook of two cells, the second's completion running on an endpoint that answers `delay_s` later."""
    pytest.importorskip("httpx")  # the remote backend's (the test extra); CI fails on a skip
    endpoint = FakeEndpoint(Behaviour(mode="slow", delay_s=delay_s, line=lambda prompt: "yload(data)")).start()
    options = {"completer": {"backend": "openai", "endpoint": endpoint.url, "model": "qwen2.5-coder-test"}}
    try:
        with RawClient(SERVER_CMD, env=server_env()) as client:
            client.initialize(options, capabilities=CAPABILITIES)
            _open(client, [(0, "def tokenize_payload(data):\n    return data\n", "python", 2),
                           (1, "words = tokenize_pa", "python", 2)])
            yield client, client.request_nowait("textDocument/completion", {
                "textDocument": {"uri": _cell(1)}, "position": {"line": 0, "character": 19}})
    finally:
        endpoint.stop()


def test_a_search_in_flight_for_a_cell_is_stale_once_another_cell_changes():
    """A cell's context holds the cells around it: an edit of another cell while its search runs ends the search
    (ContentModified, or RequestCancelled where the backend stopped first), as an edit of the cell itself does,
    instead of answering suggestions made from the old text."""
    with _searching_the_second_cell(delay_s=1.5) as (client, running):
        time.sleep(0.5)
        _change(client, 2, {"textContent": [{"document": {"uri": _cell(0), "version": 2}, "changes": [
            {"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 20}},
             "text": "split_words"}]}]})
        answer = client.wait(running, 30)
        assert answer.get("error", {}).get("code") in (-32801, -32800), answer  # ContentModified, or Cancelled


def test_a_cells_run_ending_leaves_the_searches_of_the_others_running():
    """An execution summary (`data`) changes no cell's text: a search running for another cell answers."""
    with _searching_the_second_cell(delay_s=1.0) as (client, running):
        time.sleep(0.3)
        _change(client, 2, {"data": [{"kind": 2, "document": _cell(0),
                                      "executionSummary": {"executionOrder": 1, "success": True}}]})
        answer = client.wait(running, 30)
        assert [item["textEdit"]["newText"] for item in answer["result"]["items"]] == [
            "words = tokenize_payload(data)"], answer


def test_the_notebooks_own_file_is_not_another_file_that_knows_a_name(tmp_path):
    """The workspace index reads the notebook's file as saved: a name only an older version of its cells used (the
    line since rewritten, unsaved) must not rank a suggestion first as a name the workspace knows, as a Python
    file's own saved text never does."""
    import json

    saved = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": ["words = tokenize_path(data)\n"]}], "metadata": {}, "nbformat": 4,
             "nbformat_minor": 5}
    (tmp_path / "analysis.ipynb").write_text(json.dumps(saved))
    notebook = (tmp_path / "analysis.ipynb").as_uri()
    cell = f"vscode-notebook-cell:{(tmp_path / 'analysis.ipynb').as_posix()}#W0sZmlsZQ%3D%3D"
    pytest.importorskip("httpx")  # the remote backend's (the test extra); CI fails on a skip
    endpoint = FakeEndpoint(Behaviour(choices=lambda prompt: ["yload(data)", "th(data)", "ck(data)"])).start()
    options = {"completer": {"backend": "openai", "endpoint": endpoint.url, "model": "qwen2.5-coder-test",
                             "endpointChoices": 3, "workspaceContext": True}}
    try:
        with RawClient(SERVER_CMD, env=server_env()) as client:
            client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(),
                                          "capabilities": CAPABILITIES, "initializationOptions": options})
            client.notify("initialized", {})
            deadline = time.monotonic() + 30
            while (client.request("completer/info")["result"]["server"]["workspace_index"] or {}).get("files") != 1:
                assert time.monotonic() < deadline, "the index never read the notebook"
                time.sleep(0.05)
            client.notify("notebookDocument/didOpen", {
                "notebookDocument": {"uri": notebook, "notebookType": "jupyter-notebook", "version": 1,
                                     "cells": [{"kind": 2, "document": cell}]},
                "cellTextDocuments": [_item(cell, "words = tokenize_pa")]})
            assert _lines(client, cell, 0, 19) == ["words = tokenize_payload(data)", "words = tokenize_path(data)",
                                                   "words = tokenize_pack(data)"]
    finally:
        endpoint.stop()


def test_a_notebook_change_that_cannot_be_read_leaves_no_cell_it_edited_answering_from_its_old_text(tmp_path):
    """A notebook change whose params are invalid (a negative deleteCount) is dropped whole, the cell edits in it
    too: the server's copy of the edited cell was then the text before, and its answers replaced the client's line
    (`path = os.path.jo`) with lines made from the old one (`path = os.pa`). A cell it edited now answers nothing,
    as a document whose didChange cannot be read does; every cell, where the change does not say which it edited."""
    with open(tmp_path / "stderr", "wb") as stderr, RawClient(SERVER_CMD, env=server_env(), stderr=stderr) as client:
        client.initialize(capabilities=CAPABILITIES)
        _ready(client)
        _open(client, [(0, "import os\n", "python", 2), (1, "path = os.pa", "python", 2),
                       (2, "name = os.pa", "python", 2)])
        assert _lines(client, _cell(1), 0, 12) and _lines(client, _cell(2), 0, 12)
        _change(client, 2, {"structure": {"array": {"start": 0, "deleteCount": -1}}, "textContent": [
            {"document": {"uri": _cell(1), "version": 2}, "changes": [
                {"range": {"start": {"line": 0, "character": 12}, "end": {"line": 0, "character": 12}},
                 "text": "th.jo"}]}]})
        assert _lines(client, _cell(1), 0, 17) == []
        assert all(line.startswith("name = os.pa") for line in _lines(client, _cell(2), 0, 12))  # not edited
        _change(client, 3, {"textContent": {"document": _cell(2)}})  # which cells it edits cannot be read
        assert _lines(client, _cell(2), 0, 12) == []
    text = Path(tmp_path / "stderr").read_text()
    assert "Traceback" not in text and " ERROR " not in text, text


@contextlib.contextmanager
def _served_from(line: Callable[[str], str]) -> Iterator[RawClient]:
    """A server whose suggestions come from a fake endpoint answering `line(prompt)`: which cells reached the
    prompt is read from the line offered."""
    pytest.importorskip("httpx")  # the remote backend's (the test extra); CI fails on a skip
    endpoint = FakeEndpoint(Behaviour(line=line))
    options = {"completer": {"backend": "openai", "endpoint": endpoint.start().url, "model": "qwen2.5-coder-test"}}
    try:
        with RawClient(SERVER_CMD, env=server_env()) as client:
            client.initialize(options, capabilities=CAPABILITIES)
            yield client
    finally:
        endpoint.stop()


def test_a_cell_turned_markdown_is_no_longer_code_above_the_others():
    """A cell's kind changed in a `data` change (LSP's code to markup) changes the code around every other cell, as
    removing the cell does: the answer made with it as code was handed out again at the same cursor, from the
    searches' last result, and a search running then answered from the context before."""
    with _served_from(lambda prompt: "th(data)" if "def tokenize_path" in prompt else "ck(data)") as client:
        _open(client, [(0, "def tokenize_path(data):\n    return data\n", "python", 2),
                       (1, "words = tokenize_pa", "python", 2)])
        assert _lines(client, _cell(1), 0, 19) == ["words = tokenize_path(data)"]
        _change(client, 2, {"data": [{"kind": 1, "document": _cell(0)}]})
        assert _lines(client, _cell(1), 0, 19) == ["words = tokenize_pack(data)"]
        _change(client, 3, {"data": [{"kind": 2, "document": _cell(0)}]})
        assert _lines(client, _cell(1), 0, 19) == ["words = tokenize_path(data)"]


def test_a_notebook_closed_without_naming_its_cells_leaves_none_of_them_open(tmp_path):
    """didClose lists the cells' documents it closes; one that lists none (or some) left the others open for good,
    answered, counted among the open documents and read as other open files. The notebook's cells go with it,
    with one log line."""
    with open(tmp_path / "stderr", "wb") as stderr, RawClient(SERVER_CMD, env=server_env(), stderr=stderr) as client:
        client.initialize(capabilities=CAPABILITIES)
        _ready(client)
        _open(client, [(0, "import os\n", "python", 2), (1, "x = os.pa", "python", 2)])
        client.notify("notebookDocument/didClose", {"notebookDocument": {"uri": NOTEBOOK}, "cellTextDocuments": []})
        assert client.request("completer/info")["result"]["server"]["open_documents"] == 0
        assert _lines(client, _cell(1), 0, 9) == []
    text = Path(tmp_path / "stderr").read_text()
    assert "Traceback" not in text and sum("closing them too" in line for line in text.splitlines()) == 1, text


def test_a_cell_ipython_runs_as_another_language_is_neither_completed_nor_read_as_python():
    """VS Code keeps a `%%bash` or `%%html` cell's language Python: its lines were offered Python (`import os` in
    a shell script), and read as Python code above every cell below it. Such a cell now gets no suggestions and is
    left out of the others' code, as a cell of another language is; `%%timeit` and `%%script python3` run Python."""
    with _served_from(lambda prompt: "ck(data)" if "echo" in prompt else "th(data)") as client:
        _open(client, [(0, "def tokenize_path(data):\n    return data\n", "python", 2),
                       (1, "%%bash\necho tokenize\n", "python", 2), (2, "words = tokenize_pa", "python", 2)])
        assert _lines(client, _cell(1), 2, 0) == []
        assert _lines(client, _cell(2), 0, 19) == ["words = tokenize_path(data)"]
        _change(client, 2, {"textContent": [{"document": {"uri": _cell(1), "version": 2}, "changes": [
            {"range": {"start": {"line": 0, "character": 2}, "end": {"line": 0, "character": 6}},
             "text": "script python3"}]}]})
        assert _lines(client, _cell(2), 0, 19) == ["words = tokenize_pack(data)"]  # Python: read above
        assert _lines(client, _cell(1), 2, 0) != []


@pytest.mark.parametrize("first_line,other", [
    ("%%bash", True), ("%%sh -e", True), ("%%html", True), ("%%javascript", True), ("%%script bash", True),
    ("%%R -i df", True), ("%%timeit", False), ("%%time", False), ("%%capture out", False),
    ("%%script python3", False), ("% bash", False), ("# %%bash", False), ("x = 1  # %%bash", False),
])
def test_which_cell_magics_run_another_language(first_line, other):
    documents = DocumentStore()
    cell = documents.open(_cell(0), "python", 1, f"{first_line}\nls\n")
    assert runs_other_language(cell) is other
    assert not runs_other_language(documents.open(_cell(1), "shellscript", 1, "%%bash\nls\n"))  # not Python
