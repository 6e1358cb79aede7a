"""The repository as context: the index of the workspace folders, and what it adds to a suggestion through the
real server. The other file is never opened: only the index can supply its line."""
from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path, PurePosixPath

import pytest
from lsprotocol import types

from completer.earlier_lines import header_line
from completer.text import MAX_LINE_CHARS
from completer.workspace import FIRST_LINE_FILES, FOLLOWERS, WorkspaceIndex, best_window
from lsp.rawclient import RawClient
from lsp.server import EDIT_INDEX_DELAY, CompleterServer
from lsp import workspace as lsp_workspace
from lsp.workspace import FULL_AFTER_REFUSALS, MAX_FILE_BYTES, WorkspaceFiles, read_source
from lsp_support import BESIDE_OTHER_FILE, BESIDE_OTHER_FILE_CURSOR, FROM_OTHER_FILE, OTHER_FILE, REPO, SERVER_CMD, \
    server_env
from lsp_support import counting, lines_beside_other_file as _lines, workspace_server as _server


def _index(root: Path, budget_mb: int = 8) -> WorkspaceFiles:
    files = WorkspaceFiles(budget_mb, ("python",))
    files.start([root])
    assert files.done.wait(60)
    return files


def test_the_index_reads_what_an_editor_shows_and_nothing_else(tmp_path: Path):
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "used.py").write_text("def frobnicate_payload(alpha):\n    return alpha\n")
    (root / "generated").mkdir()
    (root / "generated" / "ignored.py").write_text("IGNORED_NAME = 1\n")
    (root / "pkg" / "skip_me.py").write_text("SKIPPED_BY_PATTERN = 1\n")
    (root / ".gitignore").write_text("generated/\n")
    (root / "pkg" / ".gitignore").write_text("skip_me.py\n")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "vendored.py").write_text("VENDORED = 1\n")
    (root / "binary.py").write_bytes(b"BINARY_NAME = 1\n\0\0\0")
    (root / "huge.py").write_text("HUGE_NAME = 1\n" + "#" * MAX_FILE_BYTES)
    outside = tmp_path / "outside.py"
    outside.write_text("OUTSIDE_NAME = 1\n")
    (root / "link.py").symlink_to(outside)  # points out of the folder: not followed
    (root / "inside_link.py").symlink_to(root / "pkg" / "used.py")  # stays inside: read
    (root / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    os.mkfifo(root / "pipe.py")  # reading it would never end
    (root / "notes.txt").write_text("TEXT_NAME = 1\n")
    files = _index(root)
    indexed = {Path(p).relative_to(root).as_posix() for p in files.index.files}
    assert indexed == {"pkg/used.py", "inside_link.py"}, indexed


def test_the_memory_budget_holds_on_a_large_generated_repository(tmp_path: Path):
    for package in range(20):
        folder = tmp_path / f"pkg{package}"
        folder.mkdir()
        for module in range(50):
            names = "\n".join(f"def function_{package}_{module}_{i}(argument_{i}):\n    return argument_{i}\n"
                              for i in range(40))
            (folder / f"module{module}.py").write_text(names)
    files = _index(tmp_path, budget_mb=1)
    assert files.index.nbytes <= 1024 * 1024
    assert files.index.skipped_for_budget > 0 and len(files.index.files) > 50
    # Once the budget has refused FULL_AFTER_REFUSALS files in a row, the rest of the 1,000 are not even read.
    assert files.index.skipped_for_budget == FULL_AFTER_REFUSALS
    assert len(files.index.files) + files.index.skipped_for_budget < 1000


def test_a_folder_nested_past_pythons_recursion_limit_is_walked_and_so_is_what_follows(tmp_path: Path):
    """os.walk recursed once per level (before Python 3.12): a folder nested deeper than the recursion limit raised
    RecursionError, which ended the walk, the files after it never indexed."""
    root = tmp_path.resolve()
    deep = str(root)
    for _ in range(sys.getrecursionlimit() + 100):  # os.makedirs recurses too
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    Path(deep, "deep.py").write_text("NAME_DEEP = 1\n")
    (root / "z_last").mkdir()
    (root / "z_last" / "last.py").write_text("NAME_LAST = 1\n")
    try:
        files = _index(root)
        assert sorted(Path(p).name for p in files.index.files) == ["deep.py", "last.py"]
    finally:  # shutil.rmtree, which pytest's clean-up calls, recurses too
        os.remove(os.path.join(deep, "deep.py"))
        while deep != str(root):
            os.rmdir(deep)
            deep = os.path.dirname(deep)


def test_a_folder_deleted_while_indexing_stops_the_walk_not_the_server(tmp_path: Path):
    for module in range(400):
        (tmp_path / f"m{module}.py").write_text(f"VALUE_{module} = {module}\n" * 50)
    files = WorkspaceFiles(8, ("python",))
    files.start([tmp_path])
    shutil.rmtree(tmp_path)
    assert files.done.wait(60)  # finished or stopped, without raising out of its thread


def test_snippets_come_from_the_files_sharing_the_rarest_names():
    index = WorkspaceIndex(1 << 20)
    index.add("a.py", "import os\n\ndef load_settings(path):\n    return os.path.join(path)\n")
    index.add("b.py", "def register_handler(registry, name):\n    registry.add(name, frobnicate_payload)\n")
    index.add("c.py", "import os\nprint(os.getcwd())\n")
    found = index.snippets("def install(registry):\n    register_handler(registry, 'x')\n    regi", "me.py", 1,
                           {"a.py": "A", "b.py": "B", "c.py": "C"}.get)
    assert [(snippet.path, snippet.text) for snippet in found] == [("b.py", "B")]
    index.remove("b.py")
    assert "frobnicate_payload" not in index.postings and "b.py" not in index.files
    lines = [f"line_{i} = {i}" for i in range(200)]
    lines[120] = "special_name = registry_lookup()"
    assert "special_name" in best_window("\n".join(lines), {"special_name", "registry_lookup"})


BEST_FILES_UNDER_A_SEED = """
from completer.workspace import WorkspaceIndex
index = WorkspaceIndex(1 << 20)
for number in range(40):  # forty files as like the query as each other, two liker ones, and fifty unlike it
    index.add(f"pkg/mod_{number:02}.py", "def handle(request_payload):\\n    return request_payload\\n")
for number in range(50):
    index.add(f"pkg/other_{number:02}.py", "unrelated_name = 1\\n")
index.add("pkg/zeta.py", "route_table = handle(request_payload, rare_helper_name)\\n")
index.add("pkg/alpha.py", "rare_helper_name = 2\\n")
print(index.best_files({"request_payload", "rare_helper_name", "handle"}, "pkg/me.py", 8))
"""


def test_the_files_picked_for_snippets_do_not_change_with_the_hash_seed():
    """The same request picks the same files in every process: a set of strings iterates in an order that each
    process's hash seed sets, and ties between equally good files went by it (one held-out position in a
    thousand came out differently from run to run)."""
    picked = {subprocess.run([sys.executable, "-c", BEST_FILES_UNDER_A_SEED], capture_output=True, text=True,
                             check=True, cwd=REPO, env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
              for seed in range(6)}
    assert picked == {str(["pkg/zeta.py", "pkg/alpha.py", *(f"pkg/mod_{n:02}.py" for n in range(6))]) + "\n"}


ROOTS_UNDER_A_SEED = """
import sys
from pathlib import Path
from lsp.workspace import WorkspaceFiles
top = Path(sys.argv[1])
files = WorkspaceFiles(1, ("python",))
files.start([top / name for name in ("west", "north", "north/inner", "east", "south")])
assert files.done.wait(60)
print([root.name for root in files.roots], sorted(Path(path).parent.name for path in files.index.files))
"""


def test_the_workspace_folders_are_read_in_the_clients_order_whatever_the_hash_seed(tmp_path: Path):
    """The folders are walked in the order the client lists them, a folder inside another once: they were walked
    in a set's order, which each process's hash seed sets, so where the memory budget holds one folder's files,
    which one it held changed from run to run, and the suggestions with it."""
    for name in ("west", "north", "north/inner", "east", "south"):
        (tmp_path / name).mkdir(parents=True)
        names = "\n".join(f"{name.replace('/', '_')}_name_{i} = {i}" for i in range(1500))  # 0.6 MB of the 1
        (tmp_path / name / "names.py").write_text(names + "\n")
    found = {subprocess.run([sys.executable, "-c", ROOTS_UNDER_A_SEED, str(tmp_path)], capture_output=True, text=True,
                            check=True, cwd=REPO, env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
             for seed in range(6)}
    assert found == {str(["west", "north", "east", "south"]) + " " + str(["west"]) + "\n"}


def test_the_index_holds_the_same_files_whatever_order_the_file_system_lists_them(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch):
    """A folder's files and subfolders are read in the order of their names: os.walk gives them in the file
    system's order (ext4 hashes names with a seed of each file system, tmpfs lists the newest first), so the same
    files in another checkout or on another machine filled the memory budget with other files."""
    for folder in ("beta", "alpha", "gamma"):
        for module in ("m2", "m0", "m1"):
            (tmp_path / folder).mkdir(exist_ok=True)
            names = "\n".join(f"{folder}_{module}_name_{i} = {i}" for i in range(600))  # about a quarter of 1 MB
            (tmp_path / folder / f"{module}.py").write_text(names + "\n")
    listed = list(_index(tmp_path, budget_mb=1).index.files)
    walk = os.walk

    def backwards(top: str, *args, **kwargs):
        for folder, dirs, files in walk(top, *args, **kwargs):
            dirs.reverse()  # in place: the walk goes down in this order
            files.reverse()
            yield folder, dirs, files

    monkeypatch.setattr(os, "walk", backwards)
    assert list(_index(tmp_path, budget_mb=1).index.files) == listed == sorted(listed)
    assert 0 < len(listed) < 9


def test_a_file_kept_between_queries_is_read_again_whenever_its_text_changes(monkeypatch: pytest.MonkeyPatch):
    """The names by line of a file the last queries chose are kept while its text stays the same, which was
    told by the text's hash: two texts of the same hash (one in 2**64, by each process's seed) gave the window
    of the text before. The text itself is compared now; here every text has the same hash."""
    import completer.workspace

    monkeypatch.setattr(completer.workspace, "hash", lambda _: 0, raising=False)
    index = WorkspaceIndex(1 << 20)
    for version in ("old", "new"):
        text = "\n".join(f"{version}_name_{i} = {i}" for i in range(200)) + "\n"
        query = {f"{version}_name_150"}
        assert index.windows(["kept.py"], query, lambda _: text) == [("kept.py", best_window(text, query))]


def test_the_lines_after_a_line_are_found_where_its_copies_stand():
    index = WorkspaceIndex(1 << 20)
    texts = {
        "a.py": "def setup(app):\n    config = load_settings(app_path)\n    config.validate_schema(REGISTRY)\n",
        "b.py": "\tconfig = load_settings(app_path)\r\n\tconfig.validate_schema(REGISTRY)\r\n",  # tabs, CRLF
        "c.py": "config = load_settings(app_path)\nprint(config)\n",
        "me.py": "    config = load_settings(app_path)\n    the_file_itself()\n",
    }
    for path, text in texts.items():
        index.add(path, text)
    found = index.followers(("config = load_settings(app_path)",), "me.py", texts.get)
    assert sorted(found) == [("    config = load_settings(app_path)", "    config.validate_schema(REGISTRY)"),
                             ("config = load_settings(app_path)", "print(config)")], found  # b.py's is a.py's
    # a copy in a file that changed since it was indexed is not taken on the index's word
    changed = {**texts, "c.py": "something_else()\nprint(config)\n"}
    assert [line for _, line in index.followers(("config = load_settings(app_path)",), "me.py", changed.get)] \
        == ["    config.validate_schema(REGISTRY)"]
    tabbed = {"t.py": "value\t= compute_value(x)\nuse(value)\n"}  # a tab inside: the document has spaces there
    index.add("t.py", tabbed["t.py"])
    assert index.followers(("value    = compute_value(x)",), None, tabbed.get) == [("value    = compute_value(x)",
                                                                               "use(value)")]
    assert index.followers(("x = 1 + 2 + 3",), None, texts.get) == []  # no name to find its files by
    assert index.followers(("load()",), None, texts.get) == []  # too short to say what follows
    # a line followed by more than FOLLOWERS different lines says nothing of what comes next
    many = {f"m{i}.py": f"result = compute_total(items)\nvariant_{i}()\n" for i in range(FOLLOWERS + 1)}
    for path, text in many.items():
        index.add(path, text)
    assert index.followers(("result = compute_total(items)",), None, many.get) == []
    index.remove("m0.py")
    assert len(index.followers(("result = compute_total(items)",), None, many.get)) == FOLLOWERS
    assert all(path not in index.line_hashes for path in ("m0.py",))


def test_the_lines_after_a_line_copied_thousands_of_times_are_found_from_its_first_copies():
    """Every copy of the lines above was looked at, whatever their number: in a workspace of generated files each
    one line repeated 55,000 times, each new line above cost seconds on a thread holding the index's lock (the
    names of the answer's words wait for it on the server's loop; a keystroke took 1.5 s). The first COPIES_READ
    copies (a thousand) now say what follows them."""
    index = WorkspaceIndex(64 << 20)
    counted = counting(bytes, "find")  # a file's line hashes, counting the searches made in them
    texts = {f"gen{i}.py": "table = build_table(rows)\n" * 20_000 for i in range(20)}
    for path, text in texts.items():
        index.add(path, text)
        index.line_hashes[path] = counted(index.line_hashes[path])
    assert index.followers(("table = build_table(rows)",), None, texts.get) == [
        ("table = build_table(rows)", "table = build_table(rows)")]
    assert counted.calls < 2_000  # of 400,000 copies


HEADER = "# SPDX-License-Identifier: Apache-2.0 OR MIT"


def test_the_first_line_most_files_start_with_is_the_header():
    index = WorkspaceIndex(1 << 20)
    texts = {f"m{i}.py": f"{HEADER}\n\nvalue_{i} = {i}\n" for i in range(FIRST_LINE_FILES)}
    texts.update({"tabs.py": f"{HEADER}  \r\nx = 1\r\n", "doc.py": '"""A module."""\n', "new.py": ""})
    for path, text in texts.items():
        index.add(path, text)
    assert index.common_first_line("new.py", texts.get) == HEADER
    assert index.common_first_line("m0.py", {**texts, "m1.py": "changed()\n"}.get) == HEADER  # another holder
    unread = {**texts, **{f"m{i}.py": "changed()\n" for i in range(FIRST_LINE_FILES)}, "tabs.py": ""}
    assert index.common_first_line("new.py", unread.get) is None  # no file still starts with it
    for i in range(FIRST_LINE_FILES + 1):  # now no line is the first line of more than half of them
        index.add(f"other{i}.py", f"import os{i}\n")
    assert index.common_first_line("new.py", texts.get) is None
    few = WorkspaceIndex(1 << 20)
    for path in ("a.py", "b.py"):
        few.add(path, HEADER + "\n")
    assert few.common_first_line(None, lambda path: HEADER + "\n") is None  # two files make no convention
    blank = WorkspaceIndex(1 << 20)
    for i in range(4):
        blank.add(f"b{i}.py", f"\nimport os{i}\n")
    assert blank.common_first_line(None, lambda path: "\nimport os\n") is None  # a blank line is no header


def test_the_header_comes_first_only_on_a_documents_first_line():
    assert header_line("", "", HEADER) == HEADER
    assert header_line("", "# SPDX", HEADER) == HEADER
    assert header_line("", "import", HEADER) is None  # typed otherwise
    assert header_line("import os\n", "", HEADER) is None  # not the first line
    assert header_line("", "", HEADER, next_line=HEADER) is None  # the document has it already
    assert header_line("", HEADER, HEADER) is None  # nothing left to add
    assert header_line("", "", None) is None
    assert header_line("", "", "# " + "x" * MAX_LINE_CHARS) is None  # minified or data, not a header


@pytest.mark.parametrize("on", [True, False])
def test_a_new_file_starts_with_the_header_the_other_files_start_with(tmp_path: Path, on: bool):
    for i in range(3):
        (tmp_path / f"part{i}.py").write_text(f"{HEADER}\n\n\ndef part_{i}():\n    return {i}\n")
    with _server(tmp_path, workspaceContext=on) as client:
        time.sleep(0.5)  # the index is built on a thread
        uri = (tmp_path / "new.py").as_uri()
        client.open(uri, "")
        items = client.completion(uri, 0, 0)["result"]["items"]
        lines = [item["textEdit"]["newText"] for item in items]
        if on:
            assert lines and lines[0] == HEADER, lines
            assert items[0]["detail"] == "completer · a line of another file in the workspace"
        else:
            assert HEADER not in lines, lines
        client.change(uri, 2, (0, 0), (0, 0), "# SP")
        lines = [item["textEdit"]["newText"] for item in client.completion(uri, 0, 4)["result"]["items"]]
        assert (lines[:1] == [HEADER]) == on, lines


def test_the_lines_after_several_lines_are_found_where_copies_of_all_of_them_stand():
    index = WorkspaceIndex(1 << 20)
    texts = {"a.py": "def a():\n    session.close(\n        force)\n    log_closed(session)\n",
             "b.py": "session.close(\n    force)\nsession.open()\n",  # the same two lines, at other depths
             "c.py": "session.close(\nother)\nnot_this()\n",  # only the first of them
             "d.py": "import payments_core\n\nCURRENCY = 'EUR'\n"}
    for path, text in texts.items():
        index.add(path, text)
    assert sorted(index.followers(("session.close(", "force)"), None, texts.get)) == [
        ("    session.close(", "    log_closed(session)"), ("session.close(", "session.open()")]
    assert index.followers(("import payments_core", ""), None, texts.get) == [("import payments_core",
                                                                              "CURRENCY = 'EUR'")]
    assert index.followers(("session.open()", "x"), None, texts.get) == []  # no copy with a line after it


def test_the_line_hashes_count_against_the_budget():
    text = "".join(f"value_{i} = compute(value_{i - 1})\n" for i in range(1, 400))
    with_hashes = WorkspaceIndex(1 << 30)
    with_hashes.add("a.py", text)
    assert with_hashes.costs["a.py"] >= 8 * 400  # a hash per line
    small = WorkspaceIndex(with_hashes.costs["a.py"] - 1)
    assert not small.add("a.py", text) and small.nbytes == 0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "registry.py").write_text(OTHER_FILE)  # never opened
    (tmp_path / "install.py").write_text(BESIDE_OTHER_FILE)
    return tmp_path


@pytest.mark.parametrize("on", [True, False])
def test_a_line_only_another_file_holds_comes_from_the_index(project: Path, on: bool):
    with _server(project, workspaceContext=on) as client:
        time.sleep(0.5)  # the index is built on a thread; two files take milliseconds
        uri = (project / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        assert (FROM_OTHER_FILE in _lines(client, uri)) == on


def _notebook(cells: list[tuple[str, str]], language: str | None = "python", outputs: str = "") -> str:
    """A Jupyter notebook's JSON: (cell type, source) each, the source as Jupyter writes it (a list of lines)."""
    import json

    return json.dumps({
        "cells": [{"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True),
                   **({"outputs": [{"output_type": "stream", "name": "stdout", "text": [outputs]}],
                       "execution_count": 1} if kind == "code" else {})} for kind, source in cells],
        "metadata": {"language_info": {"name": language}} if language else {}, "nbformat": 4, "nbformat_minor": 5})


def test_a_notebooks_code_cells_are_read_as_its_text():
    from lsp.workspace import notebook_code

    text = _notebook([("markdown", "# Title\nfrobnicate"), ("code", "import os\n\nx = 1\n"), ("code", "  \n"),
                      ("code", "def f():\n    return x")])
    assert notebook_code(text) == "import os\n\nx = 1\n\ndef f():\n    return x\n"
    assert notebook_code(_notebook([("code", "x = 1")], language="julia")) is None  # another kernel's language
    assert notebook_code(_notebook([("code", "x = 1")], language=None)) == "x = 1\n"  # Jupyter's default: Python
    assert notebook_code(_notebook([("markdown", "only prose")])) == ""
    assert notebook_code("{not json") is None and notebook_code('["a list"]') is None
    assert notebook_code('{"cells": [{"cell_type": "code", "source": [1, 2]}, 7]}') == ""  # odd cells pass over


def test_a_notebook_is_read_past_the_size_of_a_source_file_for_its_outputs(tmp_path: Path):
    path = tmp_path / "big.ipynb"
    path.write_text(_notebook([("code", "total = compute()\n")], outputs="x" * (MAX_FILE_BYTES + 10)))
    assert read_source(path) == "total = compute()\n"


def test_a_notebook_unchanged_on_disk_is_not_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A lookup reads its files again at each new line (snippets, the lines after the line above): a notebook's
    outputs made each read parse megabytes of JSON, holding the interpreter from the event loop for tens of
    milliseconds, for the same few lines of code."""
    import os

    import lsp.workspace as workspace

    parsed: list[str] = []
    monkeypatch.setattr(workspace, "notebook_code", lambda text: parsed.append(text) or "x = 1\n")
    path = tmp_path / "big.ipynb"
    path.write_text(_notebook([("code", "x = 1\n")], outputs="x" * 1000))
    assert read_source(path) == read_source(path) == "x = 1\n" and len(parsed) == 1
    path.write_text(_notebook([("code", "y = 2\n")], outputs="x" * 999))  # changed: read again
    os.utime(path, ns=(1, 1))
    read_source(path)
    assert len(parsed) == 2


@pytest.mark.parametrize("on", [True, False])
def test_a_line_only_a_notebook_of_the_workspace_holds_comes_from_the_index(tmp_path: Path, on: bool):
    (tmp_path / "setup.ipynb").write_text(_notebook([("markdown", "Registering"), ("code", OTHER_FILE)]))
    (tmp_path / "install.py").write_text(BESIDE_OTHER_FILE)
    with _server(tmp_path, workspaceContext=on) as client:
        time.sleep(0.5)  # the index is built on a thread; two files take milliseconds
        uri = (tmp_path / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        assert (FROM_OTHER_FILE in _lines(client, uri)) == on


def test_a_file_changed_on_disk_changes_the_next_suggestion(project: Path):
    with _server(project, workspaceContext=True) as client:
        time.sleep(0.5)
        uri = (project / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE in _lines(client, uri)
        (project / "registry.py").write_text(OTHER_FILE.replace("zq_alpha", "zq_alright"))
        client.notify("workspace/didChangeWatchedFiles",
                      {"changes": [{"uri": (project / "registry.py").as_uri(), "type": 2}]})
        time.sleep(0.3)  # the server indexes it again on a thread
        client.change(uri, 2, (4, BESIDE_OTHER_FILE_CURSOR[1]), (4, BESIDE_OTHER_FILE_CURSOR[1]), "r")
        cursor = (BESIDE_OTHER_FILE_CURSOR[0], BESIDE_OTHER_FILE_CURSOR[1] + 1)
        result = client.completion(uri, *cursor)["result"]
        assert any("handle_zq_alright" in item["textEdit"]["newText"] for item in result["items"]), result

        (project / "registry.py").unlink()
        client.notify("workspace/didChangeWatchedFiles",
                      {"changes": [{"uri": (project / "registry.py").as_uri(), "type": 3}]})
        time.sleep(0.3)
        fresh = (project / "again.py").as_uri()  # a document with no earlier answer to type through
        client.open(fresh, BESIDE_OTHER_FILE + "r")
        result = client.completion(fresh, *cursor)["result"]
        assert all("handle_zq_alright" not in item["textEdit"]["newText"] for item in result["items"]), result


@pytest.mark.parametrize("how", ["typed", "restored"])
def test_an_unsaved_file_open_in_the_editor_is_read_until_it_is_closed(tmp_path: Path, how: str):
    """A file the editor holds but the disk does not (new, or with edits a restart restored) is indexed from the
    editor's text once typing pauses; closed unsaved, it is gone. The document's repeats read no other open file
    here (`openFiles` 0, as when more files are open than they read), so only the index can bring its line."""
    (tmp_path / "install.py").write_text(BESIDE_OTHER_FILE)
    with _server(tmp_path, workspaceContext=True, openFiles=0) as client:
        time.sleep(0.5)
        unsaved = (tmp_path / "registry.py").as_uri()  # not on disk
        if how == "typed":
            client.open(unsaved, "")
            client.change(unsaved, 2, (0, 0), (0, 0), OTHER_FILE)
        else:
            client.open(unsaved, OTHER_FILE)
        time.sleep(EDIT_INDEX_DELAY + 0.5)  # a pause in typing, then the index reads the editor's text on a thread
        uri = (tmp_path / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE in _lines(client, uri)

        client.notify("textDocument/didClose", {"textDocument": {"uri": unsaved}})
        time.sleep(0.3)
        fresh = (tmp_path / "again.py").as_uri()  # a document with no earlier answer to type through
        client.open(fresh, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE not in _lines(client, fresh)


def test_an_index_built_anew_reads_the_open_documents_unsaved_text_again(tmp_path: Path):
    """A settings change (the memory budget, the languages a newly loaded model writes) builds the index anew from
    the disk: a file open unsaved was left out of it until typed in again."""
    (tmp_path / "install.py").write_text(BESIDE_OTHER_FILE)
    with _server(tmp_path, workspaceContext=True, openFiles=0) as client:
        time.sleep(0.5)
        client.open((tmp_path / "registry.py").as_uri(), OTHER_FILE)  # not on disk
        time.sleep(EDIT_INDEX_DELAY + 0.5)
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {
            "workspaceContext": True, "openFiles": 0, "workspaceMemoryMb": 64}}})
        time.sleep(EDIT_INDEX_DELAY + 0.5)
        uri = (tmp_path / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE in _lines(client, uri)


async def test_a_documents_unsaved_texts_reach_the_index_in_the_order_typed(tmp_path: Path, monkeypatch):
    """A read of a document's unsaved text still running at the next pause in typing (a large file, a busy thread
    pool) is not raced by the next one: it ended last, and put the older text back in the index."""
    import lsp.server

    monkeypatch.setattr(lsp.server, "EDIT_INDEX_DELAY", 0.01)
    root = tmp_path.resolve()
    server = CompleterServer()
    server.repository = files = _index(root)
    edited = files.edited

    def slow_for_the_older(path: Path, text: str) -> None:
        if "older_unsaved_name" in text:
            time.sleep(0.3)
        edited(path, text)

    files.edited = slow_for_the_older  # type: ignore[method-assign]
    uri = (root / "doc.py").as_uri()
    server.documents.open(uri, "python", 1, "older_unsaved_name = 1\n")
    server.workspace_document_edited(uri)
    await asyncio.sleep(0.05)  # its read runs
    server.documents.change(uri, 2, [(None, "newer_unsaved_name = 2\n")])
    server.workspace_document_edited(uri)
    await asyncio.sleep(0.6)
    names = files.names_elsewhere(root / "other.py")
    assert names("newer_unsaved_name") and not names("older_unsaved_name")
    files.stop()


async def test_a_document_grown_past_the_index_size_is_left_out_without_joining_its_text(tmp_path: Path, monkeypatch):
    """A document typed in past MAX_FILE_BYTES is left out of the index, as such a file on disk, and its lines are
    not joined into one text at each pause in typing: on the event loop, that held every request behind it (half a
    second for 50 MB). A small document's text is still read."""
    import lsp.server
    from lsp.documents import Document

    monkeypatch.setattr(lsp.server, "EDIT_INDEX_DELAY", 0.01)
    root = tmp_path.resolve()
    (root / "big.py").write_text("disk_saved_name = 1\n")
    server = CompleterServer()
    server.repository = files = _index(root)
    joined: list[int] = []
    text = Document.text
    monkeypatch.setattr(Document, "text", lambda doc: joined.append(len(doc.lines)) or text(doc))
    names = files.names_elsewhere(root / "other.py")
    assert names("disk_saved_name")
    big = (root / "big.py").as_uri()
    server.documents.open(big, "python", 1, "grown_name = 1\n" + "x = 1\n" * (MAX_FILE_BYTES // 6))
    server.workspace_document_edited(big)
    small = (root / "small.py").as_uri()
    server.documents.open(small, "python", 1, "unsaved_small_name = 1\n")
    server.workspace_document_edited(small)
    await _settled(server)
    assert not names("disk_saved_name") and not names("grown_name") and names("unsaved_small_name")
    assert joined == [2], joined  # the small document's lines only
    files.stop()


async def _settled(server: CompleterServer) -> None:
    """Wait until no disk read, pause in typing or read of unsaved text is left to the server."""
    for _ in range(1000):
        reader = server._disk_reader
        if (reader is None or reader.done()) and not server._edit_timers and not server._edit_reads:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the server's reads of the workspace never settled")


@pytest.mark.parametrize("event", ["saved", "closed and opened again"])
async def test_a_disk_read_that_ends_last_never_replaces_the_editors_newer_text(tmp_path: Path, monkeypatch,
                                                                                event: str):
    """A disk read of a file (didSave of the open document, or didClose before it is opened again) held up on its
    thread while the editor's newer text is read for the index: once both ended, the index holds the editor's text;
    once the document closes, the disk's."""
    import lsp.server

    monkeypatch.setattr(lsp.server, "EDIT_INDEX_DELAY", 0.01)
    root = tmp_path.resolve()
    (root / "doc.py").write_text("disk_saved_name = 1\n")
    server = CompleterServer()
    server.repository = files = _index(root)
    disk_read_may_end, update_all = threading.Event(), files.update_all

    def held_up(paths: list[Path]) -> None:
        assert disk_read_may_end.wait(10)
        update_all(paths)

    files.update_all = held_up  # type: ignore[method-assign]
    pause_noticed = asyncio.Event()
    index_edited = server._index_edited

    def noticing(uri: str) -> None:
        pause_noticed.set()
        index_edited(uri)

    server._index_edited = noticing  # type: ignore[method-assign]
    uri = (root / "doc.py").as_uri()
    server.documents.open(uri, "python", 1, "disk_saved_name = 1\n")
    if event == "saved":
        server.workspace_file_changed(uri)
        server.documents.change(uri, 2, [(None, "newer_unsaved_name = 2\n")])
    else:
        server.documents.close(uri)
        server.workspace_file_changed(uri)
        server.documents.open(uri, "python", 3, "newer_unsaved_name = 2\n")
    try:
        server.workspace_document_edited(uri)
        await asyncio.wait_for(pause_noticed.wait(), 10)
        if uri in server._edit_reads:  # a read of the editor's text that does not wait for the disk's ends first
            await server._edit_reads[uri]
    finally:
        disk_read_may_end.set()
    await _settled(server)
    names = files.names_elsewhere(root / "other.py")
    assert names("newer_unsaved_name") and not names("disk_saved_name")

    server.documents.close(uri)
    server.workspace_file_changed(uri)
    await _settled(server)
    assert names("disk_saved_name") and not names("newer_unsaved_name")
    files.stop()


FOLLOWED = "    session = open_vault_session(vault_path)\n"
FOLLOWING = "    session.unseal_with_quorum(keyholders, threshold=3)"


@pytest.mark.parametrize("on", [True, False])
def test_the_one_line_that_follows_the_line_above_elsewhere_comes_first(tmp_path: Path, on: bool):
    """Another file holds the line above the cursor, and after it always the same line: at a line start that
    line comes first, and still while the user types it; with the index off it is nowhere."""
    (tmp_path / "vault.py").write_text(f"def unseal(vault_path, keyholders):\n{FOLLOWED}{FOLLOWING}\n"
                                       "    return session\n")
    text = f"import vault\n\n\ndef rotate(vault_path, keyholders):\n{FOLLOWED}    "
    with _server(tmp_path, workspaceContext=on) as client:
        time.sleep(0.5)
        uri = (tmp_path / "rotate.py").as_uri()
        client.open(uri, text)
        current = "    "
        for version, typed in enumerate(("", "se", "session.unseal"), start=2):
            client.change(uri, version, (5, 0), (5, len(current)), "    " + typed)
            current = "    " + typed
            items = client.completion(uri, 5, 4 + len(typed))["result"]["items"]
            lines = [item["textEdit"]["newText"] for item in items]
            if on:
                assert lines and lines[0] == FOLLOWING, (typed, lines)
                assert items[0]["detail"] == "completer · a line of another file in the workspace"
            else:
                assert FOLLOWING not in lines, (typed, lines)


def _index_info(client: RawClient, settled: Callable[[dict], bool]) -> dict:
    """completer/info's workspace_index once `settled` says it is as expected (or fail after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        found = client.request("completer/info")["result"]["server"]["workspace_index"]
        if found is not None and settled(found) and not found["building"]:
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.05)


def test_workspace_folders_added_and_removed_are_indexed_and_dropped(tmp_path: Path):
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    (there / "vault.py").write_text(f"def unseal(vault_path, keyholders):\n{FOLLOWED}{FOLLOWING}\n")
    text = f"import vault\n\n\ndef rotate(vault_path, keyholders):\n{FOLLOWED}    "
    folder = {"uri": there.as_uri(), "name": "there"}
    with _server(here) as client:
        uri = (here / "rotate.py").as_uri()
        client.open(uri, text)
        _index_info(client, lambda index: index["folders"] == [str(here.resolve())])
        assert FOLLOWING not in _lines_at(client, uri, 5, 4)
        client.notify("workspace/didChangeWorkspaceFolders", {"event": {"added": [folder], "removed": []}})
        index = _index_info(client, lambda index: len(index["folders"]) == 2)
        assert index["files"] == 1  # vault.py: the open rotate.py is not on disk
        client.change(uri, 2, (5, 4), (5, 4), "s")
        assert _lines_at(client, uri, 5, 5)[:1] == [FOLLOWING]
        client.notify("workspace/didChangeWorkspaceFolders", {"event": {"added": [], "removed": [folder]}})
        _index_info(client, lambda index: len(index["folders"]) == 1)
        fresh = (here / "again.py").as_uri()  # a document with no earlier answer to type through
        client.open(fresh, text + "se")
        assert FOLLOWING not in _lines_at(client, fresh, 5, 6)


def test_a_new_memory_budget_builds_the_index_anew(project: Path):
    with _server(project) as client:
        assert _index_info(client, lambda index: True)["budget_mb"] == 128
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"workspaceMemoryMb": 1}}})
        index = _index_info(client, lambda index: index["budget_mb"] == 1)
        assert index["files"] == 2 and 0 < index["megabytes"] <= 1


def _lines_at(client: RawClient, uri: str, line: int, column: int) -> list[str]:
    return [item["textEdit"]["newText"] for item in client.completion(uri, line, column)["result"]["items"]]


def test_indexing_a_large_folder_never_leaves_a_request_unanswered(tmp_path: Path):
    for module in range(300):
        (tmp_path / f"m{module}.py").write_text("".join(f"def f_{module}_{i}(): return {i}\n" for i in range(200)))
    (tmp_path / "install.py").write_text(BESIDE_OTHER_FILE)
    with _server(tmp_path, workspaceContext=True) as client:
        uri = (tmp_path / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        for _ in range(5):  # while the index is being built
            assert "result" in client.completion(uri, *BESIDE_OTHER_FILE_CURSOR, timeout=30)
        deleter = threading.Thread(target=shutil.rmtree, args=(tmp_path,))
        deleter.start()
        assert "result" in client.completion(uri, *BESIDE_OTHER_FILE_CURSOR, timeout=30)
        deleter.join()


def test_events_follow_the_walks_rules_and_keep_the_index_true_to_the_disk(tmp_path: Path):
    """An event indexes only what the walk would read; a deleted folder takes its files along; a file that grew
    past the limit leaves the index; a symlinked root and a nested root change nothing."""
    real = tmp_path / "real"
    (real / "pkg").mkdir(parents=True)
    (real / ".gitignore").write_text("generated/\nsecret.py\n")
    for i in range(3):
        (real / "pkg" / f"m{i}.py").write_text(f"PKG_NAME_{i} = 1\n")
    (tmp_path / "link").symlink_to(real)
    files = WorkspaceFiles(8, ("python",))
    files.start([tmp_path / "link", tmp_path / "link" / "pkg"])  # symlinked, and a root nested in it
    assert files.done.wait(60) and files.roots == [real]
    for rel in ("generated/gen.py", "secret.py", ".venv/lib/dep.py"):
        (real / rel).parent.mkdir(parents=True, exist_ok=True)
        (real / rel).write_text("IGNORED = 1\n")
        files.update(tmp_path / "link" / rel)
    outside = tmp_path / "outside.py"
    outside.write_text("OUTSIDE = 1\n")
    (real / "out.py").symlink_to(outside)
    files.update(real / "out.py")
    assert sorted(Path(p).relative_to(real).as_posix() for p in files.index.files) == \
        ["pkg/m0.py", "pkg/m1.py", "pkg/m2.py"]
    (real / "big.py").write_text("BIG_OLD = 1\n")
    files.update(tmp_path / "link" / "big.py")
    assert str(real / "big.py") in files.index.files
    (real / "big.py").write_text("BIG_NEW = 1\n" + "#" * MAX_FILE_BYTES)
    files.update(real / "big.py")
    assert str(real / "big.py") not in files.index.files
    shutil.rmtree(real / "pkg")
    files.update(tmp_path / "link" / "pkg")  # one event for the folder
    assert not files.index.files and files.index.nbytes == 0
    (real / "me.py").write_text("def frobnicate(registry_thing):\n    return registry_thing\n")
    files.update(tmp_path / "link" / "me.py")
    own = files.snippets("file:///me", tmp_path / "link" / "me.py", "frobnicate(registry_thing)\n", lambda _: None)
    assert own == []  # the editor's path through the link is still the document's own file


def test_turning_the_setting_off_drops_the_index(project: Path):
    with _server(project, workspaceContext=True) as client:
        time.sleep(0.5)
        uri = (project / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE in _lines(client, uri)
        client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"workspaceContext": False}}})
        time.sleep(0.3)
        fresh = (project / "fresh.py").as_uri()
        client.open(fresh, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE not in _lines(client, fresh)


def test_the_server_asks_the_client_to_watch_the_indexed_files(project: Path):
    """Clients send workspace/didChangeWatchedFiles only for watchers the server registered."""
    client = RawClient(SERVER_CMD, env=server_env())
    try:
        client.request("initialize", {
            "processId": os.getpid(), "rootUri": project.as_uri(),
            "capabilities": {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}},
            "initializationOptions": {"completer": {"workspaceContext": True}}})
        client.notify("initialized", {})
        client.request("completer/info")
        deadline = time.monotonic() + 10
        while not any(r["method"] == "client/registerCapability" for r in client.server_requests):
            assert time.monotonic() < deadline, client.server_requests
            time.sleep(0.05)
        registration = next(r for r in client.server_requests
                            if r["method"] == "client/registerCapability")["params"]["registrations"][0]
        assert registration["method"] == "workspace/didChangeWatchedFiles"
        watchers = registration["registerOptions"]["watchers"]
        assert {w["globPattern"] for w in watchers} == {"**/*.py", "**/*.pyi", "**/*.pyw", "**/*.ipynb", "**/*",
                                                        "**/.gitignore"}
        # other languages' files indexed: the watchers follow, once (the same files again change nothing)
        for languages in (["go"], ["go"], ["python"]):
            client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {
                "enabledLanguages": languages}}})
            client.request("completer/info")
        deadline = time.monotonic() + 10
        while len([r for r in client.server_requests if r["method"] == "client/registerCapability"]) < 3:
            assert time.monotonic() < deadline, client.server_requests
            time.sleep(0.05)
        time.sleep(0.3)
        methods = [r["method"] for r in client.server_requests if "Capability" in r["method"]]
        assert methods == ["client/registerCapability", "client/unregisterCapability", "client/registerCapability",
                           "client/unregisterCapability", "client/registerCapability"], methods
        last = [r for r in client.server_requests if r["method"] == "client/registerCapability"][-1]
        assert {w["globPattern"] for w in last["params"]["registrations"][0]["registerOptions"]["watchers"]} \
            == {"**/*.py", "**/*.pyi", "**/*.pyw", "**/*.ipynb", "**/*", "**/.gitignore"}
    finally:
        client.close()


def _watcher_requests(client: RawClient, count: int) -> list[tuple[str, str]]:
    """The watcher (un)registrations the server sent, as (method, id), once it has sent `count` and nothing more
    for a moment (or fail after 10 s)."""
    def sent() -> list[tuple[str, str]]:
        return [(r["method"], (r["params"].get("registrations") or r["params"].get("unregisterations"))[0]["id"])
                for r in client.server_requests if "Capability" in r["method"]]

    deadline = time.monotonic() + 10
    while len(sent()) < count:
        assert time.monotonic() < deadline, sent()
        time.sleep(0.05)
    time.sleep(0.3)
    return sent()


def test_the_watchers_go_with_the_index_and_come_back_once_with_it(tmp_path: Path):
    """workspaceContext turned off, or the last folder closed, drops the file watchers with the index: they stayed
    registered, and the client went on watching the whole folder and sending events no index read. Turned on again,
    one set is registered, under a new id."""
    here = tmp_path / "here"
    here.mkdir()
    folder = {"uri": here.as_uri(), "name": "here"}
    client = RawClient(SERVER_CMD, env=server_env())
    try:
        client.request("initialize", {
            "processId": os.getpid(), "workspaceFolders": [folder],
            "capabilities": {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}},
            "initializationOptions": {"completer": {"workspaceContext": True}}})
        client.notify("initialized", {})
        [(_, first)] = _watcher_requests(client, 1)
        for on in (False, True):
            client.notify("workspace/didChangeConfiguration", {"settings": {"completer": {"workspaceContext": on}}})
            _watcher_requests(client, 2 if not on else 3)
        client.notify("workspace/didChangeWorkspaceFolders", {"event": {"added": [], "removed": [folder]}})
        sent = _watcher_requests(client, 4)
        second = sent[2][1]
        assert sent == [("client/registerCapability", first), ("client/unregisterCapability", first),
                        ("client/registerCapability", second), ("client/unregisterCapability", second)], sent
        assert second != first
    finally:
        client.close()


def _as_a_client_would_send(client: RawClient, changes: list[tuple[Path, int]]) -> None:
    """workspace/didChangeWatchedFiles for those of `changes` (path, FileChangeType) that a watcher the server
    registered matches, by its glob and its kind, as a client filters them."""
    [registration] = [r["params"]["registrations"][0] for r in client.server_requests
                      if r["method"] == "client/registerCapability"]
    watchers = registration["registerOptions"]["watchers"]
    kinds = {1: 1, 2: 2, 3: 4}  # FileChangeType: the WatchKind bit it needs
    sent = [{"uri": path.as_uri(), "type": change} for path, change in changes
            if any(PurePosixPath(path).match(w["globPattern"]) and w.get("kind", 7) & kinds[change] for w in watchers)]
    if sent:
        client.notify("workspace/didChangeWatchedFiles", {"changes": sent})


def test_the_files_an_event_batch_reads_again_move_the_generation_once(tmp_path: Path):
    """Each file read again moved the index's generation, and a request after a move waits for snippets picked anew
    (SNIPPETS_WAIT): through a branch switch's events, or a folder read again after its .gitignore was saved, every
    keystroke waited (eight in a row at 140-350 ms for 20,000 files). Now a batch moves it once, at its end."""
    root = tmp_path.resolve()
    for i in range(30):
        (root / f"m{i}.py").write_text(f"OLD_NAME_{i} = 1\n")
    files = _index(root)
    for i in range(30):
        (root / f"m{i}.py").write_text(f"NEW_NAME_{i} = 1\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "added.py").write_text("ADDED_NAME = 1\n")
    before = files.generation
    files.update_all([*(root / f"m{i}.py" for i in range(30)), root / "pkg"])
    assert files.generation == before + 1
    assert all(files.index.files[str(root / f"m{i}.py")] == (f"NEW_NAME_{i}",) for i in range(30))
    assert str(root / "pkg" / "added.py") in files.index.files


def test_a_file_an_event_batch_takes_out_moves_the_generation_at_once(tmp_path: Path):
    """A file read again that is no longer one to index (binary now) is taken out, and the generation moves then,
    not at the batch's end: snippets picked before hold its old text, which is not offered meanwhile."""
    root = tmp_path.resolve()
    for i in range(3):
        (root / f"m{i}.py").write_text(f"OLD_NAME_{i} = 1\n")
    files = _index(root)
    (root / "m0.py").write_bytes(b"\x00" * 4096)
    moves: list[int] = []
    update = files.update

    def watched(path: Path) -> None:
        update(path)
        moves.append(files.generation)

    files.update = watched  # type: ignore[method-assign]
    before = files.generation
    files.update_all([root / "m0.py", root / "m1.py", root / "m2.py"])
    assert str(root / "m0.py") not in files.index.files
    assert moves[0] == before + 1 and moves[1:] == [before + 1, before + 1]  # at once, then not until the end
    assert files.generation == before + 2


def test_a_folder_renamed_or_deleted_takes_its_files_along(tmp_path: Path):
    """VS Code folds the events of a folder's files into one for the folder when it is deleted or renamed (a branch
    switch, `rm -rf`, a rename in its explorer), and that path matched none of the watchers for the indexed files:
    the old files stayed in the index and the renamed ones were never read, until the server restarted."""
    root = tmp_path.resolve()
    (root / "pkg").mkdir()
    (root / "pkg" / "registry.py").write_text(OTHER_FILE)
    (root / "install.py").write_text(BESIDE_OTHER_FILE)
    client = RawClient(SERVER_CMD, env=server_env())
    try:
        client.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(),
            "capabilities": {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}},
            "initializationOptions": {"completer": {"workspaceContext": True}}})
        client.notify("initialized", {})
        _watcher_requests(client, 1)
        _index_info(client, lambda index: index["files"] == 2)
        (root / "pkg").rename(root / "lib")
        _as_a_client_would_send(client, [(root / "pkg", 3), (root / "lib", 1)])
        deadline = time.monotonic() + 10
        for attempt in itertools.count():  # the events are read on a thread: ask until lib/registry.py answers
            fresh = (root / f"fresh{attempt}.py").as_uri()  # a document with no earlier answer to type through
            client.open(fresh, BESIDE_OTHER_FILE)
            if FROM_OTHER_FILE in _lines(client, fresh):
                break
            assert time.monotonic() < deadline, "the renamed folder's file was never read"
            time.sleep(0.1)
        shutil.rmtree(root / "lib")
        _as_a_client_would_send(client, [(root / "lib", 3)])
        assert _index_info(client, lambda index: index["files"] == 1)["files"] == 1
        (root / "node_modules" / "dep").mkdir(parents=True)  # created: a folder the walk skips is not read
        (root / "node_modules" / "dep" / "vendored.py").write_text(OTHER_FILE)
        _as_a_client_would_send(client, [(root / "node_modules", 1)])
        (root / "later.py").write_text("LATER = 1\n")  # an event read after it: once it is in, the first was read
        _as_a_client_would_send(client, [(root / "later.py", 1)])
        assert _index_info(client, lambda index: index["files"] >= 2)["files"] == 2  # later.py, not vendored.py
    finally:
        client.close()


def test_the_first_folder_added_later_is_watched(tmp_path: Path):
    client = RawClient(SERVER_CMD, env=server_env())
    try:
        client.request("initialize", {"processId": os.getpid(), "rootUri": None,
                                      "capabilities": {"workspace": {"didChangeWatchedFiles": {
                                          "dynamicRegistration": True}}}})
        client.notify("initialized", {})
        client.notify("workspace/didChangeWorkspaceFolders", {"event": {
            "added": [{"uri": tmp_path.as_uri(), "name": "later"}], "removed": []}})
        deadline = time.monotonic() + 10
        while not any(r["method"] == "client/registerCapability" for r in client.server_requests):
            assert time.monotonic() < deadline, client.server_requests
            time.sleep(0.05)
    finally:
        client.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts this process's descriptors in /proc")
def test_reading_what_is_no_file_keeps_no_descriptor(tmp_path: Path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "folder.py").mkdir()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        assert read_source(tmp_path / "pipe.py") is None and read_source(tmp_path / "folder.py") is None
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_loop_of_symlinks_in_the_folder_is_skipped_not_the_rest_of_it(project: Path):
    """A link to itself, or two links to each other (a botched `ln -s`), are read as what they are, no file: the
    first one the walk met ended it (pathlib's RuntimeError "Symlink loop"), and every file after it in the walk's
    order was left out of the index, here the only one holding the line."""
    (project / "loop_a.py").symlink_to(project / "loop_b.py")
    (project / "loop_b.py").symlink_to(project / "loop_a.py")
    (project / "itself.py").symlink_to(project / "itself.py")
    with _server(project, workspaceContext=True) as client:
        assert _index_info(client, lambda index: True)["files"] == 2
        uri = (project / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE in _lines(client, uri)
        client.open((project / "loop_a.py").as_uri(), "OPENED_LOOP = 1\n")  # its unsaved text: nowhere to save it
        time.sleep(EDIT_INDEX_DELAY + 0.3)
        assert _index_info(client, lambda index: True)["files"] == 2


def _folder_named_in_latin1(tmp_path: Path) -> Path:
    """A folder `café` named in Latin-1 bytes, as a Linux file system keeps it (macOS's refuses such names)."""
    root = Path(os.fsdecode(os.fsencode(tmp_path.resolve()) + b"/caf\xe9"))
    try:
        root.mkdir()
    except OSError as exc:
        pytest.skip(f"this file system takes no name that is not UTF-8 ({exc})")
    return root


def test_a_folder_and_a_file_named_in_bytes_that_are_no_utf8_are_indexed_and_followed(tmp_path: Path):
    """A URI percent-escapes a file name's bytes (`caf%E9`); the server read the bytes that are no UTF-8 as U+FFFD,
    a path no file has: a workspace folder so named was never indexed, and an event for a file so named (deleted)
    never reached the index, whose entry stayed."""
    root = _folder_named_in_latin1(tmp_path)
    (root / "install.py").write_text(BESIDE_OTHER_FILE)
    legacy = root / os.fsdecode(b"regis\xe9try.py")
    legacy.write_text(OTHER_FILE)
    with _server(root, workspaceContext=True) as client:
        assert _index_info(client, lambda index: True)["files"] == 2
        uri = (root / "install.py").as_uri()
        client.open(uri, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE in _lines(client, uri)
        legacy.unlink()
        client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": legacy.as_uri(), "type": 3}]})
        _index_info(client, lambda index: index["files"] == 1)


def test_a_file_name_that_is_no_utf8_reaches_a_repository_prompt_as_text_a_tokenizer_takes(tmp_path: Path):
    """A Qwen2.5-Coder or StarCoder2 prompt lays the snippets out under their files' paths; a name in bytes that are
    no UTF-8 came as lone surrogates, which the tokenizer refuses (TypeError): no suggestion while it was picked."""
    import tokenizers

    from completer.repository import RepositoryContext, repository_head_ids

    root = _folder_named_in_latin1(tmp_path)
    legacy = root / os.fsdecode(b"regis\xe9try.py")
    legacy.write_text(OTHER_FILE)
    files = _index(root)
    [indexed] = files.index.files
    (name, path), snippet = files.place(root / "install.py"), files.place(Path(indexed), indexed=True)
    tokenizer = tokenizers.Tokenizer.from_file(str(REPO / "models" / "python-small" / "tokenizer.json"))
    context = RepositoryContext(name, path, ((snippet[1], OTHER_FILE),))
    assert repository_head_ids("qwen", context, 500, lambda text: tokenizer.encode(text).ids, (1, 2))
    assert (name, path, snippet) == ("caf\ufffd", "install.py", ("caf\ufffd", "regis\ufffdtry.py"))  # as editors show


def test_a_file_that_became_a_pipe_never_holds_a_request(tmp_path: Path):
    """An indexed file replaced by a FIFO (or anything whose read would wait): the lookup of the lines after the
    line above opens it without waiting and skips it, and every request is answered."""
    (tmp_path / "vault.py").write_text(f"def unseal(vault_path, keyholders):\n{FOLLOWED}{FOLLOWING}\n")
    with _server(tmp_path) as client:
        _index_info(client, lambda index: index["files"] == 1)
        (tmp_path / "vault.py").unlink()
        os.mkfifo(tmp_path / "vault.py")
        uri = (tmp_path / "rotate.py").as_uri()
        client.open(uri, f"import vault\n\n\ndef rotate(vault_path, keyholders):\n{FOLLOWED}    ")
        for _ in range(3):
            started = time.monotonic()
            lines = _lines_at(client, uri, 5, 4)
            assert time.monotonic() - started < 5 and FOLLOWING not in lines


def test_the_best_window_is_the_one_a_pass_over_every_line_finds():
    """LineNames.best_window counts a query's names per line from the lines each name is on; a plain pass over
    every line, scoring each window by the sum of its lines' shared names, finds the same window, for random
    files and queries, and a file kept between queries is read again once its text changes."""
    import random

    from completer.workspace import IDENTIFIER, SNIPPET_LINES, SNIPPET_STRIDE

    def plain(text: str, query: set[str]) -> str:
        lines = text.split("\n")
        if len(lines) <= SNIPPET_LINES:
            return text
        per_line = [len(set(IDENTIFIER.findall(line)) & query) for line in lines]
        starts = range(0, len(lines) - SNIPPET_LINES // 2, SNIPPET_STRIDE)
        best = max(starts, key=lambda s: (sum(per_line[s:s + SNIPPET_LINES]), -s))
        return "\n".join(lines[best:best + SNIPPET_LINES]) + "\n"

    rng = random.Random(5)
    words = [f"name_{i}" for i in range(40)]
    index = WorkspaceIndex(1 << 20)
    for trial in range(30):
        text = "\n".join(" ".join(rng.choices(words, k=rng.randint(0, 6))) for _ in range(rng.randint(20, 400)))
        query = set(rng.sample(words, rng.randint(1, 8)))
        assert best_window(text, query) == plain(text, query)
        assert index.windows(["kept.py"], query, lambda _: text) == [("kept.py", plain(text, query))]


def test_a_window_of_long_lines_is_cut_to_what_the_repeats_search():
    """A window was its sixty lines whatever their length: a generated file of long lines (or one minified line)
    went whole, megabytes with every request, to the worker, whose repeats search 16,384 characters of it. A
    window holds the whole lines of it that fit in SNIPPET_CHARS; a line longer than that is no snippet."""
    row = ", ".join(f"table_{i} = build(column_{i})" for i in range(200))  # 5,780 characters
    index = WorkspaceIndex(8 << 20)
    texts = {"rows.py": (row + "\n") * 45, "one.py": row * 200, "short.py": "x = build(column_1)\n" * 100}
    found = dict(index.windows(list(texts), {"table_1", "column_1"}, texts.get))
    assert found["rows.py"] == (row + "\n") * 2 and len(found["rows.py"]) <= 16_384
    assert "one.py" not in found  # one line of 1.1 MB
    assert found["short.py"] == "x = build(column_1)\n" * 60  # sixty short lines, as before


def test_a_file_kept_for_its_windows_holds_the_lines_of_the_names_asked_about_only():
    """Each of the LINE_INDEXES_KEPT files kept between picks held the lines of every name in it: 14 MB (and 0.2 s
    to build) for a megabyte of generated code, sixteen of them outside the index's memory budget. It holds the
    lines of the names a query asked about, found by searching the text for each, as IDENTIFIER reads names."""
    import tracemalloc

    from completer.workspace import IDENTIFIER, LineNames

    text = "".join(f"v{i} = f{i}(a{i}, shared_{i % 2})\n" for i in range(25_000))
    tracemalloc.start()
    try:
        names = LineNames(text)
        window = names.best_window({"v100", "f100", "shared_0", "a200"})
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert "\nv100 = f100(a100, shared_0)\n" in window and kept < 4_000_000
    tricky = "x1abc = abc_1(abc)\n2abc éabc abcd\n_abc 1_abc abc1 ab\n"
    by_line = [set(IDENTIFIER.findall(line)) for line in tricky.split("\n")]
    for name in ("abc", "abc_1", "x1abc", "_abc", "abc1", "abcd", "ab", "1_abc", "_1_abc"):
        assert LineNames(tricky).lines_holding(name) == [n for n, held in enumerate(by_line) if name in held], name


async def test_no_snippets_are_picked_after_the_search_for_a_document_closed_during_it(tmp_path: Path):
    """A new line's snippets are picked once the request's search is over; a document closed meanwhile has had
    its snippets forgotten, and picking them then would read files for it and keep them."""
    server = CompleterServer()
    server.settings = replace(server.settings, workspace_context=True)
    server.repository = _index(tmp_path)
    uri = (tmp_path / "doc.py").as_uri()
    server.documents.open(uri, "python", 1, "first = 1\nsecond = 2\n")
    assert await server.lookups.snippets(uri, "first = 1\n") == []
    assert await server.lookups.snippets(uri, "first = 1\nsecond = 2\n") == []  # the line before's, for now
    server.documents.close(uri)
    server.repository.forget(uri)
    server.lookups.pick_after_search(uri)
    assert uri not in server.lookups._picking_snippets and server.repository.latest(uri) is None
    server.documents.open(uri, "python", 2, "first = 1\nsecond = 2\n")
    assert await server.lookups.snippets(uri, "first = 1\n") == []
    assert await server.lookups.snippets(uri, "first = 1\nsecond = 2\n") == []
    server.lookups.pick_after_search(uri)
    assert uri in server.lookups._picking_snippets, "an open document's are picked"
    await server.lookups._picking_snippets[uri][1]


async def test_a_pick_that_ends_after_its_document_closed_keeps_nothing(tmp_path: Path):
    """Closing a document forgets its snippets; a pick still running then must not put them back."""
    server = CompleterServer()
    server.settings = replace(server.settings, workspace_context=True)
    server.repository = _index(tmp_path)
    uri = (tmp_path / "doc.py").as_uri()
    server.documents.open(uri, "python", 1, "first = 1\n")
    picking = server.lookups._pick_snippets(server.repository, uri, "first = 1\n")
    server.documents.close(uri)
    server.repository.forget(uri)
    await picking[1]
    await asyncio.sleep(0)  # the done callbacks
    assert server.repository.latest(uri) is None and uri not in server.lookups._picking_snippets


def test_the_build_waits_while_a_completion_request_is_in_flight(tmp_path: Path):
    """Building the index never takes a core from a search: it indexes between requests."""
    for i in range(30):
        (tmp_path / f"m{i}.py").write_text(f"def helper_{i}(value):\n    return value\n")
    files = WorkspaceFiles(8, ("python",))
    files.requests.started()
    files.start([tmp_path])
    time.sleep(0.5)
    assert not files.done.is_set() and len(files.index.files) == 0, "nothing indexed during the request"
    files.requests.started()  # a second one overlaps the first
    files.requests.ended()
    time.sleep(0.2)
    assert len(files.index.files) == 0, "one request is still in flight"
    files.requests.ended()
    assert files.done.wait(30) and len(files.index.files) == 30
    files.requests.ended()  # an unpaired end never goes below none
    files.requests.started()
    assert not files.requests.idle.is_set()
    files.requests.ended()
    files.stop()


async def test_an_index_built_anew_during_a_request_waits_for_it(tmp_path: Path):
    """The setting turned off and on while a search runs builds a new index: it waits for that request as the
    old one did, and starts once the request ends."""
    for i in range(30):
        (tmp_path / f"m{i}.py").write_text(f"def helper_{i}(value):\n    return value\n")
    server = CompleterServer()
    server._roots = [tmp_path]
    server.index_workspace()
    assert server.repository is not None and server.repository.done.wait(30)
    release = asyncio.Event()

    async def search(*args, **kwargs) -> dict:
        await release.wait()
        return {"result": {"suggestions": []}}

    server.searches.run = search  # type: ignore[method-assign]
    uri = (tmp_path / "doc.py").as_uri()
    server.documents.open(uri, "python", 1, "x = 1\n")
    request = asyncio.ensure_future(server.suggest(server.locate(uri, types.Position(line=1, character=0))))
    await asyncio.sleep(0.1)
    for on in (False, True):
        server.settings = replace(server.settings, workspace_context=on)
        server.index_workspace()
    rebuilt = server.repository
    await asyncio.sleep(0.7)
    assert len(rebuilt.index.files) == 0 and not rebuilt.done.is_set(), "built beside the search"
    release.set()
    assert await request == []
    assert await asyncio.to_thread(rebuilt.done.wait, 30) and len(rebuilt.index.files) == 30
    rebuilt.stop()


async def test_watchers_end_on_the_last_suffixes_when_changes_overlap(tmp_path: Path):
    """Two changes of the indexed files in quick succession, with a client slow to drop watchers (or refusing
    to): the registrations happen one at a time and the last one holds the suffixes indexed last."""
    from lsprotocol import types as lsp_types

    server = CompleterServer()
    server._client_capabilities = lsp_types.ClientCapabilities(workspace=lsp_types.WorkspaceClientCapabilities(
        did_change_watched_files=lsp_types.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True)))
    sent: list[tuple[str, object]] = []

    async def register(params):
        await asyncio.sleep(0.02)
        sent.append(("register", params.registrations[0]))

    async def unregister(params):
        await asyncio.sleep(0.05)
        sent.append(("unregister", params.unregisterations[0].id))
        raise RuntimeError("refused")

    server.client_register_capability_async = register
    server.client_unregister_capability_async = unregister
    server.repository = WorkspaceFiles(8, ("python",))
    await server.watch_workspace_files()
    server.repository = WorkspaceFiles(8, ("go",))
    first = asyncio.ensure_future(server.watch_workspace_files())
    await asyncio.sleep(0.01)
    server.repository = WorkspaceFiles(8, ("python",))
    await asyncio.gather(first, server.watch_workspace_files())
    registrations = [item for kind, item in sent if kind == "register"]
    last = registrations[-1]
    assert {w.glob_pattern for w in last.register_options.watchers} == \
        {"**/*.py", "**/*.pyi", "**/*.pyw", "**/*.ipynb", "**/*", "**/.gitignore"}
    assert len({r.id for r in registrations}) == len(registrations)  # a new id each time
    assert server._watching == (last.id, (".ipynb", ".py", ".pyi", ".pyw"))


def test_snippets_are_picked_again_only_when_the_names_above_change_enough(tmp_path: Path):
    """A new line that brings no new name (or few among many) keeps the snippets; one that changes more than a
    tenth of the names above the cursor picks them again, as does a change to the index."""
    (tmp_path / "other.py").write_text("".join(f"name_{i} = value_{i}\n" for i in range(40)))
    files = _index(tmp_path)
    picks: list[int] = []
    windows = files.index.windows
    files.index.windows = lambda *args: picks.append(1) or windows(*args)
    head = "".join(f"name_{i} = value_{i}\n" for i in range(20))  # 40 names
    files.snippets("file:///me.py", None, head, lambda _: None)
    files.snippets("file:///me.py", None, head + "print(name_3)\n", lambda _: None)  # no new name
    files.snippets("file:///me.py", None, head + "print(name_3)\nfresh_name = 1\n", lambda _: None)  # 1 of 41
    assert len(picks) == 1
    files.snippets("file:///me.py", None, head + "".join(f"new_{i} = 1\n" for i in range(5)), lambda _: None)
    assert len(picks) == 2  # 5 new names of 45: picked again
    files.update(tmp_path / "other.py")
    files.snippets("file:///me.py", None, head + "".join(f"new_{i} = 1\n" for i in range(5)), lambda _: None)
    assert len(picks) == 3  # the index changed


def test_the_budget_counts_the_index_as_it_is_after_any_updates():
    """A name's string is counted once, on whichever file holds it now: every file indexed again (a branch switch)
    and the files that brought names in removed leave the count where a fresh index of the same files puts it
    (it fell to a third when a re-indexed file paid a shared name's slot for the string it still held)."""
    texts = {f"m{i}.py": "".join(f"def shared_{i % 5}_{j}(arg): return unique_{i}_{j}\n" for j in range(50))
             for i in range(20)}
    index = WorkspaceIndex(1 << 30)
    for _ in range(2):
        for path, text in texts.items():
            assert index.add(path, text)
    for path in list(texts)[:7]:
        index.remove(path)
    fresh = WorkspaceIndex(1 << 30)
    for path in list(texts)[7:]:
        fresh.add(path, texts[path])
    assert index.nbytes == fresh.nbytes
    full = WorkspaceIndex(fresh.nbytes)
    for path in list(texts)[7:]:
        assert full.add(path, texts[path]) and full.add(path, texts[path])
    assert not full.add("new.py", "def brand_new_name(): return another_new_name\n")
    for path in list(texts):
        index.remove(path)
    assert index.nbytes == 0 and not index.postings


def test_a_file_is_read_for_names_outside_the_lock_a_requests_lookup_takes(tmp_path: Path, monkeypatch):
    """Finding a large file's names and hashing its lines takes tens of milliseconds; done under the index's lock,
    the answer's name lookup on the event loop (names_elsewhere) waited for it: 80 ms behind a 1 MB file."""
    import completer.workspace

    (tmp_path / "a.py").write_text("def frobnicate(registry_thing):\n    return registry_thing\n")
    files = _index(tmp_path)
    held = []
    real = completer.workspace.identifiers

    def spy(text: str) -> set[str]:
        held.append(files._lock.locked())
        return real(text)

    monkeypatch.setattr(completer.workspace, "identifiers", spy)
    files.update(tmp_path / "a.py")
    assert held == [False]
    assert files.names_elsewhere(tmp_path / "b.py")("frobnicate")


def test_an_event_for_a_linked_folder_reads_what_the_walk_reads(tmp_path: Path):
    """The walk follows no symlink to a folder; an event naming one walked through it: a link out of the workspace
    folder brought the outside's files in, a link to the folder itself a second copy of each file. A folder's event
    judges links by the workspace folder, as the walk does, not by the folder it names."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.py").write_text("OUTSIDE_NAME = 1\n")
    (root / "main.py").write_text("MAIN_NAME = 1\n")
    (root / "out").symlink_to(outside)
    (root / "again").symlink_to(root)
    (root / "pkg" / "main_link.py").symlink_to(root / "main.py")  # stays inside the workspace folder: read
    files = _index(root)
    walked = sorted(files.index.files)
    assert walked == [str(root.resolve() / "main.py"), str(root.resolve() / "pkg" / "main_link.py")]
    for name in ("out", "again", "pkg"):
        files.update(root / name)
    assert sorted(files.index.files) == walked


@pytest.mark.parametrize("ignores, kept", [
    ({".gitignore": "*.py\n", "sub/.gitignore": "!keep.py\n"}, ["sub/keep.py"]),  # the deeper file decides
    ({".gitignore": "gen/**\n!gen/keep.py\n"}, ["gen/keep.py", "main.py", "sub/drop.py", "sub/keep.py"]),
    ({".gitignore": "*\n!*/\n!*.py\n"}, ["gen/drop.py", "gen/keep.py", "main.py", "sub/drop.py", "sub/keep.py"]),
    ({".gitignore": "/sub/*\n!/sub/keep.py\n"}, ["gen/drop.py", "gen/keep.py", "main.py", "sub/keep.py"]),
    ({".gitignore": "gen/\n!gen/keep.py\n"}, ["main.py", "sub/drop.py", "sub/keep.py"]),  # no way back in
])
def test_gitignore_files_are_read_as_git_reads_them(tmp_path: Path, ignores: dict[str, str], kept: list[str]):
    """What `git status` lists, the walk and the events read: a `!` pattern in a subfolder's .gitignore takes back
    what a folder above ignores, and `gen/**` or `sub/*` ignore what is in a folder, not the folder, so that a
    `!` pattern for one file in it holds (each was left out), and `!*/` takes back the folders `*` ignores."""
    root = tmp_path.resolve()
    for name in ("main.py", "sub/keep.py", "sub/drop.py", "gen/keep.py", "gen/drop.py"):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(f"NAME_{name.replace('/', '_').replace('.', '_')} = 1\n")
    for name, text in ignores.items():
        (root / name).write_text(text)
    files = _index(root)
    assert sorted(Path(p).relative_to(root).as_posix() for p in files.index.files) == kept
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if files.readable(p)) == kept


@pytest.mark.skipif(shutil.which("git") is None, reason="compared with what git itself ignores")
def test_a_gitignore_line_that_is_no_pattern_matches_nothing_and_a_byte_order_mark_is_no_part_of_one(tmp_path: Path):
    """As git reads them: a Windows path's trailing backslash (`obj\\`), `!` alone or `[z-a]` match nothing and the
    other lines hold (a whole file refused once stopped the walk there: the files after it, in that folder and
    every folder after, were never indexed, nor any an event named), and Notepad's byte order mark is no part of
    the first pattern (its file was read: a secret the .gitignore kept out of the repository went to the model)."""
    root = tmp_path.resolve()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "app").mkdir()
    (root / "app" / ".gitignore").write_text("obj\\\n!\n[z-a].py\nscratch.py\n")
    (root / "keys").mkdir()
    (root / "keys" / ".gitignore").write_bytes("\ufeffprod.py\nstaging.py\n".encode())
    for name in ("app/main.py", "app/scratch.py", "keys/prod.py", "keys/staging.py", "keys/dev.py", "zz/last.py"):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(f"NAME_{name.replace('/', '_')[:-3]} = 1\n")
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-o", "--exclude-standard", "-z", "*.py"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    kept = sorted(name for name in listed if name)
    assert kept == ["app/main.py", "keys/dev.py", "zz/last.py"]  # what git itself ignores
    files = _index(root)
    assert sorted(Path(p).relative_to(root).as_posix() for p in files.index.files) == kept
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if files.readable(p)) == kept
    (root / "app" / "new.py").write_text("NAME_new = 1\n")
    files.update(root / "app" / "new.py")
    assert str(root / "app" / "new.py") in files.index.files


@pytest.mark.parametrize("how", ["saved in the editor", "changed on disk", "deleted on disk"])
def test_a_file_a_gitignore_comes_to_ignore_leaves_the_index(tmp_path: Path, how: str):
    """A .gitignore saved in the editor (VS Code syncs every file's document) or changed on disk (a watched file) is
    read again, and what it now ignores leaves the index: the file stayed there, its text offered to every other
    document, until the server restarted."""
    root = tmp_path.resolve()
    (root / "vault").mkdir()
    (root / "vault" / "registry.py").write_text(OTHER_FILE)
    (root / "vault" / "kept.py").write_text("NAME_KEPT = 1\n")
    (root / "vault" / ".gitignore").write_text("*.log\n")
    (root / "install.py").write_text(BESIDE_OTHER_FILE)
    with _server(root, workspaceContext=True) as client:
        _index_info(client, lambda index: index["files"] == 3)
        first = (root / "install.py").as_uri()
        client.open(first, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE in _lines(client, first)
        ignore = root / "vault" / ".gitignore"
        ignore.write_text("registry.py\n")
        if how == "deleted on disk":  # what the .gitignore ignored comes in: the one above ignores registry.py
            (root / ".gitignore").write_text("vault/registry.py\n")
            (root / "vault" / "kept.py").write_text("NAME_KEPT = 2\n")
            ignore.write_text("kept.py\n")
            client.notify("workspace/didChangeWatchedFiles", {"changes": [
                {"uri": (root / ".gitignore").as_uri(), "type": 1}, {"uri": ignore.as_uri(), "type": 2}]})
            _index_info(client, lambda index: index["files"] == 1)  # install.py
            ignore.unlink()
            client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": ignore.as_uri(), "type": 3}]})
        elif how == "saved in the editor":
            client.open(ignore.as_uri(), "*.log\n", language_id="ignore")
            client.change(ignore.as_uri(), 2, (0, 0), (0, 5), "registry.py")
            client.notify("textDocument/didSave", {"textDocument": {"uri": ignore.as_uri()}})
        else:
            client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": ignore.as_uri(), "type": 2}]})
        _index_info(client, lambda index: index["files"] == 2)  # install.py and kept.py
        fresh = (root / "again.py").as_uri()  # a document with no earlier answer to type through
        client.open(fresh, BESIDE_OTHER_FILE)
        assert FROM_OTHER_FILE not in _lines(client, fresh)


def test_a_file_is_asked_of_the_gitignore_files_on_its_way_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Each file was asked of every .gitignore the walk had met, in folders long left behind (a thousand folders with
    one each took 107 s to index, not 4); and a folder's event read every .gitignore from the top again for each of
    its files (a .gitignore saved at the top of 5,000 files took 17 s). The rules are git's all the same: a sibling
    folder's .gitignore decides nothing here."""
    root = tmp_path.resolve()
    for i in range(40):
        (root / f"pkg{i:02d}" / "sub").mkdir(parents=True)
        (root / f"pkg{i:02d}" / ".gitignore").write_text(f"own_{i}.py\n")
        for name in (f"own_{i}.py", f"own_{(i + 1) % 40}.py", "sub/kept.py"):
            (root / f"pkg{i:02d}" / name).write_text(f"NAME_{i} = 1\n")
    asked, reads = [], []
    ignored, read = lsp_workspace._Ignores.ignored, lsp_workspace._Ignores._read
    monkeypatch.setattr(lsp_workspace._Ignores, "ignored", lambda self, path, is_dir: (
        asked.append(len(self.specs)), ignored(self, path, is_dir))[1])
    monkeypatch.setattr(lsp_workspace._Ignores, "_read", lambda self, folder, patterns, **follow: (
        reads.append(patterns), read(self, folder, patterns, **follow))[1])
    files = _index(root)
    kept = sorted(f"pkg{i:02d}/{name}" for i in range(40) for name in (f"own_{(i + 1) % 40}.py", "sub/kept.py"))
    assert sorted(Path(p).relative_to(root).as_posix() for p in files.index.files) == kept
    assert max(asked) == 1  # pkgNN's own: none above it, none of the folders before it
    reads.clear()
    (root / ".gitignore").write_text("sub/\n")
    files.update(root / ".gitignore")
    assert sorted(Path(p).relative_to(root).as_posix() for p in files.index.files) == \
        [name for name in kept if not name.endswith("sub/kept.py")]
    assert len(reads) <= 2 * (1 + 40)  # each folder's .gitignore and info/exclude looked for once


def test_a_gitignore_that_is_no_regular_file_never_holds_the_server(tmp_path: Path):
    """A FIFO named .gitignore: its open waited for a writer that never came, on the walk's thread (the index stayed
    `building`, with no file) and, with a workspace folder inside another, on the event loop at initialize, which
    never answered. Now it is passed over, as a folder named .gitignore is, and a symlinked .gitignore, which git
    does not follow either."""
    root = tmp_path.resolve()
    (root / "pkg").mkdir()
    (root / "a.py").write_text("NAME_A = 1\n")
    (root / "pkg" / "b.py").write_text("NAME_B = 1\n")
    os.mkfifo(root / ".gitignore")
    (root / "pkg" / ".gitignore").mkdir()
    (root / "elsewhere").write_text("a.py\n")
    (root / "sub").mkdir()
    (root / "sub" / ".gitignore").symlink_to(root / "elsewhere")
    (root / "sub" / "a.py").write_text("NAME_SUB_A = 1\n")
    folders = [{"uri": root.as_uri(), "name": "root"}, {"uri": (root / "pkg").as_uri(), "name": "pkg"}]
    with RawClient(SERVER_CMD, env=server_env()) as client:
        answer = client.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
                                               "workspaceFolders": folders,
                                               "initializationOptions": {"completer": {"workspaceContext": True}}},
                                timeout=10)
        assert "result" in answer
        client.notify("initialized", {})
        assert _index_info(client, lambda index: True)["files"] == 3  # a.py, pkg/b.py, sub/a.py


def test_a_repositorys_info_exclude_is_read_below_its_gitignore_files(tmp_path: Path):
    """.git/info/exclude holds the ignores a user keeps out of the repository's .gitignore; git reads it as the
    least of them, so a .gitignore's `!` pattern takes a file back."""
    root = tmp_path.resolve()
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("scratch.py\nlocal_*.py\n")
    (root / ".gitignore").write_text("!local_kept.py\n")
    for name in ("main.py", "scratch.py", "local_notes.py", "local_kept.py"):
        (root / name).write_text(f"NAME_{name[:-3]} = 1\n")
    files = _index(root)
    kept = ["local_kept.py", "main.py"]
    assert sorted(Path(p).relative_to(root).as_posix() for p in files.index.files) == kept
    assert sorted(p.name for p in root.glob("*.py") if files.readable(p)) == kept
    (root / "scratch.py").write_text("NAME_scratch = 2\n")
    files.update(root / "scratch.py")
    assert str(root / "scratch.py") not in files.index.files


@pytest.mark.skipif(shutil.which("git") is None, reason="compared with what git itself ignores")
def test_a_worktrees_info_exclude_is_the_main_repositorys(tmp_path: Path):
    """A git worktree's `.git` is a file naming its folder in the main repository's, whose `commondir` leads to the
    info/exclude git reads: it was looked for under the file, so the files kept out of git there were read (and
    with no .gitignore at the top, no info/exclude was looked for at all)."""
    main, tree = tmp_path.resolve() / "main", tmp_path.resolve() / "tree"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run(["git", "-C", str(main), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "init"], check=True)
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tree)], check=True)
    (main / ".git" / "info").mkdir(exist_ok=True)
    (main / ".git" / "info" / "exclude").write_text("private_notes.py\n")
    for name in ("main.py", "private_notes.py", "pkg/private_notes.py"):
        (tree / name).parent.mkdir(exist_ok=True)
        (tree / name).write_text(f"NAME_{name.replace('/', '_')[:-3]} = 1\n")
    listed = subprocess.run(["git", "-C", str(tree), "ls-files", "-o", "--exclude-standard", "-z", "*.py"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    kept = sorted(name for name in listed if name)
    assert kept == ["main.py"]
    files = _index(tree)
    assert sorted(Path(p).relative_to(tree).as_posix() for p in files.index.files) == kept
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*.py") if files.readable(p)) == kept


@pytest.mark.skipif(shutil.which("git") is None, reason="compared with what git itself ignores")
@pytest.mark.parametrize("where", ["by default", "core.excludesFile"])
def test_the_users_own_excludes_file_is_read_below_the_repositorys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    where: str):
    """git reads the user's excludes file for every repository, below the .gitignore files and info/exclude: the
    files a user keeps out of every repository there (scratch files, local settings) were indexed."""
    home = tmp_path.resolve() / "home"
    (home / ".config" / "git").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    excludes = home / ".config" / "git" / "ignore"
    if where == "core.excludesFile":
        excludes = home / ".gitignore_global"
        (home / ".gitconfig").write_text("[core]\n\texcludesFile = ~/.gitignore_global\n")
    excludes.write_text("scratch_*.py\nlocal_settings.py\n")
    root = tmp_path.resolve() / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("!scratch_kept.py\n")  # a repository's own patterns come first
    for name in ("main.py", "scratch_a.py", "scratch_kept.py", "pkg/local_settings.py"):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(f"NAME_{name.replace('/', '_')[:-3]} = 1\n")
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-o", "--exclude-standard", "-z", "*.py"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    kept = sorted(name for name in listed if name)
    assert kept == ["main.py", "scratch_kept.py"]
    files = _index(root)
    assert sorted(Path(p).relative_to(root).as_posix() for p in files.index.files) == kept
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if files.readable(p)) == kept


