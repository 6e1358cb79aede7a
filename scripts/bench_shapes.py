"""What `completer convert` makes of released models' shapes on this machine: random weights in the exact
shape (scripts/released_shape.py), converted to INT8, timed through the engine and the LSP typing replay.

    python scripts/bench_shapes.py --shapes smollm2-135m qwen2.5-coder-0.5b --out docs/bench_shapes.json
    python scripts/bench_shapes.py --table docs/bench_shapes.json     # the markdown table in docs/benchmarks.md

Speed depends on the shape, not on training, with one exception: random weights never end a line, so every
search runs to the search budget (searchBudgetMs) or the token limit. The replay's keystroke times are
therefore an upper bound for the shape; the per-step figures (one 4-beam step, a prefill) are what a
trained model of the shape costs per step.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from paths import cache_dir  # noqa: E402

from completer.cache import DocumentState, prefix_steps  # noqa: E402
from completer.calls import drive  # noqa: E402
from completer.engine import PREFILL_CHUNK_TOKENS, Engine  # noqa: E402
from completer.types import EngineSettings  # noqa: E402


def converter_digest() -> str:
    """A digest of the code that writes a converted bundle's graph (completer/graph/, completer/convert.py)."""
    digest = hashlib.sha256()
    for path in [*sorted((REPO / "completer" / "graph").glob("*.py")), REPO / "completer" / "convert.py"]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def bundle_for(shape: str) -> Path:
    """The converted INT8 bundle of `shape`, kept in the cache while the code that converts it stays the same:
    a bundle another version of the graph builder wrote would measure that version's graph."""
    root = cache_dir() / "shapes" / shape
    bundle, stamp, code = root / "bundle", root / "converted-by", converter_digest()
    if (bundle / "manifest.json").is_file() and stamp.is_file() and stamp.read_text() == code:
        return bundle
    if not (root / "source" / "config.json").is_file():
        subprocess.run([sys.executable, str(REPO / "scripts" / "released_shape.py"), "--shape", shape, "--out",
                        str(root / "source")], check=True)
    subprocess.run([sys.executable, "-m", "completer", "convert", str(root / "source"), "--out", str(bundle),
                    "--force"], check=True)
    stamp.write_text(code)
    return bundle


def stdlib_tokens(engine: Engine, count: int) -> list[int]:
    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()
    return engine.tokens.encode(text)[:count]


TYPED = "        parser = argparse.Arg"  # the cursor's line in a file opened cold


def opened_file(engine: Engine, ids: list[int]) -> str:
    """The text of `ids` cut at its last line start, then TYPED: a file opened with the cursor at its end."""
    text = engine.tokens.tokenizer.decode(ids)
    return text[:text.rfind("\n") + 1] + TYPED


def step_ms(runtime, last: int, position: int, prefix) -> list[float]:
    """Five 4-beam steps (8 candidates each) over `prefix` with an 8-token suffix per beam, in ms."""
    past = [(np.zeros((4, runtime.n_kv_head, 8, runtime.head_dim), np.float32),) * 2 for _ in range(runtime.n_layer)]
    times = []
    for _ in range(5):
        started = time.perf_counter()
        runtime.run(np.full((4, 1), last), position, prefix, past, num_beams=8)
        times.append((time.perf_counter() - started) * 1000)
    return times


