"""Keystroke-to-reply latency through the language server: the local engine against the OpenAI-compatible
backend in front of llama.cpp's server on the same machine and the same weights, in one run.

    python scripts/bench_remote.py --out docs/bench_remote.json

Two real servers (`python -m lsp`) are driven over stdio, A with the default settings (the local worker and the
embedded INT8 model), B with `backend: "openai"` pointed at llama-cpp-python's server, which serves the same
model's weights as a GGUF (scripts/gguf_export.py; q8_0 by default, the closest to our INT8). Both replay the
typing of the same file, in blocks that alternate A and B (a fresh document each block), so the machine's noise
falls on both alike. Each keystroke is an incremental didChange then a textDocument/completion; its latency is
from sending the change to receiving the reply, keystrokes sequential, as in scripts/bench_lsp.py.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_lsp import percentile, replay  # noqa: E402
from llama_server import llama_server, our_gguf  # noqa: E402
from bench_output import add_output_arguments, run_or_table  # noqa: E402
from lsp.rawclient import RawClient  # noqa: E402

LLAMA_CONTEXT = 1024  # our model's positions
PROMPT_CHARS = 2400  # B's text before the cursor: llama.cpp's tokenization of it stays within the context


def start_server(settings: dict, env: dict[str, str]) -> RawClient:
    client = RawClient([sys.executable, "-m", "lsp", "--log-level", "WARNING"], env=env, stderr=sys.stderr)
    client.initialize({"completer": settings})
    deadline = time.monotonic() + 60
    while not client.request("completer/info")["result"].get("model"):
        if time.monotonic() > deadline:
            raise SystemExit(f"the server with settings {settings} never became ready")
        time.sleep(0.05)
    return client


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(percentile(values, 0.5), 2), "p90_ms": round(percentile(values, 0.9), 2),
            "p95_ms": round(percentile(values, 0.95), 2), "mean_ms": round(statistics.fmean(values), 2)}


def run(args: argparse.Namespace) -> dict:
    path = Path(args.file) if args.file else Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py"
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    lines = text.split("\n")
    start = min(args.start_line - 1, len(lines) - 1)
    prefix = "\n".join(lines[:start]) + ("\n" if start else "")
    to_type = text[len(prefix):][:args.keystrokes]
    env = dict(os.environ)
    logs = tempfile.TemporaryDirectory(prefix="completer-bench-logs-")
    env["COMPLETER_LOG_DIR"] = logs.name
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    gguf_dir = Path(tempfile.gettempdir()) / "completer-bench-gguf"
    gguf_path = our_gguf(gguf_dir, args.gguf_type)
    results: dict[str, dict[str, list]] = {"local": {}, "openai": {}}
    with llama_server(gguf_path, n_ctx=LLAMA_CONTEXT, threads=args.threads) as url:
        remote = {"backend": "openai", "endpoint": url, "model": gguf_path.stem, "fimTemplate": "none",
                  "promptChars": PROMPT_CHARS}
        clients = {"local": start_server({}, env), "openai": start_server(remote, env)}
        try:
            for block in range(args.blocks):
                order = ("local", "openai") if block % 2 == 0 else ("openai", "local")
                for name in order:
                    time.sleep(args.settle)  # the other server's work after its last keystroke (search-ahead) ends
                    uri = (REPO / f"bench-remote-{block}-{name}.py").as_uri()
                    one = replay(clients[name], uri, prefix, start, to_type, lines)
                    for key, values in one.items():
                        results[name].setdefault(key, []).extend(values)
            infos = {name: client.request("completer/info")["result"] for name, client in clients.items()}
        finally:
            for client in clients.values():
                client.close()
            logs.cleanup()
    local, openai = results["local"]["latencies"], results["openai"]["latencies"]
    return {
        "command": "python scripts/bench_remote.py " + " ".join(sys.argv[1:]),
        "file": path.name, "start_line": start + 1, "keystrokes_per_block": len(to_type), "blocks": args.blocks,
        "gguf": gguf_path.name, "llama_cpp_threads": args.threads, "prompt_chars_openai": PROMPT_CHARS,
        "local": {**summary(local), "answered": sum(results["local"]["answered"]),
                  "top_line_right": sum(results["local"]["hits"])},
        "openai": {**summary(openai), "answered": sum(results["openai"]["answered"]),
                   "top_line_right": sum(results["openai"]["hits"]),
                   "requests": infos["openai"].get("remote", {}).get("requests"),
                   "requests_failed": infos["openai"].get("remote", {}).get("requests_failed")},
        "p50_ratio_openai_over_local": round(percentile(openai, 0.5) / percentile(local, 0.5), 3),
        "machine": f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
                   f"Python {platform.python_version()}",
        "latencies_ms": {"local": [round(v, 2) for v in local], "openai": [round(v, 2) for v in openai]},
    }


def table(result: dict) -> str:
    rows = ["| backend | keystrokes | p50 ms | p90 ms | p95 ms | replies with lines | top line right |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name, label in (("local", "local engine (INT8 ONNX)"),
                        ("openai", f"openai → llama.cpp server ({result['gguf']})")):
        r = result[name]
        rows.append(f"| {label} | {r['n']} | {r['p50_ms']} | {r['p90_ms']} | {r['p95_ms']} | {r['answered']} "
                    f"| {r['top_line_right']} |")
    ratios = {q: round(result["openai"][f"{q}_ms"] / result["local"][f"{q}_ms"], 2) for q in ("p50", "p90", "p95")}
    return "\n".join(rows) + "\n\nopenai / local: " + ", ".join(f"{q} {r}×" for q, r in ratios.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default=None, help="file to replay (default: the stdlib's textwrap.py)")
    parser.add_argument("--start-line", type=int, default=60, help="open the file truncated here (1-based)")
    parser.add_argument("--keystrokes", type=int, default=150, help="keystrokes per block")
    parser.add_argument("--blocks", type=int, default=4, help="blocks, alternating local and openai first")
    parser.add_argument("--gguf-type", choices=("f32", "f16", "q8_0"), default="q8_0")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp's threads")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds of quiet before each block")
    add_output_arguments(parser)
    return run_or_table(parser.parse_args(argv), run, table)


if __name__ == "__main__":
    sys.exit(main())