def test_snippets_picked_while_a_file_changed_are_picked_again(tmp_path: Path):
    """A pick is kept for the index it was made from: one stored under the generation after a change that came
    while it read the files stood for the changed index, and the file that now holds the names was never offered."""
    root = tmp_path.resolve()
    (root / "a.py").write_text("def register_handler(registry):\n    return registry\n")
    (root / "b.py").write_text("OTHER = 1\n")
    files = _index(root)
    before = "register_handler(registry)\n"

    def open_text(name: str) -> None:  # b.py comes to hold the names while a.py is read
        if name.endswith("a.py") and "OTHER" in (root / "b.py").read_text():
            (root / "b.py").write_text("def register_handler(registry):\n    registry_b = registry\n")
            files.update(root / "b.py")

    assert [Path(s.path).name for s in files.snippets("file:///me.py", root / "me.py", before, open_text)] == ["a.py"]
    assert files.cached("file:///me.py", before) is None
    again = files.snippets("file:///me.py", root / "me.py", before, lambda _: None)
    assert sorted(Path(s.path).name for s in again) == ["a.py", "b.py"]


def test_files_of_other_languages_are_no_context_for_a_document():
    """A converted model's index holds every language; a Python document's names, snippets, followers and first
    line come from Python files alone (lsp/workspace.py, `context_suffixes`)."""
    from lsp.workspace import context_suffixes

    index = WorkspaceIndex(8 << 20)
    index.add("/w/app.js", "// header line of the scripts\nconst fetchWidgetTotals = () => renderWidgetPanel();\n")
    index.add("/w/util.ts", "// header line of the scripts\nexport const fetchWidgetTotals = 1;\n")
    index.add("/w/app.py", "# header line of the modules\ndef summarize_totals(rows):\n    return rows\n")
    python, script = context_suffixes("python"), context_suffixes("typescript")
    assert index.uses("fetchWidgetTotals", "/w/new.py") and not index.uses("fetchWidgetTotals", "/w/new.py", python)
    assert index.best_files({"fetchWidgetTotals"}, "/w/new.py", 8, python) == []
    assert sorted(index.best_files({"fetchWidgetTotals"}, "/w/new.ts", 8, script)) == ["/w/app.js", "/w/util.ts"]
    assert index.follower_sites(["// header line of the scripts"], "/w/new.py", python) == []
    assert index.follower_sites(["// header line of the scripts"], "/w/new.ts", script)
    assert ".js" in script and ".tsx" in script and context_suffixes("cpp") == context_suffixes("c")