def engine_timings(bundle: Path, rounds: int) -> dict:
    """Prefill of 1,000 tokens (in the engine's chunks), one 4-beam step at a 1,000-token context, and the first
    suggestion in a 1,000-token file opened cold and opened then prefilled (Engine.prefill, as the server does
    on didOpen)."""
    engine = Engine(EngineSettings(model_path=str(bundle), device="cpu"))
    runtime = engine.runtime
    ids = stdlib_tokens(engine, 1000)
    prefill, step, cold, warm = [], [], [], []
    opened = opened_file(engine, ids)
    line = opened.count("\n")
    for round_ in range(rounds):
        state = DocumentState()
        started = time.perf_counter()
        drive(prefix_steps(state, runtime.empty_prefix(), ids, PREFILL_CHUNK_TOKENS), runtime)  # as the engine does
        prefill.append((time.perf_counter() - started) * 1000)
        step += step_ms(runtime, ids[-1], len(ids) + 8, state.prefix())
        uri = f"file:///cold{round_}.py"
        engine.open(uri, opened)
        started = time.perf_counter()
        engine.complete(uri, line, len(TYPED))
        cold.append((time.perf_counter() - started) * 1000)
        uri = f"file:///warm{round_}.py"
        engine.open(uri, opened)
        engine.prefill(uri, opened[:opened.rfind("\n") + 1])
        started = time.perf_counter()
        engine.complete(uri, line, len(TYPED))
        warm.append((time.perf_counter() - started) * 1000)
    median = lambda xs: round(statistics.median(xs), 1)  # noqa: E731
    return {"prefill_1000_ms": median(prefill), "step_4_beams_at_1000_ms": median(step),
            "first_suggestion_cold_ms": median(cold), "first_suggestion_prefilled_ms": median(warm),
            "rounds": rounds, "bundle_mib": round(sum(f.stat().st_size for f in bundle.iterdir()) / 2**20, 1),
            "architecture": engine.bundle.architecture}


def replay(bundle: Path | None, keystrokes: int) -> dict:
    settings = {"modelPath": str(bundle)} if bundle else {}
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_lsp.py"), "--keystrokes", str(keystrokes),
                          "--settings", json.dumps(settings), "--json"], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    lat = sorted(result["latencies"][1:])  # the first keystroke pays for the open: timed by engine_timings
    pick = lambda q: round(lat[min(len(lat) - 1, int(q * (len(lat) - 1) + 0.5))], 1)  # noqa: E731
    return {"keystrokes": len(result["latencies"]), "p50_ms": pick(0.5), "p95_ms": pick(0.95),
            "first_keystroke_ms": round(result["latencies"][0], 1), "worker_rss_mb": result.get("worker_rss_mb")}


def window_timings(bundle: Path, window: int, file_tokens: int) -> dict[str, float]:
    """At a window of `window` tokens (the contextTokens setting): one 4-beam step over a full window, the prefill
    of a full window in the engine's chunks, and the first suggestion in a file of `file_tokens` tokens opened cold (its window's
    prefill and the search), in ms."""
    engine = Engine(EngineSettings(model_path=str(bundle), device="cpu", context_tokens=window))
    runtime = engine.runtime
    ids = stdlib_tokens(engine, file_tokens)
    prefix = ids[:window - engine.settings.max_tokens - 1]
    state = DocumentState()
    started = time.perf_counter()
    drive(prefix_steps(state, runtime.empty_prefix(), prefix, PREFILL_CHUNK_TOKENS), runtime)  # as the engine runs it
    prefill = (time.perf_counter() - started) * 1000
    steps = step_ms(runtime, ids[-1], len(prefix) + 8, state.prefix())
    opened = opened_file(engine, ids)
    engine.open("file:///cold.py", opened)
    started = time.perf_counter()
    engine.complete("file:///cold.py", opened.count("\n"), len(TYPED))
    cold = (time.perf_counter() - started) * 1000
    return {"step_4_beams_ms": statistics.median(steps), "prefill_ms": prefill, "first_cold_ms": cold}


def windows(bundle: Path, sizes: list[int], rounds: int) -> dict:
    """The same bundle read through windows of `sizes` tokens, alternating the order each round: what a bundle's
    default window ("defaults" in its manifest) trades. Per step and per prefill, not through the typing replay:
    random weights end lines at random, so a replay's keystrokes would differ by what the window makes them
    generate, not by what it costs."""
    runs: dict[int, dict[str, list[float]]] = {size: {} for size in sizes}
    for round_ in range(rounds):
        for size in sizes if round_ % 2 == 0 else sizes[::-1]:
            timings = window_timings(bundle, size, max(sizes))
            for key, value in timings.items():
                runs[size].setdefault(key, []).append(round(value, 1))
            print(json.dumps({"window": size, "round": round_, **timings}), flush=True)
    return {str(size): {**{key: round(statistics.median(values), 1) for key, values in run.items()}, "runs": run}
            for size, run in runs.items()}


