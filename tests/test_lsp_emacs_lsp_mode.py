"""Emacs in batch mode with lsp-mode as a real LSP client, set up with docs/editors.md's lsp-mode snippets as
written: M-x lsp starts the server as an add-on client, C-M-i (completion-at-point) lists whole lines without
touching the line, RET on the first one leaves exactly that line (its indentation kept, on the buffer's last line
too), a sole item replaces the line at once, and the snippet's settings reach the server, at start and when
changed with its command."""
from __future__ import annotations

import json
import subprocess

import pytest

from lsp_support import REPO, SAMPLE_TEXT, server_env
from test_lsp_emacs import EMACS, PACKAGES, emacs_has, write_snippet

CHECK = REPO / "tests" / "emacs_lsp_mode_check.el"


pytestmark = pytest.mark.skipif(not emacs_has("lsp-mode"), reason="emacs with lsp-mode is not installed "
                                                           "(apt-get install emacs-nox elpa-lsp-mode)")

TYPED = ["    ", "    return os.pa", "def ", "# Ret"]
"""An indented line's start; after part of a word, which lsp-mode filters by; a line at column 0 after the indented
body above, which python-mode would indent; a comment, where lsp-mode completes only for a client that asks to."""


def _check_case(case: dict, lines: int) -> None:
    """C-M-i listed the items with the line as typed and RET took the first, or completed the sole item at once;
    either way the line is then that whole item, once, with the typed indentation."""
    typed, offered, listed, line = case["typed"], case["offered"], case["listed"], case["after_pick"]
    if len(offered) > 1:
        assert case["after_capf"] == typed and sorted(listed) == sorted(offered), case
        assert line.strip() == listed[0], case
    else:
        assert case["after_capf"] == line and line.strip() == offered[0], case
    assert line.startswith(typed) and len(line) > len(typed) and case["lines"] == lines, case


def test_the_docs_lsp_mode_setup_completes_whole_lines_through_completion_at_point(tmp_path):
    write_snippet(tmp_path, "docs/editors.md", "## Emacs (lsp-mode)")
    (tmp_path / "sample.py").write_text(SAMPLE_TEXT)
    env = server_env(COMPLETER_EMACS_FILE=str(tmp_path / "sample.py"), COMPLETER_EMACS_TYPED=json.dumps(TYPED),
                     COMPLETER_EMACS_OUT=str(tmp_path / "report.json"), XDG_CACHE_HOME=str(tmp_path / "cache"),
                     XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    own_dir = f"(setq user-emacs-directory {json.dumps(str(tmp_path / 'emacs.d') + '/')})"  # lsp-mode's session file
    proc = subprocess.run([EMACS, "--batch", "-Q", "--eval", own_dir, "--eval", PACKAGES, "-l", "init.el",
                           "-l", str(CHECK)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert (tmp_path / "report.json").exists(), f"emacs wrote no report (exit {proc.returncode}): {proc.stderr[-3000:]}"
    report = json.loads((tmp_path / "report.json").read_text())
    assert "error" not in report, (report, proc.stderr[-3000:])
    settings, changed = report["settings"], report["changed"]  # as started, then after completer-lsp-send-settings
    assert (settings["max_suggestions"], settings["beams"], settings["max_tokens"]) == (3, 4, 24), settings
    assert (changed["max_suggestions"], changed["beams"], changed["max_tokens"]) == (1, 4, 24), changed
    lines = len(SAMPLE_TEXT.splitlines()) + 1
    for case in report["cases"]:
        assert 1 <= len(case["offered"]) <= 3, f"C-M-i had {len(case['offered'])} items: {case}"
        _check_case(case, lines)
    assert any(len(case["offered"]) > 1 for case in report["cases"]), report["cases"]  # a list was picked from
    for case in report["sole_cases"]:
        assert len(case["offered"]) == 1, f"maxSuggestions 1, yet C-M-i had {len(case['offered'])} items: {case}"
        _check_case(case, lines)
