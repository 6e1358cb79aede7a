"""The reference docs stay tied to the repository: each table that docs/benchmarks.md says a command prints from a
committed result is what that command prints today, each file the docs link or name is in the tree, each function,
class member and script flag they name exists, the settings tables list the server's settings with its defaults,
and the limits, delays and sizes they state are the code's constants."""
from __future__ import annotations

import ast
import functools
import importlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from conftest import REPO

BENCHMARKS = REPO / "docs" / "benchmarks.md"
REFERENCE_DOCS = [REPO / "README.md", REPO / "docs" / "architecture.md", BENCHMARKS, REPO / "docs" / "editors.md",
                  *sorted((REPO / "models").glob("*/MODEL.md")), REPO / "scripts" / "README.md"]
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


# saved results after the flag, not a count (profile_step.py --runs 200)
READS_RESULTS = re.compile(r"^python scripts/[\w-]+\.py (?:--table|--ratios|--runs) (?!\d)")


def results_commands() -> list[tuple[str, str]]:
    """Each command of benchmarks.md's code blocks that prints a table from saved results other than the
    `--table docs/X.json` ones above (several runs side by side, named rows), with the block's `E=DIR` lines
    before it: (the command as the doc gives it, the shell line that runs it)."""
    found = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", BENCHMARKS.read_text(encoding="utf-8"), re.DOTALL):
        lines = [line.split("  #")[0].strip() for line in block.replace("\\\n", " ").splitlines()]
        assignments = [line for line in lines if re.fullmatch(r"[A-Z]\w*=\S+", line)]
        found += [(line, "; ".join([*assignments, line])) for line in lines
                  if READS_RESULTS.match(line) and not TABLE_COMMAND.match(line)]
    return found


def test_the_docs_name_results_commands_to_check():
    assert len(results_commands()) >= 5  # the pattern still finds the --ratios, --runs and named --table commands


