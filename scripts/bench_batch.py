"""Throughput of the engine's scheduler: N searches in N documents at once, against the same N one after another.

    python scripts/bench_batch.py --out bench_batch.json

Each round moves the cursor of every document to a new line (half at a line's start, half mid-line) of its own
stdlib file, so every search runs the model. Before the round is timed, each document's context up to the cursor
is prefilled (Engine.prefill, as the engine does in the background when a document is opened and while the user
types), so the searches time what they cost while typing: their beam steps, and the prefill of the cursor's
line only. Two engines over the same bundle run the same rounds, one completing the N cursors one after another
(`Engine.complete_text`), the other submitting all N to a scheduler at once and iterating until the last one
finishes (completer/scheduler.py: one batched call per beam step over the live beams of all of them). The engines
alternate, round by round, so the machine's noise falls on both alike. The figure is the median over rounds of
the sequential time over the concurrent one (issue 31: at least 3×), with how many searches each batched call
held and whether the answers were the same.

It also times the model calls inside those rounds, by what they hold: a search's beam step of 4 beams in the
sequential engine against the concurrent engine's call over all N searches' steps. A search alone runs its steps
one after another over the same prefix, which stays in the CPU's cache between them; a call over N searches
reads all N prefixes at every step. The one-step comparison after the rounds times a search's step both ways:
cold (after the other searches' steps) and again right after itself.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
import platform
import statistics
import sys
import sysconfig
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_output import add_output_arguments, run_or_table  # noqa: E402
from completer.bundle import load_bundle  # noqa: E402
from completer.engine import Engine  # noqa: E402
from completer.runtime import Runtime  # noqa: E402
from completer.scheduler import Priority, Scheduler, Task  # noqa: E402
from completer.types import EngineSettings  # noqa: E402

FILES = ("textwrap.py", "shlex.py", "fnmatch.py", "glob.py", "bisect.py", "heapq.py", "base64.py", "calendar.py",
         "csv.py", "difflib.py", "gettext.py", "imaplib.py", "netrc.py", "pprint.py", "queue.py", "sched.py")
FIRST_LINE = 60  # cursors start here, so each context is a few hundred tokens or more
STEP_BEAMS = 4  # the rows of a search's beam step at the engine's default beam width


def cursors(text: str, rounds: int, seed: int) -> list[tuple[str, str]]:
    """(text before the cursor, rest of its line) for each round: code lines further down the file, alternately
    at the line's start (after its indentation) and in its middle."""
    lines = text.split("\n")
    code = [i for i in range(FIRST_LINE, len(lines)) if len(lines[i].strip()) >= 8]
    step = max(1, len(code) // (rounds + 1))
    out = []
    for r in range(rounds):
        i = code[min(len(code) - 1, (r + 1) * step + seed % step)]
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        column = indent if (r + seed) % 2 == 0 else indent + (len(line) - indent) // 2
        out.append(("\n".join(lines[:i] + [line[:column]]), line[column:]))
    return out


class CallRecord(NamedTuple):
    """One call of the runtime: how many searches' calls it held, their rows, and how long it took."""

    searches: int
    rows: int
    ms: float


@contextmanager
def recorded_calls(runtime: Runtime) -> Iterator[list[CallRecord]]:
    """While the block runs, each of `runtime`'s calls, in order."""
    records: list[CallRecord] = []
    run_batch = runtime.run_batch

    def recording(calls, **options):
        started = time.perf_counter()
        try:
            return run_batch(calls, **options)
        finally:
            records.append(CallRecord(len(calls), sum(call.rows for call in calls),
                                      (time.perf_counter() - started) * 1000))

    runtime.run_batch = recording  # type: ignore[method-assign]
    try:
        yield records
    finally:
        del runtime.run_batch  # the class's own again


def sequential(engine: Engine, requests: list[tuple[str, str, str]]) -> tuple[float, list, list[CallRecord]]:
    with recorded_calls(engine.runtime) as records:
        started = time.perf_counter()
        results = [engine.complete_text(uri, before, after) for uri, before, after in requests]
        elapsed = (time.perf_counter() - started) * 1000
    return elapsed, results, records


def concurrent(engine: Engine, requests: list[tuple[str, str, str]]) -> tuple[float, list, list[CallRecord]]:
    with recorded_calls(engine.runtime) as records:
        started = time.perf_counter()
        scheduler = Scheduler()
        tasks = [scheduler.submit(Task(engine.complete_steps(uri, before, after), Priority.LIVE, uri, engine.runtime))
                 for uri, before, after in requests]
        while scheduler.busy:
            scheduler.iterate()
        elapsed = (time.perf_counter() - started) * 1000
    return elapsed, [t.result for t in tasks], records


def step_costs(sequential_calls: list[CallRecord], concurrent_calls: list[CallRecord], searches: int) -> dict:
    """Medians of the calls in the timed rounds that hold a 4-beam step: one search's alone (sequential), and all
    `searches` searches' in one call (concurrent), with that call's cost per search."""
    alone = [r.ms for r in sequential_calls if r.searches == 1 and r.rows == STEP_BEAMS]
    together = [r.ms for r in concurrent_calls if r.searches == searches and r.rows == STEP_BEAMS * searches]
    return {"one_search_step": round(statistics.median(alone), 2) if alone else None,
            "one_search_step_calls": len(alone),
            "all_searches_step": round(statistics.median(together), 2) if together else None,
            "all_searches_step_per_search": round(statistics.median(together) / searches, 2) if together else None,
            "all_searches_step_calls": len(together)}


def call_costs(engine: Engine, uris: list[str], rounds: int, alone: Path | None = None) -> dict:
    """What one beam step of 4 beams costs over the documents' cached prefixes, alternating, medians in ms: a search
    alone in the graph of one slot and in the batched graph (its empty slots), the N searches one after another
    and in one batched call, and the copy a padded [N, H, D, P] prefix tensor would need at every step. `alone`:
    a bundle of the same model whose graph has one slot, for a bundle converted with --batch-slots (one graph
    with several slots), whose search alone then runs in that graph of one slot instead."""
    import numpy as np

    from completer.calls import ModelCall

    runtime = engine.runtime
    rng = np.random.default_rng(0)
    calls = []
    for uri in uris:
        state = engine.cache.get(uri)
        past = [tuple(rng.standard_normal((4, runtime.n_kv_head, 4, runtime.head_dim)).astype(np.float32)
                      for _ in range(2)) for _ in range(runtime.n_layer)]
        calls.append(ModelCall(np.ones((4, 1), np.int64), len(state.ids) + 4, state.prefix(), past,
                               np.zeros(4, np.float32), num_beams=8))
    runtime.run_batch(calls[:2])  # loads the batched graph
    longest = max(call.prefix[0][0].shape[3] for call in calls)

    def padded_copy() -> None:
        for layer in range(runtime.n_layer):
            for side, axis in ((0, 3), (1, 2)):
                parts = [call.prefix[layer][side] for call in calls]
                pad = [[(0, 0)] * 4 for _ in parts]
                for spec, part in zip(pad, parts):
                    spec[axis] = (0, longest - part.shape[axis])
                np.concatenate([np.pad(part, spec) for part, spec in zip(parts, pad)])

    slots = runtime.batch_slots
    batched = runtime._batched or runtime.session  # a converted bundle's one graph may hold the slots itself
    single = Runtime(load_bundle(alone), threads=runtime.threads) if alone is not None else runtime
    single_step = lambda: single._run_slots(single.session, single._single_slots, calls[:1])  # noqa: E731
    ways = {
        "one_search_single_graph": single_step,
        "one_search_single_graph_again": single_step,  # right after itself: its prefix still in the CPU's cache
        "one_search_batched_graph": lambda: runtime._run_slots(batched, slots, calls[:1]),
        "all_one_after_another": lambda: [runtime.run_call(call) for call in calls],
        "all_in_one_batched_call": lambda: runtime.run_batch(calls),
        "padded_prefix_copy": padded_copy,
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            started = time.perf_counter()
            way()
            times[name].append((time.perf_counter() - started) * 1000)
    result = {name: round(statistics.median(values), 2) for name, values in times.items()}
    result["prefix_tokens"] = {"min": min(c.prefix[0][0].shape[3] for c in calls), "max": longest}
    return result


def run(args: argparse.Namespace) -> dict:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [(stdlib / name).read_text(encoding="utf-8") for name in FILES[:args.documents]]
    plans = [cursors(text, args.rounds + 1, seed) for seed, text in enumerate(texts)]
    settings = EngineSettings(model_path=args.model, threads=args.threads)
    engines = {"sequential": Engine(settings), "concurrent": Engine(settings)}
    for engine in engines.values():
        engine.typing_through = False
    times: dict[str, list[float]] = {name: [] for name in engines}
    same_first, compared, runs = 0, 0, []
    records: dict[str, list[CallRecord]] = {name: [] for name in engines}
    for r in range(args.rounds + 1):  # round 0 warms the engines up and is not timed
        requests = [(f"file:///bench/doc{d}.py", *plans[d][r]) for d in range(len(texts))]
        for engine in engines.values():
            for uri, before, _ in requests:
                engine.prefill(uri, before)
        order = ["sequential", "concurrent"] if r % 2 else ["concurrent", "sequential"]
        answers = {}
        for name in order:
            run_mode = sequential if name == "sequential" else concurrent
            elapsed, answers[name], calls = run_mode(engines[name], requests)
            if r:
                times[name].append(elapsed)
                records[name] += calls
        if r:
            for a, b in zip(answers["sequential"], answers["concurrent"]):
                compared += 1
                same_first += bool(a.suggestions and b.suggestions and a.suggestions[0].line == b.suggestions[0].line)
                runs.append(a.model_runs)
    ratios = [s / c for s, c in zip(times["sequential"], times["concurrent"])]
    sizes = [record.searches for record in records["concurrent"]]
    bundle = engines["concurrent"].bundle
    costs = call_costs(engines["concurrent"], [uri for uri, _, _ in requests], args.call_rounds, args.alone) \
        if engines["concurrent"].runtime.batch_slots > 1 and len(texts) > 1 else None
    return {
        "command": "python scripts/bench_batch.py " + " ".join(sys.argv[1:]),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}",
        "model": bundle.name, "batch_slots": engines["concurrent"].runtime.batch_slots,
        "documents": len(texts), "rounds": args.rounds,
        "sequential_ms": [round(t, 1) for t in times["sequential"]],
        "concurrent_ms": [round(t, 1) for t in times["concurrent"]],
        "median_sequential_ms": round(statistics.median(times["sequential"]), 1),
        "median_concurrent_ms": round(statistics.median(times["concurrent"]), 1),
        "median_ratio": round(statistics.median(ratios), 2),
        "model_runs_per_search": {"median": statistics.median(runs), "max": max(runs)},
        "searches_per_batched_call": {"median": statistics.median(sizes), "max": max(sizes)},
        "calls_in_rounds_ms": step_costs(records["sequential"], records["concurrent"], len(texts)),
        "same_first_suggestion": f"{same_first} of {compared}",
        "one_step_ms": costs,
    }


def table(result: dict) -> str:
    rows = ["| searches at once | sequential, median ms | concurrent, median ms | sequential / concurrent (median "
            "of rounds) | searches per batched call (median, max) | same first suggestion |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {result['documents']} | {result['median_sequential_ms']} | {result['median_concurrent_ms']} "
            f"| {result['median_ratio']}× | {result['searches_per_batched_call']['median']}, "
            f"{result['searches_per_batched_call']['max']} | {result['same_first_suggestion']} |"]
    text = "\n".join(rows) + f"\n\n`{result['command']}` on {result['machine']}; model {result['model']}, " \
        f"{result['rounds']} rounds."
    calls = result.get("calls_in_rounds_ms")
    if calls and calls["one_search_step"] is not None and calls["all_searches_step"] is not None:
        n = result["documents"]
        text += ("\n\nThe model calls inside the timed rounds that hold a beam step of 4 beams, medians in ms:\n\n"
                 f"| a search's step, searches one after another | the {n} searches' steps in one call | that call "
                 "per search | per search / a search's step |\n|---:|---:|---:|---:|\n"
                 f"| {calls['one_search_step']} ({calls['one_search_step_calls']} calls) "
                 f"| {calls['all_searches_step']} ({calls['all_searches_step_calls']} calls) "
                 f"| {calls['all_searches_step_per_search']} "
                 f"| {calls['all_searches_step_per_search'] / calls['one_search_step']:.2f}× |")
    costs = result.get("one_step_ms")
    if costs:
        tokens = costs["prefix_tokens"]
        again = costs.get("one_search_single_graph_again")  # runs before this measure have none
        text += ("\n\nOne beam step of 4 beams per search, over the same documents' prefixes "
                 f"({tokens['min']:,} to {tokens['max']:,} tokens), medians in ms:\n\n"
                 "| one search, graph of one slot |"
                 + (" the same again, right after itself |" if again is not None else "")
                 + f" one search, graph of {result['batch_slots']} slots | "
                 f"{result['documents']} searches one after another | {result['documents']} searches in one batched "
                 f"call | copying the {result['documents']} prefixes into one padded tensor |\n"
                 "|---:|" + ("---:|" if again is not None else "") + "---:|---:|---:|---:|\n"
                 f"| {costs['one_search_single_graph']} |" + (f" {again} |" if again is not None else "")
                 + f" {costs['one_search_batched_graph']} "
                 f"| {costs['all_one_after_another']} | {costs['all_in_one_batched_call']} "
                 f"| {costs['padded_prefix_copy']} |")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=8, help=f"searches at once (at most {len(FILES)})")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--model", default=None, help="bundle folder (default: the embedded model)")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--call-rounds", type=int, default=30, help="rounds of the one-step comparison")
    parser.add_argument("--alone", type=Path, default=None,
                        help="the same model converted with one slot, for a --model converted with --batch-slots")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if not 1 <= args.documents <= len(FILES):
        parser.error(f"--documents must be between 1 and {len(FILES)}")
    return run_or_table(args, run, table)


if __name__ == "__main__":
    sys.exit(main())
