"""Runs the VS Code extension's own tests (vscode-extension/: `npm run build`, then `npm test`).

`npm test` runs the unit tests (mocked `vscode` module) and an integration test that starts the real
server with this interpreter (`COMPLETER_PYTHON`, `-m lsp`) and checks inline completions over stdio.
Skipped only when node or npm is not installed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXTENSION = Path(__file__).resolve().parent.parent / "vscode-extension"


def _run(args: list[str], env: dict[str, str], timeout: int) -> None:
    try:
        proc = subprocess.run(args, cwd=EXTENSION, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
        pytest.fail(f"`{' '.join(args)}` timed out after {timeout} s in {EXTENSION}:\n{out[-20000:]}")
    if proc.returncode != 0:
        pytest.fail(f"`{' '.join(args)}` exited with {proc.returncode} in {EXTENSION}:\n{proc.stdout[-20000:]}",
                    pytrace=False)
    # Shown with -s / -rA: the node test runner's summary.
    print(proc.stdout[-3000:])


@pytest.mark.timeout(1800)
def test_vscode_extension_npm_tests() -> None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip(f"node and npm are needed for the VS Code extension tests (node={node}, npm={npm})")
    env = dict(os.environ)
    env.setdefault("COMPLETER_PYTHON", sys.executable)
    env["COMPLETER_STANDALONE"] = "1"  # private workers: no shared engine outlives the test
    env.setdefault("npm_config_update_notifier", "false")
    env.setdefault("npm_config_fund", "false")
    env.setdefault("npm_config_audit", "false")
    if not (EXTENSION / "node_modules").is_dir():
        _run([npm, "ci", "--no-audit", "--no-fund"], env, timeout=900)
    _run([npm, "run", "build"], env, timeout=600)
    _run([npm, "test"], env, timeout=900)


OLDER_NODE = "Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '18.20.4' } });\n"
"""Preloaded, it makes node report Debian 12's apt version, 18.20.4, to the script it runs."""


def test_npm_run_package_on_a_node_older_than_vsce_needs_says_which_in_one_line(tmp_path: Path) -> None:
    """`npm run package` with Debian 12's Node.js 18 died inside vsce ("ReferenceError: File is not defined"): its
    prepackage step, check-node.mjs, stops first with one line naming the Node.js that vsce's engines ask for (the
    lock's vsce here), and lets a new enough Node.js through."""
    node = shutil.which("node")
    if not node:
        pytest.skip("node is needed for the VS Code extension's packaging check")
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    assert manifest["scripts"]["prepackage"] == "node check-node.mjs"
    lock = json.loads((EXTENSION / "package-lock.json").read_text(encoding="utf-8"))
    vsce = lock["packages"]["node_modules/@vscode/vsce"]
    minimum = int(re.search(r"\d+", vsce["engines"]["node"])[0])
    (tmp_path / "node_modules" / "@vscode" / "vsce").mkdir(parents=True)
    (tmp_path / "node_modules" / "@vscode" / "vsce" / "package.json").write_text(json.dumps(vsce))
    shutil.copy(EXTENSION / "check-node.mjs", tmp_path / "check-node.mjs")
    (tmp_path / "older.cjs").write_text(OLDER_NODE)
    older = subprocess.run([node, "--require", str(tmp_path / "older.cjs"), "check-node.mjs"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert older.returncode == 1 and older.stdout == "", older
    assert older.stderr.strip().splitlines() == [
        f"npm run package: vsce, which makes completer.vsix, needs Node.js {minimum} or newer, and this is Node.js "
        "18.20.4: install a newer Node.js (Debian 12's apt has 18), then run it again"]
    running = subprocess.run([node, "-p", "process.versions.node"], capture_output=True, text=True, timeout=60).stdout
    if int(running.split(".")[0]) >= minimum:
        current = subprocess.run([node, "check-node.mjs"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert (current.returncode, current.stderr) == (0, ""), current
