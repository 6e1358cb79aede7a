"""Memory of editor windows: N language servers on the user's shared engine, with their sessions forked by
the session host (the default) and each in the process the editor started (COMPLETER_SESSION_HOST=0),
against N servers with private workers (`--standalone`), after each window opened a file and asked for
suggestions at a few cursors.

    python scripts/bench_shared.py --windows 4 --out docs/bench_shared.json

Memory is the resident set (RSS) and the proportional set (PSS: shared pages divided among the processes
that map them, so N processes sharing libraries are not counted N times) of every process the windows run,
from /proc (Linux): the processes the editor started (relays, where there is a session host), the session
host and its sessions, and every worker or engine process.
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
    """RSS, PSS and private dirty pages of one process, in kB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
        for line in rollup:
            name, _, rest = line.partition(":")
            if name in ("Rss", "Pss", "Private_Dirty"):
                out[name.lower()] = int(rest.split()[0])
    return out


def windows(count: int, standalone: bool, session_host: bool, runtime: Path) -> dict:
    """Start `count` servers, let each complete at a few cursors of the sample, and sum their memory."""
    env = dict(os.environ, COMPLETER_RUNTIME_DIR=str(runtime), COMPLETER_LOG_DIR=str(runtime / "logs"),
               PYTHONPATH=str(REPO), COMPLETER_ENGINE_IDLE_EXIT_S="3",
               COMPLETER_SESSION_HOST="1" if session_host else "0")
    env.pop("COMPLETER_STANDALONE", None)
    cmd = [sys.executable, "-m", "lsp", "--log-level", "WARNING"] + (["--standalone"] if standalone else [])
    clients = [RawClient(cmd, env=env) for _ in range(count)]
    try:
        for client in clients:
            client.initialize({"completer": {}})
        workers: set[int] = set()
        servers = {client.proc.pid for client in clients}
        sessions: set[int] = set()
        text = SAMPLE.read_text(encoding="utf-8")
        lines = text.split("\n")
        for index, client in enumerate(clients):
            deadline = time.monotonic() + 60
            while not (info := client.request("completer/info")["result"]).get("model"):
                if time.monotonic() > deadline:
                    raise SystemExit("a server never became ready")
                time.sleep(0.05)
            workers.add(info["server"]["worker_pid"])
            servers.update(pid for pid in (info["server"]["pid"], info["server"].get("session_host_pid")) if pid)
            if info["server"].get("session_host_pid"):
                sessions.add(info["server"]["pid"])
            uri = f"file:///bench/window{index}.py"
            client.open(uri, text)
            for line in range(10, min(len(lines), 40), 5):
                client.completion(uri, line, len(lines[line]) // 2, timeout=60)
        time.sleep(1.0)  # search-ahead and prefills settle
        hosted = len(servers) > count
        if session_host and not standalone and not hosted:
            raise SystemExit("the sessions did not run in a session host")
        servers_kb = [memory_kb(pid) for pid in sorted(servers)]
        engines = [memory_kb(pid) for pid in workers]
        return {"windows": count, "standalone": standalone, "session_host": hosted, "server_processes": len(servers),
                "worker_processes": len(workers),
                "servers_rss_mb": round(sum(m["rss"] for m in servers_kb) / 1024, 1),
                "servers_pss_mb": round(sum(m["pss"] for m in servers_kb) / 1024, 1),
                "workers_rss_mb": round(sum(m["rss"] for m in engines) / 1024, 1),
                "workers_pss_mb": round(sum(m["pss"] for m in engines) / 1024, 1),
                "total_rss_mb": round(sum(m["rss"] for m in servers_kb + engines) / 1024, 1),
                "total_pss_mb": round(sum(m["pss"] for m in servers_kb + engines) / 1024, 1),
                "session_private_dirty_mb": [round(memory_kb(pid)["private_dirty"] / 1024, 1)
                                             for pid in sorted(sessions)]}
    finally:
        for client in clients:
            client.close()


def run(args: argparse.Namespace) -> dict:
    """One, two and N windows on the shared engine, with the session host and without; then N with private
    workers."""
    runs = []
    counts = sorted({1, 2, args.windows})
    layouts = [(count, False, True) for count in counts] + [(count, False, False) for count in counts]
    for count, standalone, session_host in [*layouts, (args.windows, True, False)]:
        with tempfile.TemporaryDirectory(prefix="completer-bench-shared-") as runtime:
            os.chmod(runtime, 0o700)
            runs.append(windows(count, standalone, session_host, Path(runtime)))
        time.sleep(4)  # the engine and host of the last run exit (3 s idle in COMPLETER_ENGINE_IDLE_EXIT_S)
    return {"command": "python scripts/bench_shared.py " + " ".join(sys.argv[1:]), "runs": runs,
            "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}"}


def _layout(run: dict) -> str:
    if run["standalone"]:
        return "private workers (--standalone), each server in its own process"
    if run.get("session_host"):
        return "shared engine, sessions forked by the session host"
    return "shared engine, each server in its own process (COMPLETER_SESSION_HOST=0)"


def table(result: dict) -> str:
    """Each run's memory, and its ratio to one window's in the same layout (private workers: to one window on
    the shared engine in its own process, the layout before the session host)."""
    rows = ["| windows | layout | server processes | worker processes | servers PSS MB | workers PSS MB "
            "| total PSS MB | total RSS MB | total PSS / one window's |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    ones = {bool(run.get("session_host")): run["total_pss_mb"] for run in result["runs"] if run["windows"] == 1}
    for run in result["runs"]:
        one = ones.get(bool(run.get("session_host")), result["runs"][0]["total_pss_mb"])
        rows.append(f"| {run['windows']} | {_layout(run)} | {run.get('server_processes', run['windows'])} "
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