def test_an_unsaved_edit_has_the_snippets_picked_again_without_making_a_request_wait(tmp_path: Path):
    """After a pause in typing the index reads the document's unsaved text; the next request takes the snippets
    picked before (`latest`) and has new ones picked after its search, instead of waiting for them."""
    (tmp_path / "registry.py").write_text(OTHER_FILE)
    (tmp_path / "install.py").write_text(BESIDE_OTHER_FILE)
    files = _index(tmp_path)
    uri, before = (tmp_path / "install.py").as_uri(), BESIDE_OTHER_FILE
    picked = files.snippets(uri, tmp_path / "install.py", before, lambda path: None)
    assert picked and files.cached(uri, before) == picked
    files.edited(tmp_path / "registry.py", OTHER_FILE + "\n\ndef handle_zq_gamma():\n    pass\n")
    assert files.cached(uri, before) is None and files.latest(uri) == picked  # stale, but served unwaited
    (tmp_path / "registry.py").write_text(OTHER_FILE + "\n# saved\n")
    files.update(tmp_path / "registry.py")
    assert files.latest(uri) is None  # the disk changed: a request waits for the new pick


def test_a_folder_inside_a_repository_follows_the_gitignore_files_above_it(tmp_path: Path):
    """A workspace opened on a subfolder of a repository (a package of a monorepo) leaves out what the
    repository's .gitignore files above it ignore, as git does there."""
    repo = tmp_path / "repo"
    app = repo / "packages" / "app"
    (repo / ".git").mkdir(parents=True)
    app.mkdir(parents=True)
    (repo / ".gitignore").write_text("generated/\n*.gen.py\n")
    (repo / "packages" / ".gitignore").write_text("!keep.gen.py\n")
    for name in ("main.py", "generated/schema.py", "model.gen.py", "keep.gen.py"):
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_text("def helper_zq():\n    return 1\n")
    files = _index(app)
    indexed = sorted(Path(p).relative_to(app.resolve()).as_posix() for p in files.index.files)
    assert indexed == ["keep.gen.py", "main.py"]
    assert not files.readable(app.resolve() / "generated" / "later.py")


