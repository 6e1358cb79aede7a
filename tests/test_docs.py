"""The reference docs stay tied to the repository: each table that docs/benchmarks.md says a command prints from a
committed result is what that command prints today, each file the docs link or name is in the tree, each function,
class member and script flag they name exists, and the settings tables list the server's settings with its
defaults."""
from __future__ import annotations

import ast
import functools
import json
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
NOT_FILES = {"completer/info", "completer/fileInfo"}  # the server's own LSP requests, not paths


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


CODE_DIRS = ("completer", "lsp", "scripts")
IN_FILE = re.compile(r"`((?:completer|lsp|scripts)/[\w/]+\.py)`(?:'s)?,? `([A-Za-z_]\w*)`")
"""`lsp/workspace.py`, `SAME_QUERY` and `lsp/server.py`'s `suggest`: a name the doc says that file defines."""
DOTTED = re.compile(r"`([A-Za-z_]\w*)\.([A-Za-z_]\w*)`")
"""`Engine.prefill_steps` (a class's member) or `calls.drive` (a module's name)."""
FILE_SUFFIXES = {"py", "json", "onnx", "data", "log", "txt", "md", "svg", "sh", "toml", "lua"}
NOT_NAMES = {"server.workspace_index"}  # completer/info's field, not lsp/server.py's


@functools.cache
def definitions(path: Path) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """Every name a Python file defines (functions, classes, methods, assigned names and attributes), and each of
    its classes' members (what its body defines, and what its methods assign to self)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    classes: dict[str, frozenset[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        if isinstance(node, ast.ClassDef):
            members = {inner.name for inner in node.body
                       if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    members.add(inner.id)
                elif (isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store)
                      and isinstance(inner.value, ast.Name) and inner.value.id == "self"):
                    members.add(inner.attr)
            classes[node.name] = frozenset(members)
    return frozenset(names), classes


def code_files() -> list[Path]:
    return sorted(path for folder in CODE_DIRS for path in (REPO / folder).rglob("*.py"))


@pytest.mark.parametrize("doc", REFERENCE_DOCS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_function_and_member_a_reference_doc_names_is_defined_there(doc):
    text = doc.read_text(encoding="utf-8")
    wrong = [f"{file}: {name}" for file, name in IN_FILE.findall(text)
             if name not in definitions(REPO / file)[0]]
    members: dict[str, set[str]] = {}
    modules: dict[str, set[str]] = {}
    for path in code_files():
        names, classes = definitions(path)
        modules.setdefault(path.stem, set()).update(names)
        for cls, defined in classes.items():
            members.setdefault(cls, set()).update(defined)
    for owner, name in DOTTED.findall(text):
        if name in FILE_SUFFIXES or f"{owner}.{name}" in NOT_NAMES:
            continue
        known = members.get(owner) if owner in members else modules.get(owner)
        if known is not None and name not in known:
            wrong.append(f"{owner}.{name}")
    assert not wrong, f"{doc.relative_to(REPO)} names what the code does not define: {wrong}"


def doc_commands(text: str) -> list[str]:
    """Each line of the doc's code blocks (continuation lines joined) and each of its inline code spans."""
    commands = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, re.DOTALL):
        commands += block.replace("\\\n", " ").splitlines()
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return commands + [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]


def script_source(script: Path) -> str:
    """A script's text with that of the scripts/ modules it imports (shared argument parsers)."""
    text = script.read_text(encoding="utf-8")
    imported = re.findall(r"^(?:from|import) (\w+)", text, re.MULTILINE)
    return "\n".join([text] + [(script.parent / f"{name}.py").read_text(encoding="utf-8") for name in imported
                               if (script.parent / f"{name}.py").exists()])


