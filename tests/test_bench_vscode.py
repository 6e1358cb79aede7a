"""scripts/bench_vscode.py in a checkout whose extension has no npm packages yet (a fresh clone or worktree,
before test.sh's npm ci): one line says what to run, instead of npm's stack and a CalledProcessError."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_a_checkout_without_the_extensions_npm_packages_is_told_to_install_them(tmp_path: Path):
    (tmp_path / "scripts").mkdir()
    for script in ("bench_vscode.py", "install_vscode_e2e.sh"):  # the installer's --check finds this machine's
        shutil.copy(REPO / "scripts" / script, tmp_path / "scripts")
    (tmp_path / "tests" / "vscode_e2e").mkdir(parents=True)
    for pins in ("package.json", "package-lock.json"):
        shutil.copy(REPO / "tests" / "vscode_e2e" / pins, tmp_path / "tests" / "vscode_e2e")
    shutil.copytree(REPO / "vscode-extension", tmp_path / "vscode-extension",
                    ignore=shutil.ignore_patterns("node_modules", "out", "dist"))
    run = subprocess.run([sys.executable, "scripts/bench_vscode.py", "--keystrokes", "1", "--out",
                          str(tmp_path / "bench.json")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.stderr.strip().splitlines() == [
        "the extension's npm packages are not installed: run `(cd vscode-extension && npm ci)` first"]