def test_a_repository_that_ignores_the_workspace_folder_itself_says_nothing_of_its_files(tmp_path: Path):
    """A home folder kept in git with `*` ignored: the projects under it are not its files, and are read."""
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    (home / ".gitignore").write_text("*\n!.bashrc\n")
    project = home / "projects" / "tool"
    project.mkdir(parents=True)
    (project / "cli.py").write_text("def main_zq():\n    return 0\n")
    files = _index(project)
    assert [Path(p).name for p in files.index.files] == ["cli.py"]


def test_events_in_folders_the_walk_skips_are_passed_over(tmp_path: Path):
    """The catch-all watcher reports `.git`'s lock file at every `git status`: such events read nothing again and
    keep the server's per-document answers; one in a folder that merely has such a name above the workspace counts."""
    root = tmp_path / "build" / "project"  # `build` above the workspace folder is not a skipped folder of it
    server = CompleterServer()
    server._roots = [root]
    for skipped in (".git/index.lock", "src/__pycache__/a.cpython-311.pyc", "node_modules", "pkg.egg-info/PKG"):
        assert server._in_skipped_folder(root / skipped), skipped
    for read in ("src/a.py", "gitignored.py", "notes/.gitkeep"):
        assert not server._in_skipped_folder(root / read), read
    server.excluded((root / "src" / "a.py").as_uri())
    server.workspace_file_changed((root / ".git" / "index.lock").as_uri())
    assert server.document_exclusions.answers, "an event in .git dropped the answers kept"
    server.workspace_file_changed((root / "src" / "b.py").as_uri())
    assert not server.document_exclusions.answers


