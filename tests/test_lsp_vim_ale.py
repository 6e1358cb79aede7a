"""Vim with ALE as a real LSP client, set up with docs/editors.md's vimrc as written: ALE starts `completer serve` as
a Python linter, CTRL-X CTRL-U lists whole lines and CTRL-Y leaves exactly the one taken (after a dot, after part of
a word, on an empty indented line, with text after the cursor), ALE's own completion offers none of them (it would
double the line), and the vimrc's settings reach the server, at start and when changed."""
from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_support import REPO, SAMPLE_TEXT, server_env

VIM = shutil.which("vim")
CHECK = REPO / "tests" / "vim_ale_check.vim"
USER_LINES = "\x18\x15"  # CTRL-X CTRL-U: the vimrc's completefunc
ALE_OMNI = "\x18\x0f"  # CTRL-X CTRL-O with ALE's omnifunc: ALE's own completion


@functools.cache
def has_ale() -> bool:
    """Vim with jobs and timers (not vim.tiny) and Debian's vim-ale, as the doc's `packadd! ale` loads it."""
    if VIM is None:
        return False
    found = subprocess.run([VIM, "-N", "-u", "NONE", "-i", "NONE", "-es", "-c", "packadd ale",
                            "-c", "if !has('job') || !has('timers') | cquit | endif",
                            "-c", "call ale#linter#GetAll(['python'])", "-c", "qall!"], capture_output=True, timeout=60)
    return found.returncode == 0


pytestmark = pytest.mark.skipif(not has_ale(), reason="vim with ALE is not installed "
                                                      "(apt-get install vim-nox vim-ale)")

CASES = [
    {"typed": "    ", "after": "", "keys": USER_LINES},  # an empty indented line
    {"typed": "    return os.", "after": "", "keys": USER_LINES},  # after a dot: ALE's own doubled the line here
    {"typed": "    return os.pa", "after": "", "keys": USER_LINES},  # after part of a word: ALE's own offered none
    {"typed": "    return os.", "after": "  # note", "keys": USER_LINES},  # text after the cursor, which the item replaces
    {"typed": "    return os.", "after": "", "keys": ALE_OMNI, "omnifunc": "ale#completion#OmniFunc"},
]


def write_vimrc(tmp_path: Path) -> None:
    """docs/editors.md's vimrc, as written, as tmp_path's vimrc; `completer` on PATH runs this checkout's."""
    section = (REPO / "docs" / "editors.md").read_text().split("## Vim (ALE)\n", 1)[1]
    section = re.split(r"^##", section, maxsplit=1, flags=re.MULTILINE)[0]
    blocks = re.findall(r"^```vim\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert blocks and "'executable': 'completer'" in blocks[0] and "'%e serve'" in blocks[0]
    (tmp_path / "vimrc").write_text("\n".join(blocks))
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "completer").write_text(f'#!/bin/sh\nexec {json.dumps(sys.executable)} -m completer "$@"\n')
    (tmp_path / "bin" / "completer").chmod(0o755)


def _check_line(case: dict, lines: int) -> None:
    """CTRL-X CTRL-U put the first line listed in at once and CTRL-Y kept it: the whole line, typed once."""
    typed, offered, line = case["typed"], case["offered"], case["line"]
    assert 1 <= len(offered) <= 5, f"CTRL-X CTRL-U had {len(offered)} lines (maxSuggestions 5): {case}"
    assert case["with_menu"] == offered[0] + case["after"] and line == offered[0], case
    assert line.startswith(typed) and len(line) > len(typed) and case["lines"] == lines, case
    assert not typed.strip() or line.count(typed.strip()) == 1, case


def test_the_docs_vim_ale_setup_completes_whole_lines_on_ctrl_x_ctrl_u(tmp_path):
    write_vimrc(tmp_path)
    (tmp_path / "sample.py").write_text(SAMPLE_TEXT)
    env = server_env(COMPLETER_VIM_CASES=json.dumps(CASES), COMPLETER_VIM_OUT=str(tmp_path / "report.json"),
                     PATH=f"{tmp_path / 'bin'}:{server_env()['PATH']}", HOME=str(tmp_path),
                     XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    # stdin a pipe left open: Vim waits on it for keys while its timers type them
    proc = subprocess.run([VIM, "-N", "-n", "-u", "vimrc", "-i", "NONE", "--not-a-term", "-S", str(CHECK),
                           "sample.py"], env=env, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=180)
    report_path = tmp_path / "report.json"
    assert report_path.exists(), f"vim wrote no report (exit {proc.returncode}): {proc.stderr[-3000:]}"
    report = json.loads(report_path.read_text())
    assert "error" not in report, report
    settings, changed = report["settings"], report["changed"]  # initialization_options and lsp_config, then changed
    assert (settings["maxSuggestions"], settings["beams"], settings["maxTokens"]) == (5, 4, 24), settings
    assert (changed["maxSuggestions"], changed["beams"], changed["maxTokens"]) == (5, 2, 24), changed
    lines = len(SAMPLE_TEXT.splitlines()) + 1
    *ours, ale_own = report["cases"]
    assert len(ours) == len(CASES) - 1
    for case in ours:
        _check_line(case, lines)
    # ALE's omnifunc asked the server and dropped its lines (completion_filter): the line stays as typed
    assert ale_own["offered"] == [] and ale_own["line"] == ale_own["typed"], ale_own
