"""Headless Neovim as a real LSP client: it starts the server, syncs a Python buffer incrementally,
requests textDocument/completion, applies the item's textEdit, and requests inline completion."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from lsp_support import REPO, SAMPLE_LINES, SAMPLE_TEXT, candidate_positions, server_env

NVIM = shutil.which("nvim")
SCRIPT = REPO / "tests" / "lsp_nvim_client.lua"

pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim is not installed (apt-get install neovim)")


def test_neovim_completion_and_inline_completion(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text(SAMPLE_TEXT, encoding="utf-8")
    out = tmp_path / "report.json"
    env = server_env(
        COMPLETER_NVIM_PYTHON=sys.executable,
        COMPLETER_NVIM_FILE=str(source),
        COMPLETER_NVIM_CANDIDATES=json.dumps(candidate_positions()[:40]),
        COMPLETER_NVIM_OUT=str(out),
        XDG_STATE_HOME=str(tmp_path / "state"),  # Neovim's own LSP log goes here, not to ~
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    proc = subprocess.run([NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {SCRIPT}"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert out.exists(), f"nvim wrote no report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    report = json.loads(out.read_text())
    assert "error" not in report, report
    assert report["initialized"] is True and report["inline_capability"] is True
    assert "item" in report, f"no completion at any candidate: {report}"

    line, col = report["position"]
    typed = report["typed"]
    assert typed == SAMPLE_LINES[line][:col]
    item = report["item"]
    assert item["range"]["start"] == {"line": line, "character": 0}
    assert item["range"]["end"] == {"line": line, "character": len(typed)}  # the line as typed so far
    # accepting the item left exactly the suggested line, starting with what was typed
    assert report["line_after"] == item["newText"]
    assert report["line_after"].startswith(typed) and len(report["line_after"]) > len(typed)
    assert report["line_count"] == len(SAMPLE_TEXT.splitlines())  # no line added or lost

    inline = report["inline"]
    assert isinstance(inline, dict) and inline.get("items"), inline
    assert inline["items"][0]["insertText"].startswith(typed)
    assert inline["items"][0]["range"]["end"]["line"] == line
    assert report["stopped"] is True


@pytest.mark.parametrize(("doc", "heading", "clients"), [
    ("README.md", "### Neovim 0.7 – 0.9", 1),  # keeps the client's id: one server for both buffers
    ("docs/editors.md", "## Neovim 0.7 – 0.9", 2),  # start_client per buffer, as its text says
])
def test_the_docs_neovim_07_setup_sets_omnifunc_and_completes(tmp_path, doc, heading, clients):
    """A doc's own snippet for Neovim 0.7 to 0.9, as written, on Debian's Neovim: it loads (no event or API
    newer than 0.7), omnifunc is set on each of two Python buffers, and whole-line items come at the end of a
    typed line."""
    _write_doc_snippet(tmp_path, doc, heading)
    (tmp_path / "a.py").write_text("import os\nos.pa")
    (tmp_path / "b.py").write_text("x = 1\n")
    (tmp_path / "check.lua").write_text("""
vim.wait(20000, function() return #vim.lsp.get_active_clients() > 0 and vim.bo.omnifunc ~= "" end, 100)
local res = vim.lsp.buf_request_sync(0, "textDocument/completion",
  {textDocument = {uri = vim.uri_from_bufnr(0)}, position = {line = 1, character = 5}}, 20000)
local items = {}
for _, r in pairs(res or {}) do if r.result then items = r.result.items or r.result end end
local first = vim.bo.omnifunc
vim.cmd("edit b.py")
vim.wait(5000, function() return vim.bo.omnifunc ~= "" end, 100)
local out = io.open("report.json", "w")
out:write(vim.fn.json_encode({omnifunc = {first, vim.bo.omnifunc}, clients = #vim.lsp.get_active_clients(),
  texts = vim.tbl_map(function(item) return item.textEdit.newText end, items)}))
out:close()
vim.cmd("qa!")
""")
    report = _run_doc_snippet(tmp_path, "a.py")
    assert report["omnifunc"] == ["v:lua.vim.lsp.omnifunc"] * 2 and report["clients"] == clients, report
    assert report["texts"] and all(text.startswith("os.pa") for text in report["texts"]), report


def _write_doc_snippet(tmp_path, doc: str, heading: str) -> None:
    """`doc`'s Lua block under `heading`, as written, as tmp_path's init.lua, running the server as `python -m lsp`
    (the same server as `completer serve`, from this checkout)."""
    text = (REPO / doc).read_text()
    block = text.split(heading + "\n\n```lua\n", 1)[1].split("```", 1)[0]
    command = "{ " + ", ".join(json.dumps(part) for part in (sys.executable, "-m", "lsp")) + " }"
    assert '{ "completer", "serve" }' in block
    (tmp_path / "init.lua").write_text(block.replace('{ "completer", "serve" }', command))


def _run_doc_snippet(tmp_path, file: str) -> dict:
    """Headless Neovim with tmp_path's init.lua on `file`, running check.lua; the report.json it wrote."""
    env = server_env(XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(tmp_path / "cache"),
                     XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.run([NVIM, "--headless", "-u", "init.lua", "-i", "NONE", file, "-c", "luafile check.lua"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    report_path = tmp_path / "report.json"
    assert report_path.exists(), f"nvim wrote no report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(report_path.read_text())


# <C-x><C-o> at the end of the last line, in insert mode; once the menu shows, <C-y> takes its first line
OMNIFUNC_CHECK = """
vim.wait(20000, function() return #vim.lsp.get_active_clients() > 0 and vim.bo.omnifunc ~= "" end, 100)
vim.api.nvim_win_set_cursor(0, { vim.fn.line("$"), 0 })
vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("A<C-x><C-o>", true, false, true), "n", false)
local tries = 0
local function report()
  tries = tries + 1
  local info = vim.fn.complete_info({ "items" })
  if #info.items == 0 and tries < 200 then return vim.defer_fn(report, 100) end
  local words = vim.tbl_map(function(item) return item.word end, info.items)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<C-y><Esc>", true, false, true), "n", false)
  vim.defer_fn(function()
    local out = io.open("report.json", "w")
    out:write(vim.fn.json_encode({ words = words, line = vim.fn.getline("$") }))
    out:close()
    vim.cmd("qa!")
  end, 200)
end
vim.defer_fn(report, 100)
"""


@pytest.mark.parametrize("typed", ["    ", "    return os.pa"])
@pytest.mark.parametrize(("doc", "heading"), [("README.md", "### Neovim 0.7 – 0.9"),
                                              ("docs/editors.md", "## Neovim 0.7 – 0.9")])
def test_the_docs_neovim_07_setup_completes_whole_lines_through_omnifunc(tmp_path, doc, heading, typed):
    """A doc's Neovim 0.7 to 0.9 setup, as a user runs it: <C-x><C-o> after an indented line's start, or after
    words typed on it, offers whole lines, and accepting one leaves that line (no doubled indentation, no line
    dropped for not starting with the word before the cursor)."""
    _write_doc_snippet(tmp_path, doc, heading)
    (tmp_path / "a.py").write_text(f"import os\n\n\ndef home():\n{typed}")
    (tmp_path / "check.lua").write_text(OMNIFUNC_CHECK)
    report = _run_doc_snippet(tmp_path, "a.py")
    assert report["words"], f"<C-x><C-o> offered nothing after {typed!r}: {report}"
    assert all(word.startswith(typed) and len(word) > len(typed) for word in report["words"]), report
    assert report["line"] == report["words"][0], report
