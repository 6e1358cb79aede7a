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
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_output import (add_output_arguments, add_several_results_argument, print_several_results,  # noqa: E402
                          run_or_table)
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


def mappings(pid: int) -> list[tuple[int, int, int]]:
    """Each mapping of a process: its start and end addresses and its private dirty pages in kB (Linux smaps)."""
    found: list[tuple[int, int, int]] = []
    with open(f"/proc/{pid}/smaps", encoding="ascii", errors="replace") as smaps:
        for line in smaps:
            field, _, rest = line.partition(" ")
            if not field.endswith(":"):  # a mapping's first line: "start-end perms offset dev inode [path]"
                start, _, end = field.partition("-")
                found.append((int(start, 16), int(end, 16), 0))
            elif field == "Private_Dirty:" and found:
                start, end, _ = found[-1]
                found[-1] = (start, end, int(rest.split()[0]))
    return found


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
PRESENT, EXCLUSIVE = 1 << 63, 1 << 56  # /proc/PID/pagemap: the page is in memory; mapped by this process alone


def page_flags(pid: int, start: int, end: int) -> list[int]:
    """The pagemap entry of each page from `start` to `end` in a process (flags only: without privileges the
    kernel zeroes the page frame numbers, not these bits)."""
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        pagemap.seek(start // PAGE * 8)
        data = pagemap.read((end - start) // PAGE * 8)
    return list(memoryview(data).cast("Q"))


def session_pages_kb(session: int, host: int) -> dict[str, int]:
    """Where a forked session's private pages lie, in kB, page by page: at addresses its host maps too, those it
    copied (the host has the page too: one of them wrote to a page they shared, such as an object's reference
    count, and each now has its own; with several sessions a write by the host leaves the page shared among
    them, so a session's own writes are what count then) and those it touched first (the host never did: new
    objects in the host's free address space); and at addresses only the session maps (thread stacks, new
    allocator arenas)."""
    host_ranges = [(low, high) for low, high, _ in mappings(host)]
    kb = {"copied": 0, "first_touched": 0, "own": 0}
    for start, end, dirty in mappings(session):
        if not dirty:
            continue
        mine = page_flags(session, start, end)
        in_host = [None] * len(mine)  # per page: whether the host has it in memory; None where it maps nothing
        for low, high in host_ranges:
            low, high = max(low, start), min(high, end)
            if low < high:
                first = (low - start) // PAGE
                for index, flags in enumerate(page_flags(host, low, high)):
                    in_host[first + index] = bool(flags & PRESENT)
        for flags, hosted in zip(mine, in_host):
            if flags & PRESENT and flags & EXCLUSIVE:
                kb["own" if hosted is None else "copied" if hosted else "first_touched"] += PAGE // 1024
    return kb


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
                                             for pid in sorted(sessions)],
                "session_private_dirty_split_mb": session_splits(sessions)}
    finally:
        for client in clients:
            client.close()


def session_splits(sessions: set[int]) -> list[dict[str, float]]:
    """Each session's private pages, in MB, by where they lie (`session_pages_kb`; the host is its parent)."""
    splits = []
    for pid in sorted(sessions):
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        splits.append({name: round(kb / 1024, 1) for name, kb in session_pages_kb(pid, parent).items()})
    return splits


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
    notes = [f"- {run['windows']} window{'s' if run['windows'] > 1 else ''}: "
             + ", ".join(f"{total} ({split['copied']} copied from the host, {split['first_touched']} first touched in "
                         f"its mappings, {split['own']} in mappings of its own)"
                         for total, split in zip(run["session_private_dirty_mb"],
                                                 run["session_private_dirty_split_mb"]))
             for run in result["runs"] if run.get("session_private_dirty_split_mb")]
    if notes:
        rows += ["", "Each session's private dirty MB, and its private pages by where they lie (MB):", "", *notes]
    return "\n".join(rows)


def ratios_table(paths: list[Path]) -> str:
    """The session host's layout in several results files, a row each, then the median of each group of files
    whose names differ only after their last '-' (runs of one checkout): two checkouts' runs, alternated by
    hand, side by side."""
    rows = ["| run | 1 window PSS MB | N windows | N windows PSS MB | N windows / one "
            "| a session's private MB (median) |", "|---|---:|---:|---:|---:|---:|"]
    groups: dict[str, list[tuple[float, float]]] = {}
    for path in paths:
        hosted = [run for run in json.loads(path.read_text(encoding="utf-8"))["runs"] if run.get("session_host")]
        one, most = min(hosted, key=lambda run: run["windows"]), max(hosted, key=lambda run: run["windows"])
        ratio = most["total_pss_mb"] / one["total_pss_mb"]
        private = round(statistics.median(most["session_private_dirty_mb"]), 1)
        groups.setdefault(path.stem.rsplit("-", 1)[0], []).append((ratio, private))
        rows.append(f"| {path.stem} | {one['total_pss_mb']} | {most['windows']} | {most['total_pss_mb']} "
                    f"| {ratio:.3f}× | {private} |")
    for group, runs in groups.items():
        if len(runs) > 1:
            ratio, private = statistics.median(r for r, _ in runs), statistics.median(p for _, p in runs)
            rows.append(f"| **{group}, median of {len(runs)}** | | | | {ratio:.3f}× | {private:.1f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=4)
    add_several_results_argument(parser, "--ratios")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.ratios:
        return print_several_results(parser, "--ratios", args.ratios, ratios_table)
    return run_or_table(args, run, table)


if __name__ == "__main__":
    sys.exit(main())