def measure(args: argparse.Namespace) -> dict:
    results = {"command": " ".join(["python", "scripts/bench_shapes.py", *sys.argv[1:]]),
               "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                           "python": platform.python_version()}, "shapes": {}}
    if args.windows:
        for shape in args.shapes:
            results["shapes"][shape] = {"windows": windows(bundle_for(shape), args.windows, args.rounds)}
        return results
    baseline = replay(None, args.keystrokes)  # the embedded model in the same run
    results["shapes"]["embedded (python-small)"] = {"replay": baseline}
    for shape in args.shapes:
        bundle = bundle_for(shape)
        entry = {"engine": engine_timings(bundle, args.rounds), "replay": replay(bundle, args.keystrokes)}
        results["shapes"][shape] = entry
        print(json.dumps({shape: entry}), flush=True)
    return results


def window_table(results: dict) -> str:
    rows = ["| shape | window tokens | 4-beam step at a full window ms | prefill of a full window (128-token chunks) ms "
            "| first suggestion, cold, in a file of the largest window's tokens ms |", "|---|---:|---:|---:|---:|"]
    for shape, entry in results["shapes"].items():
        for size, w in entry["windows"].items():
            rows.append(f"| {shape} | {int(size):,} | {w['step_4_beams_ms']} | {w['prefill_ms']:,} "
                        f"| {w['first_cold_ms']:,} |")
    machine = results["machine"]
    return "\n".join(rows + ["", f"`{results['command']}` on {machine['cpus']} CPUs ({machine['processor']}), "
                                 f"Python {machine['python']}; medians of the rounds, alternating."])


def table(results: dict) -> str:
    if any("windows" in entry for entry in results["shapes"].values()):
        return window_table(results)
    rows = ["| shape | INT8 MiB | prefill 1,000 tokens ms | 4-beam step at 1,000 ms | first suggestion, cold ms "
            "| first suggestion, prefilled ms | replay p50 ms | replay p95 ms | worker RSS MB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for shape, entry in results["shapes"].items():
        e, r = entry.get("engine", {}), entry["replay"]
        cell = lambda key: f"{e[key]:,}" if key in e else "–"  # noqa: E731
        rows.append(f"| {shape} | {cell('bundle_mib')} | {cell('prefill_1000_ms')} | {cell('step_4_beams_at_1000_ms')} "
                    f"| {cell('first_suggestion_cold_ms')} | {cell('first_suggestion_prefilled_ms')} | {r['p50_ms']} "
                    f"| {r['p95_ms']} | {r['worker_rss_mb']} |")
    machine = results["machine"]
    return "\n".join(rows + ["", f"`{results['command']}` on {machine['cpus']} CPUs ({machine['processor']}), "
                                 f"Python {machine['python']}; medians."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["smollm2-135m", "qwen2.5-coder-0.5b"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keystrokes", type=int, default=200)
    parser.add_argument("--windows", type=int, nargs="+", default=None, metavar="TOKENS",
                        help="instead: compare these windows (contextTokens) of each shape's bundle: a step, a "
                             "prefill and a cold first suggestion, alternating over --rounds")
    parser.add_argument("--out", type=Path, default=None, help="write the raw results here (JSON)")
    parser.add_argument("--table", type=Path, default=None, help="print the markdown table of a results file")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    for window in args.windows or ():
        try:
            EngineSettings(context_tokens=window).validate()  # the engine's own bounds, with its message
        except ValueError as error:
            parser.error(f"--windows {window}: {error}")
    results = measure(args)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
