"""Where one beam step's time goes: onnxruntime's profiler, per operator type.

    python scripts/profile_step.py --prefix 960 --beams 4 --runs 200
    python scripts/profile_step.py --searches 8 --runs 50     # one batched call of eight searches

Runs the bundle's decoder on random inputs shaped like a beam step (B beams, 1 token, a P-token shared
prefix, an 8-token suffix) with one intra-op thread (`--threads` for more), and prints the mean kernel time
per run by op type.
With --searches N, N such searches, each over a prefix of its own (P, P - 30, P - 60, ...), in one call of the
bundle's batched graph.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from completer.bundle import load_bundle  # noqa: E402  (completer first: it turns onnxruntime's telemetry off)
import onnxruntime as ort  # noqa: E402
from completer.calls import ModelCall  # noqa: E402
from completer.runtime import Runtime  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="bundle dir (default: the embedded model)")
    parser.add_argument("--prefix", type=int, default=960)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--searches", type=int, default=1, help="searches in one call (the batched graph)")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime's threads (the server's default: 2)")
    args = parser.parse_args()
    bundle = load_bundle(args.model)
    runtime = Runtime(bundle, device="cpu", threads=args.threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(tempfile.gettempdir()) / "completer_profile_step")  # never in the cwd
    # The engine's own Runtime builds the feed (whatever inputs this bundle's graph takes); only its
    # session is swapped for one that profiles.
    batched = args.searches > 1
    if batched and bundle.batched_model is None:
        raise SystemExit(f"{bundle.path} has no batched graph: --searches needs one")
    path = bundle.batched_model[0] if batched else bundle.model_path
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    if batched:
        runtime._batched = session
    else:
        runtime.session = session
    rng = np.random.default_rng(0)
    b, t = args.beams, 8
    h, d = runtime.n_kv_head, runtime.head_dim
    calls = []
    for search in range(args.searches):
        p = args.prefix - 30 * search
        prefix = [(rng.standard_normal((1, h, d, p), np.float32), rng.standard_normal((1, h, p, d), np.float32))
                  for _ in range(runtime.n_layer)]
        past = [(rng.standard_normal((b, h, t, d), np.float32), rng.standard_normal((b, h, t, d), np.float32))
                for _ in range(runtime.n_layer)]
        calls.append(ModelCall(np.ones((b, 1), np.int64), p + t, prefix, past, num_beams=b))
    for _ in range(args.runs):  # neutral repeats (the model's distribution alone): the mixture still runs
        runtime.run_batch(calls)
    trace = session.end_profiling()
    totals: collections.Counter[str] = collections.Counter()
    nodes: collections.Counter[str] = collections.Counter()
    for event in json.loads(Path(trace).read_text()):
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            totals[event["args"]["op_name"]] += event["dur"]
            nodes[event["args"]["op_name"]] += 1
    os.remove(trace)
    print("| op type | µs per step | nodes |\n|---|---|---|")
    for op, micros in totals.most_common():
        print(f"| {op} | {micros / args.runs:.1f} | {nodes[op] // args.runs} |")
    print(f"| **all kernels** | **{sum(totals.values()) / args.runs:.1f}** | |")


if __name__ == "__main__":
    main()