@pytest.mark.parametrize("doc", REFERENCE_DOCS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_flag_a_reference_doc_gives_a_script_is_one_the_script_takes(doc):
    wrong = []
    for command in doc_commands(doc.read_text(encoding="utf-8")):
        for found in re.finditer(r"python3? (scripts/[\w-]+\.py)([^;|&#]*)", command):
            source = script_source(REPO / found.group(1))
            wrong += [f"{found.group(1)} {flag}" for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", found.group(2))
                      if f'"{flag}"' not in source and f"'{flag}'" not in source]
    assert not wrong, f"{doc.relative_to(REPO)} gives scripts flags they do not take: {wrong}"


EXTENSION_ONLY = {"enabled", "pythonPath", "trace.server"}  # the VS Code extension's own settings


def settings_table(doc: Path, default_column: int) -> dict[str, object]:
    """The keys of a doc's settings table and the JSON value each one's default cell starts with."""
    text = doc.read_text(encoding="utf-8").split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = [row.split(" | ") for row in text.splitlines() if row.startswith("| `")]
    return {row[0][3:-1]: json.loads(re.match(r"`([^`]+)`", row[default_column]).group(1)) for row in rows}


@pytest.mark.parametrize("doc,column", [("README.md", 1), ("docs/editors.md", 2)])
def test_a_settings_table_lists_every_server_setting_with_its_default(doc, column):
    from lsp.settings import ServerSettings

    defaults = ServerSettings().to_camel()
    assert settings_table(REPO / doc, column) == defaults


def test_the_extension_contributes_every_server_setting_with_the_servers_default():
    from lsp.settings import ServerSettings

    manifest = json.loads((REPO / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    contributed = {key.removeprefix("completer."): value.get("default")
                   for key, value in manifest["contributes"]["configuration"]["properties"].items()}
    defaults = ServerSettings().to_camel()
    assert contributed.keys() - EXTENSION_ONLY == defaults.keys()
    differ = {key for key in defaults if contributed[key] != defaults[key]}
    assert differ == {"completionItems"}  # the extension's ghost text only, as README's settings table says


def extension_properties() -> dict[str, dict]:
    """The VS Code extension's settings that the server reads, by their server key."""
    manifest = json.loads((REPO / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    properties = manifest["contributes"]["configuration"]["properties"]
    return {key.removeprefix("completer."): value for key, value in properties.items()
            if key.removeprefix("completer.") not in EXTENSION_ONLY}


def refused(key: str, value: object) -> bool:
    """Whether the server's settings refuse `value` for `key` (a warning, the old value kept)."""
    from lsp.settings import ServerSettings, apply_changes

    current = ServerSettings()
    new, warnings, unknown = apply_changes(current, {key: value})
    assert not unknown
    return bool(warnings) and new == current


RANGED = sorted(key for key, value in extension_properties().items() if "maximum" in value)


def mentions(row: str, number: int) -> bool:
    """Whether a settings table row gives `number` (4096, or 16,777,216), not as part of another number."""
    return any(re.search(rf"(?<![\d,.]){re.escape(form)}(?![\d,])", row) for form in {str(number), f"{number:,}"})


@pytest.mark.parametrize("key", RANGED)
def test_an_integer_settings_range_is_the_servers_in_the_extension_and_both_tables(key):
    """The range VS Code's settings editor enforces is the one the server takes (its bounds accepted, one past
    either refused), and README's and docs/editors.md's settings tables state both of its bounds."""
    low, high = extension_properties()[key]["minimum"], extension_properties()[key]["maximum"]
    assert not refused(key, low) and not refused(key, high), (key, low, high)
    assert refused(key, low - 1) and refused(key, high + 1), (key, low, high)
    for doc in ("README.md", "docs/editors.md"):
        text = (REPO / doc).read_text(encoding="utf-8").split("\n## Settings\n", 1)[1]
        row = next(line for line in text.splitlines() if line.startswith(f"| `{key}` |"))
        assert mentions(row, low) and mentions(row, high), f"{doc}'s {key} row does not give {low} and {high}"


@pytest.mark.parametrize("key", sorted(key for key, value in extension_properties().items() if "enum" in value))
def test_a_settings_choices_in_the_extension_are_the_servers(key):
    """Each choice VS Code offers is taken by the server, and the server takes no choice VS Code leaves out."""
    from completer.fim import FIM_TEMPLATES
    from lsp.settings import BACKENDS

    choices = extension_properties()[key]["enum"]
    assert not [choice for choice in choices if refused(key, choice)], key
    server = {"device": ("auto", "cpu", "cuda"), "backend": BACKENDS, "fimTemplate": ("auto", "none", *FIM_TEMPLATES)}
    assert sorted(choices) == sorted(server[key])
    assert refused(key, "no-such-choice")


def test_the_capabilities_table_lists_what_the_server_advertises():
    """docs/editors.md's "What the server advertises" names each capability the real server answers initialize
    with (to a client that takes notebooks), and only those; pygls' empty executeCommandProvider aside."""
    from lsp.rawclient import RawClient
    from lsp_support import SERVER_CMD, server_env

    with RawClient(SERVER_CMD, env=server_env()) as client:
        answer = client.initialize({}, {"notebookDocument": {"synchronization": {}}})
    advertised = set(answer["result"]["capabilities"]) - {"executeCommandProvider"}
    text = (REPO / "docs" / "editors.md").read_text(encoding="utf-8").split("What the server advertises:", 1)[1]
    table = text.split("\n\n", 2)[1]
    listed = {re.match(r"\| `(\w+)`", row).group(1) for row in table.splitlines()[2:]}
    assert listed == advertised
