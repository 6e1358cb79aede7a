"""Live keystrokes while the shared engine has other work: one window types (the LSP typing replay of
scripts/bench_lsp.py) while a second window on the same engine keeps opening 1,000-token files, whose
context the engine prefills in the background; the first window's own search-ahead runs as usual.

    python scripts/bench_load.py --out docs/bench_load.json
    python scripts/bench_load.py --runs load-a-1.json load-b-1.json load-a-2.json load-b-2.json

Blocks of keystrokes alternate between an idle second window and a busy one, so the machine's noise falls
on both alike; each block types the same text into a new document, at a typist's pace (--pause), so that the
engine's background work (prefills, search-ahead) runs between keystrokes, as it does for a person. The
figure is the typing window's keystroke-to-reply p95 under load over its p95 idle (issue 31: at most 1.3x).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_lsp import percentile, replay  # noqa: E402
from bench_remote import summary  # noqa: E402
from bench_output import (add_output_arguments, add_several_results_argument, print_several_results,  # noqa: E402
                          run_or_table)
from lsp.rawclient import RawClient  # noqa: E402

OPEN_EVERY_S = 0.3  # the busy window opens a new file this often (each prefill takes longer than that)


def opener(client: RawClient, text: str, stop: threading.Event, opened: list[int]) -> None:
    """Open a new copy of `text` every OPEN_EVERY_S, closing the one before, until `stop`."""
    index = 0
    while not stop.is_set():
        uri = f"file:///bench/load/other{index}.py"
        client.open(uri, text)
        if index:
            client.notify("textDocument/didClose", {"textDocument": {"uri": f"file:///bench/load/other{index - 1}.py"}})
        opened.append(index)
        index += 1
        stop.wait(OPEN_EVERY_S)


def run(args: argparse.Namespace) -> dict:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    path = Path(args.file) if args.file else stdlib / "textwrap.py"
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    lines = text.split("\n")
    start = min(args.start_line - 1, len(lines) - 1)
    prefix = "\n".join(lines[:start]) + ("\n" if start else "")
    to_type = text[len(prefix):][:args.keystrokes]
    other = (stdlib / "shlex.py").read_text(encoding="utf-8")[:3500]  # about 1,000 tokens of code
    with tempfile.TemporaryDirectory(prefix="completer-bench-load-") as runtime:
        os.chmod(runtime, 0o700)
        env = dict(os.environ, COMPLETER_RUNTIME_DIR=runtime, COMPLETER_LOG_DIR=str(Path(runtime) / "logs"),
                   PYTHONPATH=str(REPO), COMPLETER_ENGINE_IDLE_EXIT_S="3")
        env.pop("COMPLETER_STANDALONE", None)
        cmd = [sys.executable, "-m", "lsp", "--log-level", "WARNING"]
        typist, busy = RawClient(cmd, env=env), RawClient(cmd, env=env)
        results: dict[str, list[float]] = {"idle": [], "load": []}
        opened: list[int] = []
        try:
            settings = json.loads(args.settings) if args.settings else {}
            for client in (typist, busy):
                client.initialize({"completer": settings})
                deadline = time.monotonic() + 60
                while not client.request("completer/info")["result"].get("model"):
                    if time.monotonic() > deadline:
                        raise SystemExit("a server never became ready")
                    time.sleep(0.05)
            pids = {c.request("completer/info")["result"]["server"]["worker_pid"] for c in (typist, busy)}
            if len(pids) != 1:
                raise SystemExit(f"the two windows are not on one engine: {pids}")
            for block in range(args.blocks):
                mode = ("idle", "load")[block % 2] if block % 4 < 2 else ("load", "idle")[block % 2]
                stop = threading.Event()
                thread = threading.Thread(target=opener, args=(busy, other, stop, opened)) if mode == "load" else None
                if thread is not None:
                    thread.start()
                    time.sleep(OPEN_EVERY_S)
                uri = (REPO / f"bench-load-{block}.py").as_uri()
                results[mode] += replay(typist, uri, prefix, start, to_type, lines, args.pause)["latencies"]
                stop.set()
                if thread is not None:
                    thread.join()
                time.sleep(args.settle)
        finally:
            typist.close()
            busy.close()
    idle, load = results["idle"], results["load"]
    return {
        "command": "python scripts/bench_load.py " + " ".join(sys.argv[1:]),
        "settings": json.loads(args.settings) if args.settings else {},
        "file": path.name, "start_line": start + 1, "keystrokes_per_block": len(to_type), "blocks": args.blocks,
        "files_opened_under_load": len(opened),
        "idle": summary(idle), "load": summary(load),
        "p95_ratio_load_over_idle": round(percentile(load, 0.95) / percentile(idle, 0.95), 3),
        "p50_ratio_load_over_idle": round(percentile(load, 0.5) / percentile(idle, 0.5), 3),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}",
        "latencies_ms": {"idle": [round(v, 2) for v in idle], "load": [round(v, 2) for v in load]},
    }


def table(result: dict) -> str:
    rows = ["| the other window | keystrokes | p50 ms | p90 ms | p95 ms | mean ms |", "|---|---:|---:|---:|---:|---:|"]
    for mode, label in (("idle", "idle"), ("load", f"opening a 1,000-token file every {OPEN_EVERY_S} s")):
        r = result[mode]
        rows.append(f"| {label} | {r['n']} | {r['p50_ms']} | {r['p90_ms']} | {r['p95_ms']} | {r['mean_ms']} |")
    return "\n".join(rows) + (f"\n\nload / idle: p50 {result['p50_ratio_load_over_idle']}×, p95 "
                              f"{result['p95_ratio_load_over_idle']}× ({result['files_opened_under_load']} files "
                              "opened under load)")


def runs_table(paths: list[Path]) -> str:
    """One row per result file (its name), then the median of each group of files whose names differ only after
    their last '-' (runs of the same code, one after another): runs of two checkouts, alternated by hand, side
    by side."""
    rows = ["| run | idle p50 ms | idle p95 ms | load p50 ms | load p95 ms | load / idle p95 |",
            "|---|---:|---:|---:|---:|---:|"]
    groups: dict[str, list[dict]] = {}
    for path in paths:
        result = json.loads(path.read_text(encoding="utf-8"))
        groups.setdefault(path.stem.rsplit("-", 1)[0], []).append(result)
        rows.append(f"| {path.stem} | {result['idle']['p50_ms']} | {result['idle']['p95_ms']} | "
                    f"{result['load']['p50_ms']} | {result['load']['p95_ms']} | "
                    f"{result['p95_ratio_load_over_idle']}× |")
    for group, results in groups.items():
        if len(results) > 1:
            cells = [statistics.median(r[mode][key] for r in results)
                     for mode, key in (("idle", "p50_ms"), ("idle", "p95_ms"), ("load", "p50_ms"), ("load", "p95_ms"))]
            ratio = statistics.median(r["p95_ratio_load_over_idle"] for r in results)
            rows.append(f"| **{group}, median of {len(results)}** | " + " | ".join(f"{c:.2f}" for c in cells)
                        + f" | {ratio:.3f}× |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default=None, help="file to replay (default: the stdlib's textwrap.py)")
    parser.add_argument("--start-line", type=int, default=60)
    parser.add_argument("--keystrokes", type=int, default=100, help="keystrokes per block")
    parser.add_argument("--blocks", type=int, default=8, help="blocks, half idle and half under load, alternating")
    parser.add_argument("--settle", type=float, default=0.5, help="seconds of quiet between blocks")
    parser.add_argument("--pause", type=float, default=0.2,
                        help="seconds between a reply and the next keystroke: a typist's pace, which leaves the "
                             "engine idle long enough (0.15 s) for its background work")
    parser.add_argument("--settings", default=None,
                        help='both windows\' server settings as JSON, e.g. \'{"modelPath": "/tmp/bundle"}\'')
    add_output_arguments(parser)
    add_several_results_argument(parser, "--runs")
    args = parser.parse_args(argv)
    if args.runs:
        return print_several_results(parser, "--runs", args.runs, runs_table)
    try:
        if not isinstance(json.loads(args.settings or "{}"), dict):
            raise ValueError("not an object")
    except ValueError as error:
        parser.error(f"--settings: not a JSON object of server settings ({error})")
    return run_or_table(args, run, table)


if __name__ == "__main__":
    sys.exit(main())
