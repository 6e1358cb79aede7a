"""Training step time, alternating in one process (medians and their ratios): fp32 vs bf16 autocast on the
shipped shape, or, with --shapes, several model shapes in bf16, to price a larger model in training time.

    python scripts/bench_train.py
    python scripts/bench_train.py --shapes 8x6x192,16x6x192,12x10x320

One step is train.py's: forward and loss on a batch of 8 windows of 1,024 tokens, backward, AdamW.
Random token ids stand in for the corpus, which does not change the arithmetic.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import GPT, GPTConfig  # noqa: E402
from paths import REPO_ROOT  # noqa: E402
from scaling import parse_shapes  # noqa: E402

SHIPPED_CONFIG = REPO_ROOT / "models" / "python-small" / "training" / "config.json"
BATCH = 8
STEPS_PER_ROUND = 3


def step_function(cfg: GPTConfig, bf16: bool) -> tuple[Callable[[], None], int]:
    """One training step of a fresh model of shape `cfg` on fixed random windows, and the model's size."""
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (BATCH, cfg.context_length))  # (B, T)
    y = torch.randint(0, cfg.vocab_size, (BATCH, cfg.context_length))  # (B, T)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, _ = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, model.num_params()


def alternate(steps: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
    """Median seconds per step of each, timed in turn within every round so drift on a shared machine hits all."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            step()  # warm this one's kernels after the others'
            start = time.perf_counter()
            for _ in range(STEPS_PER_ROUND):
                step()
            times[name].append((time.perf_counter() - start) / STEPS_PER_ROUND)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="alternations; each times 3 steps of each side")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shapes", default=None,
                        help="LAYERSxHEADSxWIDTH,... : time these shapes in bf16 instead, the first as the reference")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        shapes = parse_shapes(args.shapes) if args.shapes is not None else None
    except ValueError as exc:
        parser.error(str(exc))
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    shipped = GPTConfig(**json.loads(SHIPPED_CONFIG.read_text()))
    tokens = BATCH * shipped.context_length
    if shapes is None:
        print(f"shape: {shipped.n_layer} layers, {shipped.n_head} heads, width {shipped.n_embd}")
        steps = {"fp32": step_function(shipped, False), "bf16": step_function(shipped, True)}
    else:
        steps = {s.name: step_function(dataclasses.replace(shipped, n_layer=s.n_layer, n_head=s.n_head,
                                                           n_embd=s.n_embd, mlp_width=None), True)
                 for s in shapes}
    p50 = alternate({name: step for name, (step, _) in steps.items()}, args.rounds)
    first = next(iter(p50.values()))
    for name, value in p50.items():
        params = steps[name][1]
        print(f"{name}: {params:,} parameters, {value * 1000:.0f} ms per step, {tokens / value:,.0f} tokens/s, "
              f"{value / first:.2f}x the first")
    if shapes is None:
        print(f"bf16 speed-up: {p50['fp32'] / p50['bf16']:.2f}x (median of {args.rounds} rounds of 3 steps each)")
    else:
        print(f"(bf16, median of {args.rounds} rounds of {STEPS_PER_ROUND} steps each)")


if __name__ == "__main__":
    main()
