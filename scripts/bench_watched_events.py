"""How long the server's event loop stalls while it indexes a burst of watched-file events (a branch switch).

    python scripts/bench_watched_events.py --files 2000 --out /tmp/events.json

Builds a folder of --files small Python files, starts the real server on it (stdio, the embedded model, its own
worker), waits
for its workspace index, rewrites every file and sends one workspace/didChangeWatchedFiles naming them all, as
an editor's file watcher does after `git switch`. Meanwhile it sends completer/info, a request the event loop
answers itself, back to back for --seconds, and reports the round trips' median and maximum: the maximum is
the longest the loop was held, which a keystroke's request would have waited too.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lsp.rawclient import RawClient  # noqa: E402


def write_files(folder: Path, count: int, name: str) -> list[Path]:
    paths = [folder / f"module_{number}.py" for number in range(count)]
    for number, path in enumerate(paths):
        path.write_text(f"def {name}_{number}(value):\n    return value + {number}\n" * 20, encoding="utf-8")
    return paths


def wait_for(client: RawClient, ready, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready(client.request("completer/info")["result"]):
        if time.monotonic() > deadline:
            raise SystemExit("bench_watched_events.py: the server never got ready")
        time.sleep(0.1)


def run(files: int, seconds: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = write_files(folder, files, "before")
        env = {**os.environ, "PYTHONPATH": str(REPO), "COMPLETER_STANDALONE": "1"}  # this tree's code, not that
        client = RawClient([sys.executable, "-m", "lsp"], env=env)  # of a session host started by another checkout
        try:
            client.request("initialize", {"processId": os.getpid(), "rootUri": folder.as_uri(), "capabilities": {}})
            client.notify("initialized", {})
            wait_for(client, lambda info: info.get("model") and not info["server"]["workspace_index"]["building"])
            write_files(folder, files, "after")
            client.notify("workspace/didChangeWatchedFiles",
                          {"changes": [{"uri": path.as_uri(), "type": 2} for path in paths]})
            round_trips = []
            started = time.perf_counter()
            while time.perf_counter() - started < seconds:
                sent = time.perf_counter()
                client.request("completer/info")
                round_trips.append((time.perf_counter() - sent) * 1000)
        finally:
            client.close()
    return {"files": files, "seconds": seconds, "round_trips": len(round_trips),
            "median_ms": round(statistics.median(round_trips), 2), "max_ms": round(max(round_trips), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=3.0, help="how long completer/info is timed after the event")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.files, args.seconds)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{result['files']} files changed: completer/info answered {result['round_trips']} times in "
          f"{result['seconds']} s, median {result['median_ms']} ms, longest {result['max_ms']} ms")


if __name__ == "__main__":
    main()
