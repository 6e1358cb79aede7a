"""Memory of editor windows: N language servers on the user's shared engine against N servers with private
workers (`--standalone`), after each window opened a file and asked for suggestions at a few cursors.

    python scripts/bench_shared.py --windows 4 --out docs/bench_shared.json

Memory is the resident set (RSS) and the proportional set (PSS: shared pages divided among the processes
that map them, so N processes sharing libraries are not counted N times) of every server process and every
worker or engine process, from /proc (Linux).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_output import add_output_arguments, run_or_table  # noqa: E402
from lsp.rawclient import RawClient  # noqa: E402

SAMPLE = REPO / "completer" / "samples" / "sample.py"


def memory_kb(pid: int) -> dict[str, int]:
    """RSS and PSS of one process, in kB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
        for line in rollup:
            name, _, rest = line.partition(":")
            if name in ("Rss", "Pss"):
                out[name.lower()] = int(rest.split()[0])
    return out


def windows(count: int, standalone: bool, runtime: Path) -> dict:
    """Start `count` servers, let each complete at a few cursors of the sample, and sum their memory."""
    env = dict(os.environ, COMPLETER_RUNTIME_DIR=str(runtime), COMPLETER_LOG_DIR=str(runtime / "logs"),
               PYTHONPATH=str(REPO), COMPLETER_ENGINE_IDLE_EXIT_S="3")
    env.pop("COMPLETER_STANDALONE", None)
    cmd = [sys.executable, "-m", "lsp", "--log-level", "WARNING"] + (["--standalone"] if standalone else [])
    clients = [RawClient(cmd, env=env) for _ in range(count)]
    try:
        for client in clients:
            client.initialize({"completer": {}})
        workers: set[int] = set()
        text = SAMPLE.read_text(encoding="utf-8")
        lines = text.split("\n")
        for index, client in enumerate(clients):
            deadline = time.monotonic() + 60
            while not (info := client.request("completer/info")["result"]).get("model"):
                if time.monotonic() > deadline:
                    raise SystemExit("a server never became ready")
                time.sleep(0.05)
            workers.add(info["server"]["worker_pid"])
            uri = f"file:///bench/window{index}.py"
            client.open(uri, text)
            for line in range(10, min(len(lines), 40), 5):
                client.completion(uri, line, len(lines[line]) // 2, timeout=60)
        time.sleep(1.0)  # search-ahead and prefills settle
        servers = [memory_kb(client.proc.pid) for client in clients]
        engines = [memory_kb(pid) for pid in workers]
        return {"windows": count, "standalone": standalone, "worker_processes": len(workers),
                "servers_rss_mb": round(sum(m["rss"] for m in servers) / 1024, 1),
                "servers_pss_mb": round(sum(m["pss"] for m in servers) / 1024, 1),
                "workers_rss_mb": round(sum(m["rss"] for m in engines) / 1024, 1),
                "workers_pss_mb": round(sum(m["pss"] for m in engines) / 1024, 1),
                "total_rss_mb": round(sum(m["rss"] for m in servers + engines) / 1024, 1),
                "total_pss_mb": round(sum(m["pss"] for m in servers + engines) / 1024, 1)}
    finally:
        for client in clients:
            client.close()


def run(args: argparse.Namespace) -> dict:
    """One window on the shared engine, then N on it, then N with private workers."""
    runs = []
    for count, standalone in ((1, False), (args.windows, False), (args.windows, True)):
        with tempfile.TemporaryDirectory(prefix="completer-bench-shared-") as runtime:
            os.chmod(runtime, 0o700)
            runs.append(windows(count, standalone, Path(runtime)))
        time.sleep(4)  # the shared engine of the last run exits (3 s idle in COMPLETER_ENGINE_IDLE_EXIT_S)
    return {"command": "python scripts/bench_shared.py " + " ".join(sys.argv[1:]), "runs": runs,
            "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}"}


def table(result: dict) -> str:
    rows = ["| windows | workers | worker processes | servers PSS MB | workers PSS MB | total PSS MB | total RSS MB "
            "| total PSS / one window's |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
    one = result["runs"][0]["total_pss_mb"]
    for run in result["runs"]:
        rows.append(f"| {run['windows']} | {'private (--standalone)' if run['standalone'] else 'shared engine'} "
                    f"| {run['worker_processes']} | {run['servers_pss_mb']} | {run['workers_pss_mb']} "
                    f"| {run['total_pss_mb']} | {run['total_rss_mb']} | {run['total_pss_mb'] / one:.2f}× |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=4)
    add_output_arguments(parser)
    return run_or_table(parser.parse_args(argv), run, table)


if __name__ == "__main__":
    sys.exit(main())
