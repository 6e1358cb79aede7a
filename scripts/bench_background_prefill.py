"""A background prefill's chunks: how long each takes, its model call and its cache's append (the longest a
keystroke in another document waits), and how long the whole prefill of a 1,000-token file takes, with chunks
sized by time (completer/prefill_chunks.py, what the engine does) against fixed 128-token chunks, in turns on
one engine.

    python scripts/bench_background_prefill.py --out docs/experiments/.../background-prefill-embedded.json
    python scripts/bench_background_prefill.py --model /tmp/smollm2-bundle --out background-prefill-smollm2.json
    python scripts/bench_background_prefill.py --table background-prefill-smollm2.json

Each round opens a new document holding the head of the stdlib's shlex.py (about 1,000 tokens) and prefills it
as the worker does when a file is opened (Engine.prefill_steps), once each way. The sizes steered by time carry
over from one document to the next, as in the engine.

Then it times how long a keystroke waits for a chunk it stops (completer/preemption.py): the chunk the engine
would run next, at the end of that file's cache, stopped from another thread at a point spread over its run
(a tenth of its time to nine tenths), from the stop to the call's end.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import sysconfig
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_output import add_output_arguments, run_or_table  # noqa: E402
from completer.calls import ModelCall  # noqa: E402
from completer.engine import PREFILL_CHUNK_TOKENS, Engine  # noqa: E402
from completer.preemption import Preempted, Preemption  # noqa: E402
from completer.prefill_chunks import PrefillChunks  # noqa: E402
from completer.types import EngineSettings  # noqa: E402

WAYS = ("sized by time", f"fixed {PREFILL_CHUNK_TOKENS} tokens")


def prefill_once(engine: Engine, uri: str, text: str) -> dict:
    """One background prefill of `text` in a new document: each call's tokens and milliseconds, each chunk's
    milliseconds from its call's start to the next one's (the call, the cache's append, the engine's own steps),
    and the total."""
    calls: list[tuple[int, float]] = []
    starts: list[float] = []
    run_batch = engine.runtime.run_batch

    def timed(batch, **options):
        starts.append(time.perf_counter())
        outputs = run_batch(batch, **options)
        calls.extend((int(call.input_ids.shape[1]), out.seconds * 1000) for call, out in zip(batch, outputs))
        return outputs

    engine.runtime.run_batch = timed
    try:
        engine.open(uri, text)
        started = time.perf_counter()
        engine.prefill(uri, text)
        ended = time.perf_counter()
    finally:
        del engine.runtime.run_batch
        engine.close(uri)
    steps = [(after - before) * 1000 for before, after in zip(starts, starts[1:] + [ended])]
    return {"total_ms": (ended - started) * 1000, "tokens": [n for n, _ in calls], "call_ms": [ms for _, ms in calls],
            "step_ms": steps}


def stop_waits(engine: Engine, text: str, rounds: int) -> dict:
    """Milliseconds from a stop to the end of the background call it stopped: the engine's next chunk after
    `text`'s context, stopped at 0.1 to 0.9 of its time; and how many calls ended before their stop."""
    uri = "file:///bench/prefill/stopped.py"
    engine.open(uri, text)
    engine.prefill(uri, text)
    state = engine.cache.get_quietly(uri)
    tokens = engine.background_chunks.next_size()
    cached = min(len(state.ids), engine.bundle.context_length - tokens)  # the chunk fits the model's positions
    prefix = [(key[..., :cached], value[:, :, :cached]) for key, value in state.prefix()]
    call = ModelCall(np.asarray([state.ids[:tokens]], dtype=np.int64), cached, prefix)
    run_batch = engine.runtime.run_batch
    alone = statistics.median(run_batch([call])[0].seconds for _ in range(5))
    waits, finished = [], 0
    for index in range(rounds):
        preemption, stopped_at = Preemption(), []
        timer = threading.Timer(alone * (0.1 + 0.8 * index / max(1, rounds - 1)),
                                lambda: stopped_at.append(time.perf_counter()) or preemption.preempt())
        timer.start()
        try:
            run_batch([call], preemption=preemption)
        except Preempted:
            waits.append((time.perf_counter() - stopped_at[0]) * 1000)
        else:
            finished += 1
        timer.join()
    engine.close(uri)
    return {"chunk_tokens": tokens, "call_ms_median": round(alone * 1000, 2), "stops": rounds,
            "ended_before_their_stop": finished,
            "wait_ms_median": round(statistics.median(waits), 2) if waits else None,
            "wait_ms_max": round(max(waits), 2) if waits else None}


