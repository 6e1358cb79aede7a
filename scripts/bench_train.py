"""Training step time, fp32 vs bf16 autocast, alternating in one process (medians and their ratio).

    python scripts/bench_train.py

One step is train.py's on the shipped model's shape (models/python-small/training/config.json): forward
and loss on a batch of 8 windows of 1,024 tokens, backward, AdamW.
Random token ids stand in for the corpus, which does not change the arithmetic.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import GPT, GPTConfig  # noqa: E402
from paths import REPO_ROOT  # noqa: E402

SHIPPED_CONFIG = REPO_ROOT / "models" / "python-small" / "training" / "config.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="alternations; each times 3 steps per precision")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = GPTConfig(**json.loads(SHIPPED_CONFIG.read_text()))
    print(f"shape: {cfg.n_layer} layers, {cfg.n_head} heads, width {cfg.n_embd}")
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (8, cfg.context_length))  # (B, T)
    y = torch.randint(0, cfg.vocab_size, (8, cfg.context_length))  # (B, T)

    def step(bf16: bool) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, _ = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for _ in range(args.rounds):
        for name in times:
            step(name == "bf16")  # warm this precision's kernels after the other's
            start = time.perf_counter()
            for _ in range(3):
                step(name == "bf16")
            times[name].append((time.perf_counter() - start) / 3)
    p50 = {name: statistics.median(values) for name, values in times.items()}
    for name, value in p50.items():
        print(f"{name}: {value * 1000:.0f} ms per step, {8 * cfg.context_length / value:,.0f} tokens/s")
    print(f"bf16 speed-up: {p50['fp32'] / p50['bf16']:.2f}x (median of {args.rounds} rounds of 3 steps each)")


if __name__ == "__main__":
    main()
