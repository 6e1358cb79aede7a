"""Emacs in batch mode with eglot as a real LSP client, set up with the docs' own Emacs snippets as written: M-x
eglot starts the server, C-M-i (completion-at-point) lists whole lines without touching the line, and RET on the
first one leaves exactly that line; the snippet's settings reach the server."""
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

EMACS = shutil.which("emacs")
CHECK = REPO / "tests" / "emacs_eglot_check.el"
PACKAGES = "(progn (add-to-list 'package-directory-list \"/usr/share/emacs/site-lisp/elpa\") (package-initialize))"
"""What a normal start does before init.el: Debian's elpa-eglot (Emacs 28) is a package there; Emacs 29+ has eglot
built in."""


@functools.cache
def emacs_has(feature: str) -> bool:
    """Whether Emacs, with Debian's elpa packages initialized, can `require` `feature`."""
    if EMACS is None:
        return False
    found = subprocess.run([EMACS, "--batch", "-Q", "--eval", PACKAGES, "--eval", f"(require '{feature})"],
                           capture_output=True, timeout=60)
    return found.returncode == 0


pytestmark = pytest.mark.skipif(not emacs_has("eglot"), reason="emacs with eglot is not installed "
                                                        "(apt-get install emacs-nox elpa-eglot)")

TYPED = ["    ", "    return os.", "    return os.pa"]
"""An indented line's start; after a dot, where eglot completes no word (Emacs 28/29's eglot inserted the lines'
common start there, `    return os.return os.`); after part of a word, which eglot's completion styles filter."""


def write_snippet(tmp_path: Path, doc: str, heading: str) -> None:
    """`doc`'s elisp blocks under `heading`, as written, as tmp_path's init.el, running the server as `python -m
    lsp` (the same server as `completer serve`, from this checkout)."""
    section = (REPO / doc).read_text().split(heading + "\n", 1)[1]
    section = re.split(r"^##", section, maxsplit=1, flags=re.MULTILINE)[0]
    blocks = re.findall(r"^```elisp\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert blocks and '"completer" "serve"' in blocks[0]
    command = " ".join(json.dumps(part) for part in (sys.executable, "-m", "lsp"))
    (tmp_path / "init.el").write_text("\n".join(blocks).replace('"completer" "serve"', command))


@pytest.mark.parametrize(("doc", "heading"), [("README.md", "### Emacs (eglot)"),
                                              ("docs/editors.md", "## Emacs (eglot)")])
def test_the_docs_emacs_setup_completes_whole_lines_through_completion_at_point(tmp_path, doc, heading):
    write_snippet(tmp_path, doc, heading)
    (tmp_path / "sample.py").write_text(SAMPLE_TEXT)
    env = server_env(COMPLETER_EMACS_FILE=str(tmp_path / "sample.py"), COMPLETER_EMACS_TYPED=json.dumps(TYPED),
                     COMPLETER_EMACS_OUT=str(tmp_path / "report.json"), XDG_CACHE_HOME=str(tmp_path / "cache"),
                     XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.run([EMACS, "--batch", "-Q", "--eval", PACKAGES, "-l", "init.el", "-l", str(CHECK)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert (tmp_path / "report.json").exists(), f"emacs wrote no report (exit {proc.returncode}): {proc.stderr[-3000:]}"
    report = json.loads((tmp_path / "report.json").read_text())
    assert "error" not in report, (report, proc.stderr[-3000:])
    settings = report["settings"]  # initializationOptions, then eglot-workspace-configuration
    assert (settings["max_suggestions"], settings["beams"], settings["max_tokens"]) == (3, 4, 24), settings
    lines = len(SAMPLE_TEXT.splitlines()) + 1
    for case in report["cases"]:
        typed, offered, listed, line = case["typed"], case["offered"], case["listed"], case["after_pick"]
        assert 1 <= len(offered) <= 3, f"C-M-i had {len(offered)} items after {typed!r}: {report}"
        if len(offered) > 1:  # listed to pick from, the line left as typed
            assert case["after_capf"] == typed and sorted(listed) == sorted(offered), case
            assert line.strip() == listed[0], case  # RET on the first line listed took that one
        else:  # a sole item goes straight in
            assert case["after_capf"] == line and line.strip() == offered[0], case
        assert line.startswith(typed) and len(line) > len(typed) and case["lines"] == lines, case  # whole, once
