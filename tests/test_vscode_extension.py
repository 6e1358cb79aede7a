"""Runs the VS Code extension's own tests (vscode-extension/: `npm run build`, then `npm test`).

`npm test` runs the unit tests (mocked `vscode` module) and an integration test that starts the real
server with this interpreter (`COMPLETER_PYTHON`, `-m lsp`) and checks inline completions over stdio.
Skipped only when node or npm is not installed.
"""
from __future__ import annotations

import os
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