def run(args: argparse.Namespace) -> dict:
    engine = Engine(EngineSettings(model_path=args.model))
    text = (Path(sysconfig.get_paths()["stdlib"]) / "shlex.py").read_text(encoding="utf-8")[:3500]
    sized = engine.background_chunks
    fixed = PrefillChunks(PREFILL_CHUNK_TOKENS, size=PREFILL_CHUNK_TOKENS, budget_ms=1e9)  # never over it
    rounds: dict[str, list[dict]] = {way: [] for way in WAYS}
    for index in range(args.rounds):
        for way, chunks in (zip(WAYS, (sized, fixed)) if index % 2 == 0 else zip(WAYS[::-1], (fixed, sized))):
            engine.background_chunks = chunks
            rounds[way].append(prefill_once(engine, f"file:///bench/prefill/{way[:5]}{index}.py", text))
    engine.background_chunks = sized
    summary = {}
    for way, results in rounds.items():
        calls = [ms for r in results for ms in r["step_ms"]]
        sizes = [n for r in results for n in r["tokens"][:-1]]  # whole chunks: the last one is the file's tail
        summary[way] = {"total_ms_median": round(statistics.median(r["total_ms"] for r in results), 1),
                        "calls_median": statistics.median(len(r["tokens"]) for r in results),
                        "chunk_tokens_median": statistics.median(sizes) if sizes else None,
                        "step_ms_p50": round(statistics.median(calls), 1),
                        "step_ms_p95": round(statistics.quantiles(calls, n=20)[-1], 1) if len(calls) > 1 else None,
                        "step_ms_max": round(max(calls), 1)}
    stops = stop_waits(engine, text, 4 * args.rounds)
    return {"command": "python scripts/bench_background_prefill.py " + " ".join(sys.argv[1:]),
            "model": engine.bundle.name, "rounds": args.rounds, "summary": summary, "stops": stops, "raw": rounds,
            "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}"}


def table(result: dict) -> str:
    rows = ["| chunks | whole prefill, median ms | calls | whole chunk, median tokens | chunk p50 ms | chunk p95 ms "
            "| longest chunk ms |", "|---|---:|---:|---:|---:|---:|---:|"]
    for way, s in result["summary"].items():
        tokens = "" if s["chunk_tokens_median"] is None else f"{s['chunk_tokens_median']:g}"
        rows.append(f"| {way} | {s['total_ms_median']} | {s['calls_median']:g} | {tokens} "
                    f"| {s['step_ms_p50']} | {s['step_ms_p95']} | {s['step_ms_max']} |")
    text = "\n".join(rows)
    stops = result.get("stops")  # results written before calls could be stopped have none
    if stops is not None:
        text += ("\n\n| stopped chunk, tokens | its call alone, median ms | stops | ended before their stop "
                 "| wait from the stop, median ms | longest wait ms |\n|---:|---:|---:|---:|---:|---:|\n"
                 f"| {stops['chunk_tokens']} | {stops['call_ms_median']} | {stops['stops']} "
                 f"| {stops['ended_before_their_stop']} | {stops['wait_ms_median']} | {stops['wait_ms_max']} |")
    return text + (f"\n\n`{result['command']}`: model {result['model']}, {result['rounds']} rounds "
                   f"in turns, {result['machine']}.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="bundle folder (default: the embedded model)")
    parser.add_argument("--rounds", type=int, default=10)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1 and not args.table:
        parser.error("--rounds must be at least 1")
    return run_or_table(args, run, table)


if __name__ == "__main__":
    sys.exit(main())
