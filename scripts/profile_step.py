"""Where one beam step's time goes: onnxruntime's profiler, per operator type.

    python scripts/profile_step.py --prefix 960 --beams 4 --runs 200

Runs the bundle's decoder on random inputs shaped like a beam step (B beams, 1 token, a P-token shared
prefix, an 8-token suffix) with one intra-op thread, and prints the mean kernel time per run by op type.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from completer.bundle import load_bundle  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="bundle dir (default: the embedded model)")
    parser.add_argument("--prefix", type=int, default=960)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    bundle = load_bundle(args.model)
    arch = bundle.architecture
    layers, heads = arch["n_layer"], arch["n_head"]
    dim = arch["n_embd"] // heads
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.enable_profiling = True
    session = ort.InferenceSession(str(bundle.model_path), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    b, p, t = args.beams, args.prefix, 8
    feed = {"input_ids": np.ones((b, 1), np.int64), "position_ids": np.array([[p + t]], np.int64),
            "beam_scores": np.zeros(b, np.float32), "beam_finished": np.zeros(b, bool),
            "allowed_tokens": np.ones((1, arch["vocab_size"]), bool), "num_beams": np.array([b], np.int64)}
    if {"repeat_probs", "model_share"} <= {i.name for i in session.get_inputs()}:
        # Neutral repeats (the model's distribution alone); the mixture's cost is still in the graph.
        feed["repeat_probs"] = np.zeros((1, arch["vocab_size"]), np.float32)
        feed["model_share"] = np.ones(1, np.float32)
    for layer in range(layers):
        feed[f"prefix_key_{layer}"] = rng.standard_normal((1, heads, dim, p), np.float32)
        feed[f"prefix_value_{layer}"] = rng.standard_normal((1, heads, p, dim), np.float32)
        feed[f"past_key_{layer}"] = rng.standard_normal((b, heads, t, dim), np.float32)
        feed[f"past_value_{layer}"] = rng.standard_normal((b, heads, t, dim), np.float32)
    for _ in range(args.runs):
        session.run(None, feed)
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
