"""Keystroke-to-reply latency of the language server, replaying the typing of a real file.

The real server (`python -m lsp`, with its worker and the committed model) is driven over stdio:
the file is opened truncated at a start line, then the rest is typed one character at a time. Each
keystroke is an incremental didChange followed by a textDocument/completion at the new cursor; the
time from sending the didChange to receiving the completion reply is that keystroke's latency.
Keystrokes are sequential (the next one is typed when the reply arrived), as for a fast typist
whose editor never has to cancel.

    python scripts/bench_lsp.py                      # textwrap.py from the stdlib, 400 keystrokes
    python scripts/bench_lsp.py --file some.py --start-line 40 --keystrokes 1000 --settings '{"beams": 2}'
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lsp.rawclient import RawClient  # noqa: E402


def default_file() -> Path:
    return Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py"


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def worker_rss_mb(pid: int | None) -> float | None:
    """The worker's resident memory (Linux /proc), which holds the model and the caches."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration, TypeError, ValueError):
        return None
    return round(kb / 1024, 1)


def replay(client: RawClient, uri: str, prefix: str, start_line: int, to_type: str, actual: list[str],
           pause_s: float = 0.0, ask_context: bool = False, pause_after_open_s: float = 0.0) -> dict[str, list]:
    """Type `to_type` after `prefix` in a new document, `pause_s` between a reply and the next keystroke: each
    keystroke's latency (ms), whether it got lines, whether the top one was the file's actual line, and with
    `ask_context` the context the search ran at (asked after the reply, untimed)."""
    client.open(uri, prefix)
    time.sleep(pause_after_open_s)
    line, col_units, current, version = start_line, 0, "", 1
    out: dict[str, list] = {"latencies": [], "hits": [], "answered": [], "contexts": []}
    for ch in to_type:
        version += 1
        pos = (line, col_units)
        sent = time.perf_counter()
        client.change(uri, version, pos, pos, ch)
        if ch == "\n":
            line, col_units, current = line + 1, 0, ""
        else:
            current += ch
            col_units += utf16_len(ch)
        msg_id = client.request_nowait("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": col_units}})
        response = client.wait(msg_id, timeout=60)
        out["latencies"].append((client.arrival.pop(msg_id) - sent) * 1000)
        if ask_context:
            out["contexts"].append(client.request("completer/info")["result"]["server"]["last_context_tokens"])
        items = (response.get("result") or {}).get("items") or []
        target = actual[line] if line < len(actual) else ""
        out["answered"].append(bool(items))
        out["hits"].append(bool(items) and items[0]["textEdit"]["newText"] == target and target != current)
        if pause_s:
            time.sleep(pause_s)
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return out


def run(args: argparse.Namespace) -> dict:
    path = Path(args.file) if args.file else default_file()
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    lines = text.split("\n")
    start_line = min(args.start_line, len(lines) - 1)
    prefix = "\n".join(lines[:start_line]) + ("\n" if start_line else "")
    to_type = text[len(prefix):][: args.keystrokes]

    env = dict(os.environ)
    logs = None if env.get("COMPLETER_LOG_DIR") else tempfile.TemporaryDirectory(prefix="completer-bench-logs-")
    if logs is not None:  # keep the benchmark's server logs out of the user's log dir
        env["COMPLETER_LOG_DIR"] = logs.name
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["COMPLETER_STANDALONE"] = "1"  # its own worker, whose memory it reports: not a shared engine's
    client = RawClient([sys.executable, "-m", "lsp", "--log-level", "WARNING"], env=env, stderr=sys.stderr)
    try:
        settings = json.loads(args.settings) if args.settings else {}
        if args.root:  # a workspace folder: the server indexes it while the typing goes on
            client.request("initialize", {"processId": os.getpid(), "rootUri": Path(args.root).resolve().as_uri(),
                                          "capabilities": {}, "initializationOptions": {"completer": settings}})
            client.notify("initialized", {})
        else:
            client.initialize({"completer": settings})
        deadline = time.monotonic() + 60
        while not client.request("completer/info")["result"].get("model"):
            if time.monotonic() > deadline:
                raise SystemExit("the server's worker never became ready")
            time.sleep(0.05)
        uri = path.resolve().as_uri()
        # with no pause after opening, the first keystroke pays for the opened file's prefill
        typed = replay(client, uri, prefix, start_line, to_type, lines, ask_context=True,
                       pause_after_open_s=args.pause_after_open)
        latencies, contexts = typed["latencies"], typed["contexts"]
        with_items, hits = sum(typed["answered"]), sum(typed["hits"])
        info = client.request("completer/info")["result"]
        rss_mb = worker_rss_mb(info.get("server", {}).get("worker_pid"))
    finally:
        client.close()
        if logs is not None:
            logs.cleanup()
    return {
        "file": str(path), "start_line": start_line, "keystrokes": len(latencies), "latencies": latencies,
        "with_items": with_items, "top1_hits": hits, "info": info, "worker_rss_mb": rss_mb,
        "pause_after_open_s": args.pause_after_open,
        "context_tokens": [c for c in contexts if c is not None],
    }


def report(result: dict, argv: list[str]) -> str:
    lat = result["latencies"]
    n = max(1, result["keystrokes"])
    info = result["info"]
    server = info.get("server", {})
    name = Path(result["file"]).name
    contexts = result["context_tokens"] or [0]
    rows = [
        "| file | keystrokes | context tokens | first ms | p50 ms | p95 ms | max ms | mean ms | replies with lines "
        "| top line = actual line | worker RSS MB |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {name} (from line {result['start_line'] + 1}) | {result['keystrokes']} "
        f"| {min(contexts)}–{max(contexts)} (median {statistics.median(contexts):.0f}) | {lat[0]:.1f} "
        f"| {percentile(lat, 0.5):.1f} "
        f"| {percentile(lat, 0.95):.1f} | {max(lat):.1f} | {statistics.fmean(lat):.1f} "
        f"| {100 * result['with_items'] / n:.0f}% | {100 * result['top1_hits'] / n:.0f}% "
        f"| {result.get('worker_rss_mb') or 'n/a'} |",
    ]
    settings = server.get("settings", {})
    lines = [
        "```",
        "$ " + " ".join(shlex.quote(a) for a in ["python", "scripts/bench_lsp.py", *argv]),
        "```",
        "",
        *rows,
        "",
        f"Model `{info.get('model')}` on {', '.join(info.get('providers') or [])}, threads: {info.get('threads')}; "
        f"beams {settings.get('beams')}, maxSuggestions {settings.get('maxSuggestions')}, "
        f"maxTokens {settings.get('maxTokens')}; {info.get('model_runs')} model runs in total. "
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"{platform.system()}.",
        "Latency = incremental didChange sent -> textDocument/completion reply received, measured by the client "
        "over stdio; keystrokes are sequential.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default=None, help="file to replay (default: the stdlib's textwrap.py)")
    parser.add_argument("--start-line", type=int, default=60, help="open the file truncated here (1-based line)")
    parser.add_argument("--keystrokes", type=int, default=400)
    parser.add_argument("--settings", default=None, help='server settings as JSON, e.g. \'{"beams": 2}\'')
    parser.add_argument("--root", default=None, help="a workspace folder for the server to index (rootUri)")
    parser.add_argument("--pause-after-open", type=float, default=0.0,
                        help="seconds between opening the file and the first keystroke (the server prefills then)")
    parser.add_argument("--json", action="store_true", help="also print the raw latencies as JSON")
    args = parser.parse_args(argv)
    args.start_line = max(0, args.start_line - 1)
    result = run(args)
    print(report(result, argv))
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "info"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