@pytest.mark.parametrize("command,shell", results_commands(), ids=lambda value: value.split()[1][8:-3])
def test_each_table_of_several_results_is_what_its_command_prints_from_the_committed_results(command, shell):
    """A command the doc gives for a table of several committed runs runs as written (bash, for its `{1,2,3}`)
    and prints the doc's rows, so a reader can make each of those tables again from the files beside it."""
    printed = subprocess.run(["bash", "-c", shell], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, f"{command}\n{printed.stderr[-2000:]}"
    rows = [line for line in printed.stdout.splitlines() if line.startswith("|")]
    assert rows, f"{command} printed no table"
    stale = [row for row in rows if row not in BENCHMARKS.read_text(encoding="utf-8")]
    assert not stale, f"docs/benchmarks.md lacks these rows of `{command}`: {stale[:3]}"


@pytest.mark.parametrize("doc", REFERENCE_DOCS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_file_a_reference_doc_links_or_names_is_in_the_tree(doc):
    text = doc.read_text(encoding="utf-8")
    linked = [target for target in LINK.findall(text) if not target.startswith(("http:", "https:", "mailto:"))]
    missing = [target for target in linked if not (doc.parent / target).exists()]
    named = {path.rstrip(".,:;") for path in REPO_PATH.findall(text)} - NOT_FILES
    missing += [path for path in sorted(named) if not (REPO / path).exists()]
    assert not missing, f"{doc.relative_to(REPO)} points at what is not in the tree: {missing}"


def tracked_mib() -> float:
    """The size of the files git tracks, in MiB: what a call to the lent GPU machine sends."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return sum((REPO / name).stat().st_size for name in listed.decode().split("\0")
               if name and (REPO / name).is_file()) / 2 ** 20


def test_the_gpu_runbook_states_the_size_of_the_tree_a_call_sends():
    """scripts/README.md's runbook says how much of the 64 MiB a call may send the tracked tree takes, which
    decides whether its commands can run at all; the figure is the tree's, within 2 MiB."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no tracked tree to measure")
    text = " ".join((REPO / "scripts" / "README.md").read_text(encoding="utf-8").split())
    stated = re.search(r"The tracked tree is about (\d+) MiB", text)
    assert stated, "scripts/README.md no longer states the tracked tree's size: check this test"
    assert abs(float(stated[1]) - tracked_mib()) <= 2, f"the tracked tree is {tracked_mib():.1f} MiB"


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


def documented_types(cell: str) -> set[str]:
    """The JSON types a Type cell of docs/editors.md's settings table names ("string or null", "integer 0–16",
    a list of quoted choices: strings)."""
    cell = cell.strip()
    kinds = {"boolean": "boolean", "integer": "integer", "string": "string", "list": "array", "`\"": "string"}
    found = {kind for start, kind in kinds.items() if cell.startswith(start)}
    assert len(found) == 1, f"a Type cell this test cannot read: {cell!r}"
    return found | ({"null"} if cell.endswith("null") else set())


SAMPLES = {"boolean": True, "integer": 2, "string": "python-base", "array": ["python"], "null": None}
"""A value of each JSON type a setting may declare (an integer setting's is its maximum; strings of their own where
this one does not fit)."""
OWN_SAMPLES = {"endpoint": "http://127.0.0.1:8080/v1", "apiKeyEnv": "TEAM_COMPLETIONS_KEY", "excludeFiles": [".env"]}
OTHER_TYPES = {"boolean": True, "number": 2.5, "string": "3", "array": ["3"], "object": {"beams": 2}}
"""A value of each JSON type: the server refuses those a setting does not declare (no setting takes a fraction)."""


@pytest.mark.parametrize("key", sorted(extension_properties()))
def test_a_settings_type_is_the_same_in_the_extension_the_reference_and_the_server(key):
    """package.json's `type` (a string for a choice of strings) is the Type docs/editors.md's settings table gives,
    the server takes a value of each of those types, and refuses a value of every other JSON type with a warning
    (null aside, which resets any key to its default; a lone string for a list is taken as its one item)."""
    declared = extension_properties()[key]["type"]
    declared = {declared} if isinstance(declared, str) else set(declared)
    text = (REPO / "docs" / "editors.md").read_text(encoding="utf-8").split("\n## Settings\n", 1)[1]
    cell = next(line for line in text.splitlines() if line.startswith(f"| `{key}` |")).split(" | ")[1]
    assert documented_types(cell) == declared, (key, cell, declared)
    choices = extension_properties()[key].get("enum")
    for kind in declared:
        value = choices[-1] if choices else extension_properties()[key]["maximum"] if kind == "integer" \
            else OWN_SAMPLES.get(key, SAMPLES[kind])
        assert not refused(key, value), (key, value)
    for kind, value in OTHER_TYPES.items():
        if kind not in declared and not (kind == "string" and "array" in declared):
            assert refused(key, value), (key, value)


def test_the_extension_bounds_excludefiles_as_the_server_does():
    """VS Code's settings editor marks a list of excludeFiles the server refuses whole: too many patterns, or one too
    long (a pasted file)."""
    from lsp.exclusions import MAX_PATTERN_CHARS, MAX_PATTERNS

    excluded = extension_properties()["excludeFiles"]
    assert (excluded["maxItems"], excluded["items"]["maxLength"]) == (MAX_PATTERNS, MAX_PATTERN_CHARS)
    assert not refused("excludeFiles", ["x" * MAX_PATTERN_CHARS] * MAX_PATTERNS)
    assert refused("excludeFiles", [".env"] * (MAX_PATTERNS + 1))
    assert refused("excludeFiles", ["x" * (MAX_PATTERN_CHARS + 1)])


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


def restarts_at_once() -> int:
    """How many deaths of a worker within a minute are followed by a restart at once."""
    from lsp.worker_client import RESTART_DELAYS

    return next(index for index, delay in enumerate(RESTART_DELAYS) if delay)


def first_restart_wait() -> float:
    from lsp.worker_client import RESTART_DELAYS

    return next(delay for delay in RESTART_DELAYS if delay)


A, R, E = "docs/architecture.md", "README.md", "docs/editors.md"
MIB = 2 ** -20
Constant = str | tuple[str, float] | Callable[[], float]
CONSTANT_CLAIMS: list[tuple[tuple[str, ...], str, list[Constant]]] = [
    # (the docs that state it; the statement, {n} standing for a number, {w} for one in words; the constant each
    # number is, in order: "module.NAME", "module.NAME[i]" of a sequence, that with the scale the doc states it
    # in, or a function of the code)
    ((A, R, E), r"line over {n} characters", ["completer.text.MAX_LINE_CHARS"]),
    ((A,), r"over {n} % of the last {n} characters", [("completer.text.BINARY_SHARE", 100),
                                                      "completer.text.BINARY_SAMPLE_CHARS"]),
    ((R, E), r"up to {n} characters back", ["completer.text.MAX_CONTEXT_CHARS"]),
    ((A,), r"keeps at most the last {n} characters before the cursor, cut at a line start in steps of {n}",
     ["completer.text.MAX_CONTEXT_CHARS", "completer.text.CLIP_STEP_CHARS"]),
    ((A,), r"moves in steps of {n} lines", ["completer.text.CLIP_LINE_STEP"]),
    ((A, R, E), r"first {n} characters", ["completer.text.OTHER_FILE_CHARS"]),
    ((A,), r"run past {n} bytes \(`MAX_INSERTED_BYTES`", ["completer.text.MAX_INSERTED_BYTES"]),
    ((A,), r"once there are {n} of them \(`SPLICED_IN_ONE_PASS`\)", ["lsp.documents.SPLICED_IN_ONE_PASS"]),
    ((A,), r"a byte count of at most {n} MiB", [("lsp.reader.MAX_MESSAGE_BYTES", MIB)]),
    ((A, R, E), r"(?:within|for) {n} s, (?:it )?search(?:es)? the line after Enter",
     ["lsp.worker.SEARCH_AHEAD_AFTER_S"]),
    ((A, R), r"(?:exits|no client for) {w} minutes", [("lsp.worker.IDLE_EXIT_S", 1 / 60)]),
    ((A,), r"waited {n} s to be written", ["lsp.worker.SEND_TIMEOUT_S"]),
    ((A,), r"after {n} s \(`INIT_TIMEOUT`\)", ["lsp.worker_client.INIT_TIMEOUT"]),
    ((E,), r"load its model within {n} s", ["lsp.worker_client.INIT_TIMEOUT"]),
    ((A,), r"Past {n} MiB written and not read", [("lsp.worker_client.HOLD_AFTER_BYTES", MIB)]),
    ((A,), r"at once for the first {w} deaths within a minute, then after {n} s, and longer with each further one, "
           r"up to {n} s \(`RESTART_DELAYS`",
     [restarts_at_once, first_restart_wait, "lsp.worker_client.RESTART_DELAYS[-1]"]),
    ((E,), r"at once \(after {w} crashes within a minute, each further one after a wait that grows from {n} s to {n} "
           r"s\)",
     [restarts_at_once, first_restart_wait, "lsp.worker_client.RESTART_DELAYS[-1]"]),
    ((A,), r"a request not sent within {n} s", ["lsp.session_host.REQUEST_TIMEOUT_S"]),
    ((A,), r"`FAIR_SHARE_S` \({n} ms\)", [("completer.scheduler.FAIR_SHARE_S", 1000)]),
    ((A,), r"`NEW_OWNER_CREDIT_S` \({n} s\)", ["completer.scheduler.NEW_OWNER_CREDIT_S"]),
    ((A, R), r"(?:{n} tokens at most|at most {n} tokens)[,;]", ["completer.engine.PREFILL_CHUNK_TOKENS"]),
    ((A, R), r"sized to take about {n} ms", ["completer.prefill_chunks.CHUNK_BUDGET_MS"]),
    ((A,), r"the first chunk is {n} tokens", ["completer.prefill_chunks.FEWEST_TOKENS"]),
    ((A,), r"A call stopped {w} \(`MAX_STOPS`\)", ["completer.preemption.MAX_STOPS"]),
    ((A,), r"margin \({n} nats", ["completer.types.STOP_MARGIN"]),
    ((R,), r"\(the engine's {n};", ["completer.types.STOP_MARGIN"]),
    ((A,), r"`\"defaults\"\.\"beams\"`, else {n}", ["completer.bundle.DEFAULT_BEAMS"]),
    ((A,), r"graph holds up to {n} positions, and it reads {n} of them",
     ["completer.convert.DEFAULT_CONTEXT", "completer.convert.DEFAULT_WINDOW"]),
    ((R,), r"the smaller of the model's and {n} tokens .{0,40} window of {n} of them",
     ["completer.convert.DEFAULT_CONTEXT", "completer.convert.DEFAULT_WINDOW"]),
    ((A,), r"with {w} search slots", ["completer.graph.decoder.DEFAULT_SLOTS"]),
    ((A,), r"looked for up to {n} lines and {n} characters up",
     ["completer.indentation.STATEMENT_LINES", "completer.indentation.STATEMENT_CHARS"]),
    ((A,), r"\(up to {w} per document\)", ["completer.ahead.SPECULATIONS_KEPT"]),
    ((A,), r"at most {n} tokens \(\d+ with the default", ["completer.prompt.WINDOW_SLIDE_TOKENS"]),
    ((A, R, E), r"nearest (?:lines below the cursor \()?{n} tokens", ["completer.prompt.FIM_SUFFIX_TOKENS"]),
    ((A,), r"for the next {n} files", ["completer.prompt.OTHER_FILES_KEPT"]),
    ((A,), r"up to {w} tokens with the space before it", ["completer.prompt.HEALED_WORD_TOKENS"]),
    ((A,), r"holds more than {n} tokens after them", ["completer.prompt.NEW_FILES_AFTER_TOKENS"]),
    ((A,), r"the longest run of tokens \(up to {n}\)", ["completer.repeats.MAX_MATCH"]),
    ((A,), r"a run of one token {w} times or more", ["completer.partial_lines.LOOP_TOKENS"]),
    ((A, R, E), r"the {w} windows of", ["lsp.workspace.SNIPPETS"]),
    ((A,), r"windows of {n} lines", ["completer.workspace.SNIPPET_LINES"]),
    ((A,), r"with the {n} lines above the cursor", ["completer.workspace.QUERY_LINES"]),
    ((R, E), r"once {n} files in a row find no room", ["lsp.workspace.FULL_AFTER_REFUSALS"]),
    ((R,), r"nothing over {n} MB", [("lsp.workspace.MAX_FILE_BYTES", MIB)]),
    ((R,), r"notebook file be up to {n} MB", [("lsp.workspace.MAX_NOTEBOOK_BYTES", MIB)]),
    ((A,), r"then {n} s at most", ["lsp.repository_lookups.SNIPPETS_WAIT"]),
    ((A,), r"waits at most {n} ms for it", [("lsp.line_order.FOLLOWERS_WAIT", 1000)]),
    ((A,), r"fewer than {n} characters", ["completer.earlier_lines.MIN_FOLLOWED_CHARS"]),
    ((A,), r"up to {w}, until they do", ["completer.earlier_lines.ANCHOR_LINES"]),
    ((A,), r"\({n} bytes a line", ["completer.workspace.HASH_BYTES"]),
    ((A,), r"at up to {n} places per different following line", ["completer.workspace.SITES_PER_FOLLOWER"]),
    ((A,), r"more than {n} different ones", ["completer.workspace.FOLLOWERS"]),
    ((A,), r"only the first {n} copies", ["completer.workspace.COPIES_READ"]),
    ((A,), r"and at least {w}, start with", ["completer.workspace.FIRST_LINE_FILES"]),
    ((A,), r"scans up to {n} of them", ["completer.filters.CONTEXT_LINES"]),
    ((R, E), r"at most {n} patterns of at most {n} characters",
     ["lsp.exclusions.MAX_PATTERNS", "lsp.exclusions.MAX_PATTERN_CHARS"]),
    ((A,), r"reads at most {n} MiB of reply", [("lsp.remote_backend.MAX_REPLY_BYTES", MIB)]),
    ((R,), r"\(or over {n} MiB\)", [("lsp.remote_backend.MAX_REPLY_BYTES", MIB)]),
    ((A, R), r"for {n} s,? doubling (?:up )?to {n} s", ["lsp.remote_backend.BACKOFF_S[0]",
                                                        "lsp.remote_backend.BACKOFF_S[-1]"]),
    ((A, R), r"unless {w} come in a row", ["lsp.remote_backend.REFUSALS_IN_A_ROW"]),
    ((R, E), r"sampled at temperature {n}", ["lsp.remote_backend.SAMPLING_TEMPERATURE"]),
    ((R,), r"up to {n} characters of the lines below it", ["completer.remote.BELOW_CHARS"]),
    ((R,), r"up to {n} characters of snippets", ["completer.repository.SNIPPET_CHARS"]),
]
IN_WORDS = {"once": 1, "twice": 2, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "eight": 8}


def code_value(constant: Constant) -> float:
    """A constant's value, in the unit the doc states it in."""
    if callable(constant):
        return constant()
    name, scale = (constant, 1.0) if isinstance(constant, str) else constant
    found = re.fullmatch(r"([\w.]+)\.([A-Z_]+)(?:\[(-?\d+)\])?", name)
    assert found, name
    value = getattr(importlib.import_module(found[1]), found[2])
    return (value if found[3] is None else value[int(found[3])]) * scale


def stated(text: str) -> float:
    """A number as a doc writes it: 4,096, 0.15, or in words (five, twice)."""
    return IN_WORDS[text.lower()] if text.lower() in IN_WORDS else float(text.replace(",", ""))


def claim_id(constants: list[Constant]) -> str:
    first = constants[0]
    return first.__name__ if callable(first) else (first if isinstance(first, str) else first[0]).rsplit(".", 1)[-1]


@pytest.mark.parametrize("docs,statement,constants", [pytest.param(*claim, id=claim_id(claim[2]))
                                                      for claim in CONSTANT_CLAIMS])
def test_each_number_a_reference_doc_states_for_a_code_constant_is_the_constants_value(docs, statement, constants):
    """Where a doc states a limit, delay or size the code holds in a constant, the number is the constant's each time
    the doc says it; and each doc still says it, so that a statement reworded is checked again, not left unread."""
    pattern = statement.replace("{n}", r"(\d[\d,]*(?:\.\d+)?)").replace("{w}", r"(\w+)")
    wanted = [code_value(constant) for constant in constants]
    for doc in docs:
        text = " ".join((REPO / doc).read_text(encoding="utf-8").split())  # a statement may be wrapped anywhere
        said = list(re.finditer(pattern, text))
        assert said, f"{doc} no longer says {statement!r}: check its numbers against {constants}, and this claim"
        for found in said:
            numbers = [stated(number) for number in found.groups() if number is not None]
            assert len(numbers) == len(wanted) and all(map(math.isclose, numbers, wanted)), \
                f"{doc} says {found[0]!r}, where the code has {wanted} ({constants})"


def test_the_extension_bounds_the_endpoint_model_name_as_the_server_does():
    """A `model` the server refuses (pasted text, a control character) is marked in VS Code's settings editor too."""
    from lsp.settings import MODEL_NAME_CHARS

    assert extension_properties()["model"]["maxLength"] == MODEL_NAME_CHARS
    assert not refused("model", "q" * MODEL_NAME_CHARS)
    assert refused("model", "q" * (MODEL_NAME_CHARS + 1))
    assert refused("model", "qwen\n2.5")


def test_the_settings_vs_code_ignores_in_untrusted_workspaces_are_the_ones_its_readme_says():
    """An untrusted workspace's own settings must not choose the program that runs, the model whose lines are offered,
    where code is sent, or what is never read: those are in `restrictedConfigurations`, and the extension's README
    says so of each, and of no other."""
    manifest = json.loads((REPO / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    restricted = set(manifest["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"])
    table = (REPO / "vscode-extension" / "README.md").read_text(encoding="utf-8")
    said = {match.group(1) for match in re.finditer(r"^\| `(completer\.\w+)` \|.*[Ii]gnored (?:in|from an) untrusted",
                                                    table, re.MULTILINE)}
    assert said == restricted
    assert {"completer.pythonPath", "completer.modelPath", "completer.backend", "completer.endpoint",
            "completer.apiKeyEnv", "completer.excludeFiles"} <= restricted
