"""The reference docs stay tied to the repository: each table that docs/benchmarks.md says a command prints from a
committed result is what that command prints today, and each file the docs link or name is in the tree."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

BENCHMARKS = REPO / "docs" / "benchmarks.md"
REFERENCE_DOCS = [REPO / "README.md", REPO / "docs" / "architecture.md", BENCHMARKS, REPO / "docs" / "editors.md",
                  *sorted((REPO / "models").glob("*/MODEL.md"))]
TABLE_COMMAND = re.compile(r"^python (scripts/[\w-]+\.py) --table (docs/\S+\.json)", re.MULTILINE)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")
REPO_PATH = re.compile(r"`((?:docs|models|scripts|tests|completer|lsp|vscode-extension)/[^`\s*{}<>]+)`")
NOT_FILES = {"completer/info"}  # the server's own LSP request, not a path


def table_commands() -> list[tuple[str, str]]:
    return TABLE_COMMAND.findall(BENCHMARKS.read_text(encoding="utf-8"))


def test_the_docs_name_table_commands_to_check():
    assert len(table_commands()) >= 10  # the pattern still finds the commands the doc shows


@pytest.mark.parametrize("script,result", table_commands(), ids=lambda value: Path(value).stem)
def test_each_table_in_the_benchmarks_is_what_its_command_prints_from_the_committed_result(script, result):
    printed = subprocess.run([sys.executable, script, "--table", result], cwd=REPO, capture_output=True, text=True,
                             timeout=120)
    assert printed.returncode == 0, printed.stderr[-2000:]
    rows = [line for line in printed.stdout.splitlines() if line.startswith("|")]
    assert rows, f"{script} --table {result} printed no table"
    doc = BENCHMARKS.read_text(encoding="utf-8")
    stale = [row for row in rows if row not in doc]
    assert not stale, f"docs/benchmarks.md lacks these rows of `{script} --table {result}`: {stale[:3]}"


@pytest.mark.parametrize("doc", REFERENCE_DOCS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_file_a_reference_doc_links_or_names_is_in_the_tree(doc):
    text = doc.read_text(encoding="utf-8")
    linked = [target for target in LINK.findall(text) if not target.startswith(("http:", "https:", "mailto:"))]
    missing = [target for target in linked if not (doc.parent / target).exists()]
    named = {path.rstrip(".,:;") for path in REPO_PATH.findall(text)} - NOT_FILES
    missing += [path for path in sorted(named) if not (REPO / path).exists()]
    assert not missing, f"{doc.relative_to(REPO)} points at what is not in the tree: {missing}"
