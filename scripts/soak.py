"""A soak of the real server: many keystrokes over many documents, with pastes, undos and reopens, and the
worker's memory sampled as it goes, to see whether anything grows without bound.

    python scripts/soak.py --keystrokes 10000 --documents 20 --out /tmp/soak.json
    python scripts/soak.py --keystrokes 3000 --kill-every 500      # faults: the worker SIGKILLed while typing
    python scripts/soak.py --table "NAME=/tmp/soak.json" ...        # the table, a row per named run of 1,000+

Each keystroke is an incremental didChange and a completion at the cursor, typing stdlib files from a random
line; now and then a paste (several lines at once), an undo (the paste taken out again) or a close and reopen.
Every --every keystrokes it records the worker's RSS (Linux /proc) and the engine's KV cache bytes
(completer/info), so the growth outside the caches can be read off: RSS minus cache bytes. With --kill-every N
it SIGKILLs the worker every N keystrokes and times the next keystroke's reply, which waits for the restart.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_lsp import utf16_len, worker_rss_mb  # noqa: E402
from lsp.rawclient import RawClient  # noqa: E402


def sources(count: int, seed: int) -> list[str]:
    files = sorted(p for p in Path(sysconfig.get_paths()["stdlib"]).glob("*.py") if p.stat().st_size > 20000)
    random.Random(seed).shuffle(files)
    return [p.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n") for p in files[:count]]


class Doc:
    """One open document: the text typed so far and the rest still to type."""

    def __init__(self, uri: str, text: str, rng: random.Random) -> None:
        lines = text.split("\n")
        start = rng.randrange(20, max(21, len(lines) - 200))
        self.uri, self.typed, self.rest = uri, "\n".join(lines[:start]) + "\n", "\n".join(lines[start:])
        self.version = 1

    def cursor(self) -> tuple[int, int]:
        line = self.typed.count("\n")
        return line, utf16_len(self.typed[self.typed.rfind("\n") + 1:])


def run(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    env = dict(os.environ)
    logs = tempfile.TemporaryDirectory(prefix="completer-soak-logs-")
    env["COMPLETER_LOG_DIR"] = logs.name
    env["COMPLETER_STANDALONE"] = "1"  # its own worker: a shared engine may run with another's environment
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    client = RawClient([sys.executable, "-m", "lsp", "--log-level", "WARNING"], env=env, stderr=sys.stderr)
    samples, latencies, errors, recoveries = [], [], 0, []
    killed = False
    try:
        client.initialize({"completer": json.loads(args.settings) if args.settings else {}})
        while not client.request("completer/info")["result"].get("model"):
            time.sleep(0.05)
        texts = sources(args.documents, args.seed)
        docs = [Doc(f"file:///soak/doc{i}.py", text, rng) for i, text in enumerate(texts)]
        for doc in docs:
            client.open(doc.uri, doc.typed)
        for keystroke in range(1, args.keystrokes + 1):
            doc = docs[rng.randrange(len(docs)) if keystroke % 50 == 0 else (keystroke // 50) % len(docs)]
            if not doc.rest:
                doc.rest = texts[docs.index(doc)]
            roll = rng.random()
            line, col = doc.cursor()
            doc.version += 1
            if roll < 0.01:  # a paste of several lines, then sometimes its undo
                cut = doc.rest.find("\n", min(len(doc.rest), 400))
                piece = doc.rest[:cut + 1] if cut != -1 else doc.rest
                client.change(doc.uri, doc.version, (line, col), (line, col), piece)
                doc.typed, doc.rest = doc.typed + piece, doc.rest[len(piece):]
                if rng.random() < 0.5:
                    end = doc.cursor()
                    doc.version += 1
                    client.change(doc.uri, doc.version, (line, col), end, "")
                    doc.rest, doc.typed = doc.typed[len(doc.typed) - len(piece):] + doc.rest, doc.typed[:-len(piece)]
            elif roll < 0.012:  # closed and opened again
                client.notify("textDocument/didClose", {"textDocument": {"uri": doc.uri}})
                client.open(doc.uri, doc.typed, version=doc.version)
            else:
                ch, doc.rest = doc.rest[0], doc.rest[1:]
                client.change(doc.uri, doc.version, (line, col), (line, col), ch)
                doc.typed += ch
            line, col = doc.cursor()
            sent = time.perf_counter()
            response = client.completion(doc.uri, line, col, timeout=60)
            latencies.append((time.perf_counter() - sent) * 1000)
            errors += "error" in response
            if killed:  # this reply waited for the new worker
                recoveries.append({"keystroke": keystroke, "ms": round(latencies[-1], 1),
                                   "answered": "result" in response})
                killed = False
            if keystroke % args.every == 0:
                info = client.request("completer/info")["result"]
                samples.append({"keystroke": keystroke, "worker_rss_mb": worker_rss_mb(info["server"]["worker_pid"]),
                                "cache_mb": round((info.get("cache_bytes") or 0) / 2**20, 1),
                                "documents_cached": info.get("documents_cached")})
                print(json.dumps(samples[-1]), flush=True)
            if args.kill_every and keystroke % args.kill_every == 0:  # after the sample, which reads its memory
                os.kill(client.request("completer/info")["result"]["server"]["worker_pid"], signal.SIGKILL)
                killed = True
    finally:
        client.close()
        logs.cleanup()
    ordered = sorted(latencies)
    return {"command": " ".join(["python", "scripts/soak.py", *sys.argv[1:]]), "keystrokes": len(latencies),
            "errors": errors, "p50_ms": round(statistics.median(ordered), 1),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 1), "samples": samples,
            "recoveries": recoveries}


def named_results(items: list[str]) -> list[tuple[str, dict]]:
    """--table's NAME=FILE pairs, each file read; what is not such a pair, or not JSON, is a ValueError naming it,
    so that main can say it in one line."""
    named = []
    for item in items:
        name, equals, file = item.partition("=")
        if not equals or not name or not file:
            raise ValueError(f"{item!r} is not NAME=FILE")
        try:
            named.append((name, json.loads(Path(file).read_text(encoding="utf-8"))))
        except ValueError as error:  # not JSON, or not text
            raise ValueError(f"{file}: not soak results written by --out ({error})") from None
    return named


def table(named: list[tuple[str, dict]]) -> str:
    """The markdown table of soak results, one row per (name, result)."""
    rows = ["| worker | RSS MB at 1,000 | RSS MB at 10,000 | growth | outside the KV caches, MB | KV caches MB "
            "| p50 ms | p95 ms | errors |", "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for name, result in named:
        first = next((s for s in result["samples"] if s["keystroke"] >= 1000), None)
        if first is None or "growth_after_1000" not in result:
            raise ValueError(f"{name}: a soak of {result['keystrokes']} keystrokes with no memory sample at or "
                             "after keystroke 1,000, where the table's growth starts")
        last, growth = result["samples"][-1], result["growth_after_1000"]
        rows.append(f"| {name} | {first['worker_rss_mb']} | {last['worker_rss_mb']} | {100 * growth['rss']:+.1f} % "
                    f"| {growth['outside_caches_mb'][0]} → {growth['outside_caches_mb'][1]} | {last['cache_mb']} "
                    f"| {result['p50_ms']} | {result['p95_ms']} | {result['errors']} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keystrokes", type=int, default=10000)
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--every", type=int, default=500, help="sample the memory every this many keystrokes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--settings", default=None, help="server settings as JSON")
    parser.add_argument("--kill-every", type=int, default=0, help="SIGKILL the worker every this many keystrokes")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--table", nargs="+", metavar="NAME=FILE", default=None,
                        help="print the markdown table of results files, each row named")
    args = parser.parse_args()
    if args.table:
        try:
            print(table(named_results(args.table)))
        except (OSError, ValueError) as error:
            parser.error(f"--table: {error}")
        except (KeyError, TypeError) as error:
            parser.error(f"--table: not soak results written by --out (no {error})")
        return
    result = run(args)
    first = next((s for s in result["samples"] if s["keystroke"] >= 1000), None)
    last = result["samples"][-1] if result["samples"] else None
    if first and last and first["worker_rss_mb"] and last["worker_rss_mb"]:
        outside = lambda s: s["worker_rss_mb"] - s["cache_mb"]  # noqa: E731
        result["growth_after_1000"] = {"rss": round(last["worker_rss_mb"] / first["worker_rss_mb"] - 1, 3),
                                       "outside_caches_mb": [round(outside(first), 1), round(outside(last), 1)]}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}))


if __name__ == "__main__":
    main()
