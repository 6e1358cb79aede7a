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