@pytest.mark.parametrize("form", ["localhost", "rootPath as a URI"])
def test_a_workspace_folder_is_indexed_in_every_form_a_client_names_it(tmp_path: Path, form: str):
    """`file://localhost/...` names this machine (RFC 8089), and some clients put a URI in rootPath: each was read
    as a path no folder has, and the workspace went unindexed."""
    root = tmp_path / "my project ü"
    root.mkdir()
    (root / "handlers.py").write_text(OTHER_FILE)
    named = {"localhost": {"rootUri": root.as_uri().replace("file://", "file://localhost", 1)},
             "rootPath as a URI": {"rootPath": root.as_uri()}}
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.request("initialize", {"processId": os.getpid(), "capabilities": {}, **named[form]})
        client.notify("initialized", {})
        assert _index_info(client, lambda index: index["files"] == 1)["folders"] == [str(root.resolve())]


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="a file name that is no UTF-8 needs Linux's bytes")
def test_a_root_path_whose_name_is_no_utf8_is_indexed(tmp_path: Path):
    """A folder whose name holds a byte that is no UTF-8, sent as rootPath (with no rootUri) by a client that names
    files as the system decodes them (Python's surrogate escapes): pygls could not make a URI of it, and initialize
    was answered with an internal error, the editor left with no server at all."""
    root = tmp_path / os.fsdecode(b"project-\xe9")
    root.mkdir()
    (root / "handlers.py").write_text(OTHER_FILE)
    with RawClient(SERVER_CMD, env=server_env()) as client:
        answer = client.request("initialize", {"processId": os.getpid(), "capabilities": {}, "rootPath": str(root)})
        assert "result" in answer, answer
        client.notify("initialized", {})
        assert _index_info(client, lambda index: index["files"] == 1)["folders"] == [str(root.resolve())]


def test_a_workspace_folder_that_names_no_folder_here_is_said_once_and_the_others_are_indexed(tmp_path: Path):
    """A Windows URI sent to a Linux server, a folder deleted since, a file, a URI of another scheme: one log line
    each names it (the index held nothing of them and nothing said why), and the real folder is indexed."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "handlers.py").write_text(OTHER_FILE)
    bad = ["file:///c%3A/Users/dev/project", (tmp_path / "deleted").as_uri(), (root / "handlers.py").as_uri(),
           "vscode-vfs://github/dev/project"]
    folders = [{"uri": uri, "name": str(number)} for number, uri in enumerate([*bad, root.as_uri()])]
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.request("initialize", {"processId": os.getpid(), "capabilities": {}, "workspaceFolders": folders[:-1]})
        client.notify("initialized", {})
        client.notify("workspace/didChangeWorkspaceFolders", {"event": {"added": folders[-1:], "removed": []}})
        assert _index_info(client, lambda index: index["files"] == 1)["folders"] == [str(root.resolve())]
    logs = [m["params"]["message"] for m in client.notifications if m.get("method") == "window/logMessage"]
    for uri in bad:
        assert len([line for line in logs if f"workspace folder {uri!r} " in line]) == 1, (uri, logs)
    assert not any(f"workspace folder {root.as_uri()!r} " in line or "Traceback" in line for line in logs), logs


def test_a_folder_opened_inside_one_the_outer_walk_passes_over_is_indexed_as_when_opened_alone(tmp_path: Path):
    """A repository beside one of its dependencies (in node_modules) and a folder its .gitignore ignores, each opened
    as a workspace folder of its own: their files were left out, as the repository's walk leaves them, though each
    opened alone is indexed; so were the events and the unsaved text of their files. The repository's own
    node_modules stays out."""
    repo = tmp_path / "repo"
    lib, generated, other = repo / "node_modules" / "lib", repo / "generated", repo / "node_modules" / "other"
    for folder in (lib, generated, other, repo / ".git"):
        folder.mkdir(parents=True)
    (repo / ".gitignore").write_text("generated/\n")
    for number, folder in enumerate((repo, lib, generated, other)):
        (folder / "code.py").write_text(f"NAME_{number} = {number}\n")
    folders = [{"uri": folder.as_uri(), "name": folder.name} for folder in (repo, lib, generated)]
    with RawClient(SERVER_CMD, env=server_env()) as client:
        client.request("initialize", {"processId": os.getpid(), "capabilities": {}, "workspaceFolders": folders})
        client.notify("initialized", {})
        index = _index_info(client, lambda index: index["files"] >= 3)
        assert index["files"] == 3 and index["folders"] == [str(folder.resolve()) for folder in (repo, lib, generated)]
        (lib / "added.py").write_text("ADDED = 1\n")
        (other / "added.py").write_text("ADDED = 1\n")
        client.notify("workspace/didChangeWatchedFiles", {"changes": [
            {"uri": (lib / "added.py").as_uri(), "type": 1}, {"uri": (other / "added.py").as_uri(), "type": 1}]})
        _index_info(client, lambda index: index["files"] == 4)
        client.open((generated / "unsaved.py").as_uri(), "UNSAVED = 1\n")
        _index_info(client, lambda index: index["files"] == 5)
