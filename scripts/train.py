"""Train the code model on two CPU cores, resumably, within a wall-clock budget.

Checkpoints are safetensors (weights and AdamW moments) plus a JSON state, never pickle.
The learning rate follows warmup, a constant plateau, then a linear decay over the last
part of *this run's* time budget, so a run can always be resumed and given more time.
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import GPT, GPTConfig  # noqa: E402
from paths import cache_dir, corpus_dir  # noqa: E402
from shards import parse_shard, shard_cursors  # noqa: E402


def inputs_and_targets(windows: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    chunk = torch.from_numpy(np.stack(windows))  # (B, T+1)
    return chunk[:, :-1], chunk[:, 1:]  # (B, T) each: targets are the inputs shifted by one


class TokenStream:
    """Non-overlapping windows of the token array in a fixed shuffled order, so no token repeats
    within an epoch; the cursor into that order is part of the resumable state."""

    def __init__(self, path: Path, block: int, seed: int = 0) -> None:
        self.data = np.memmap(path, dtype=np.uint16, mode="r")
        self.block = block
        self.order = np.random.default_rng(seed).permutation((len(self.data) - 1) // block)
        self.cursor = 0

    def window(self) -> np.ndarray:
        """The next window of block + 1 tokens (inputs and their shifted targets)."""
        start = int(self.order[self.cursor % len(self.order)]) * self.block
        self.cursor += 1
        return np.asarray(self.data[start:start + self.block + 1], dtype=np.int64)

    def batch(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        return inputs_and_targets([self.window() for _ in range(size)])

    @property
    def epoch(self) -> float:
        return self.cursor / len(self.order)


class ShardMix:
    """Windows drawn from several corpus shards in fixed proportions within this run. Each window comes
    from the shard furthest behind its share of the windows this run drew, so each shard's cursor
    says exactly where it stands; a resumed run starts its proportions afresh (off by at most one
    window per resume)."""

    def __init__(self, shards: dict[str, tuple[TokenStream, float]]) -> None:
        self.shards = shards
        self.drawn = dict.fromkeys(shards, 0)

    def batch(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        rows = []
        for _ in range(size):
            name = min(self.shards, key=lambda n: (self.drawn[n] + 1) / self.shards[n][1])
            self.drawn[name] += 1
            rows.append(self.shards[name][0].window())
        return inputs_and_targets(rows)

    def cursors(self) -> dict[str, int]:
        return {name: stream.cursor for name, (stream, _) in self.shards.items()}

    def epochs(self) -> dict[str, float]:
        return {name: round(stream.epoch, 4) for name, (stream, _) in self.shards.items()}


def fresh_state() -> dict:
    """The train state of a run that has seen nothing: no steps, no tokens, every cursor at zero."""
    return {"step": 0, "tokens": 0, "cursors": {}, "history": []}


def save_checkpoint(out: Path, model: GPT, opt: torch.optim.AdamW, state: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(weights, str(out / "model.safetensors.tmp"))
    moments = {}
    for name, p in model.named_parameters():
        s = opt.state.get(p)
        if s:
            moments[f"{name}.exp_avg"] = s["exp_avg"]
            moments[f"{name}.exp_avg_sq"] = s["exp_avg_sq"]
            state.setdefault("adam_steps", {})[name] = float(s["step"])
    save_file(moments, str(out / "optimizer.safetensors.tmp"))
    (out / "config.json").write_text(json.dumps(model.cfg.to_dict(), indent=1))
    (out / "train_state.json.tmp").write_text(json.dumps(state, indent=1))
    # Everything is on disk before anything is swapped in; the three renames leave no window a
    # resume would notice short of a kill between two of them.
    for name in ("model.safetensors", "optimizer.safetensors", "train_state.json"):
        (out / f"{name}.tmp").replace(out / name)


def carried_state(source: Path) -> dict:
    """The train state of the checkpoint in `source` (tokens seen, shard cursors, history), for new weights
    made from it without an optimizer (grown or averaged): its AdamW step counts stay behind with the
    moments, which do not fit the new weights."""
    state = fresh_state()
    if (source / "train_state.json").exists():
        state.update(json.loads((source / "train_state.json").read_text()))
    state.pop("adam_steps", None)
    return state


def write_weights_checkpoint(out: Path, weights: dict[str, torch.Tensor], cfg: GPTConfig, state: dict) -> None:
    """A checkpoint with no optimizer file, built beside `out` and renamed into place, so a crash never
    leaves a half-written one that train.py --init would start from with its cursors at zero."""
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    save_file({name: tensor.contiguous() for name, tensor in weights.items()}, str(staging / "model.safetensors"))
    (staging / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    (staging / "train_state.json").write_text(json.dumps(state, indent=1))
    staging.rename(out)


def load_model(directory: Path) -> GPT:
    cfg = GPTConfig(**json.loads((directory / "config.json").read_text()))
    model = GPT(cfg)
    model.load_state_dict(load_file(str(directory / "model.safetensors")))
    return model


def restore_optimizer(directory: Path, model: GPT, opt: torch.optim.AdamW, state: dict) -> None:
    path = directory / "optimizer.safetensors"
    if not path.exists():
        return
    moments = load_file(str(path))
    for name, p in model.named_parameters():
        if f"{name}.exp_avg" in moments:
            opt.state[p] = {"step": torch.tensor(state.get("adam_steps", {}).get(name, 1.0)),
                            "exp_avg": moments[f"{name}.exp_avg"], "exp_avg_sq": moments[f"{name}.exp_avg_sq"]}


@torch.no_grad()
def evaluate(model: GPT, val_path: Path, block: int, batches: int, batch_size: int) -> dict:
    model.eval()
    stream = TokenStream(val_path, block, seed=1234)
    losses, accs = [], []
    for _ in range(batches):
        x, y = stream.batch(batch_size)
        loss, acc = model.loss(x, y)
        losses.append(loss.item())
        accs.append(acc.item())
    model.train()
    return {"val_loss": float(np.mean(losses)), "val_accuracy": float(np.mean(accs))}


def learning_rate(step_in_run: int, elapsed: float, budget: float, peak: float, warmup: int,
                  decay_fraction: float) -> float:
    warm = min(1.0, (step_in_run + 1) / warmup)
    decay_start = budget * (1 - decay_fraction)
    if elapsed <= decay_start:
        return peak * warm
    progress = min(1.0, (elapsed - decay_start) / max(1e-9, budget - decay_start))
    return peak * warm * (1 - 0.9 * progress)


def install_stop_handler() -> Callable[[], bool]:
    """SIGTERM or Ctrl-C ends the run after the current step, with a checkpoint, so a background
    run can be stopped (to free the cores for a benchmark, or to switch data) without losing work."""
    requested = [False]

    def request(signum: int, frame: object) -> None:
        requested[0] = True
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C or SIGTERM stops at once
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGTERM, request)
    signal.signal(signal.SIGINT, request)
    return lambda: requested[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="checkpoint dir (default: cache dir/checkpoints/run)")
    p.add_argument("--init", type=Path, default=None, help="start from these weights (e.g. the committed bundle's)")
    p.add_argument("--data", type=parse_shard, action="append", default=None, metavar="DIR[:WEIGHT]",
                   help="a corpus shard to train on, with its share of the windows (repeatable; default: the "
                        "first shard, cache dir/corpus)")
    p.add_argument("--val-data", type=Path, default=None,
                   help="dir whose val.bin gives the logged validation loss (default: the first --data), so "
                        "losses stay comparable across runs")
    p.add_argument("--minutes", type=float, default=60.0, help="wall-clock budget of this run")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=6)
    p.add_argument("--n-embd", type=int, default=192)
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--block", type=int, default=None, help="training sequence length (default: context)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--decay-fraction", type=float, default=0.3)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=8)
    p.add_argument("--save-every-minutes", type=float, default=5.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16 autocasts the forward pass (weights, AdamW and validation stay fp32); 1.37x (8 layers) "
                        "to 1.58x (4 layers) the steps per second on an AVX512-BF16 CPU (scripts/bench_train.py)")
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    data = [(path.resolve(), weight) for path, weight in args.data or [(corpus_dir(), 1.0)]]  # "." has a name
    if len({path.name for path, _ in data}) != len(data):
        raise SystemExit("each --data shard needs its own dir name: the cursors are kept by name")
    val_data = args.val_data or data[0][0]
    for needed in [path / "train.bin" for path, _ in data] + [val_data / "val.bin"]:
        if not needed.exists():
            raise SystemExit(f"{needed} is missing: build that corpus shard with scripts/corpus.py, then encode it "
                             f"with scripts/tokenizer.py")
    out = args.out or cache_dir() / "checkpoints" / "run"
    state = fresh_state()
    if (out / "train_state.json").exists() and args.init is not None:
        raise SystemExit(f"{out} already holds a run to resume; pass a fresh --out to start from {args.init}, "
                         f"or drop --init to resume {out}")
    if (out / "train_state.json").exists():
        model = load_model(out)
        state = json.loads((out / "train_state.json").read_text())
        print(f"resuming {out} at step {state['step']} ({state['tokens']:,} tokens)")
    elif args.init is not None:
        model = load_model(args.init)
        init_state = args.init / "train_state.json"
        if init_state.exists():
            state = json.loads(init_state.read_text())
        print(f"starting from {args.init} at step {state['step']}")
    else:
        cfg = GPTConfig(vocab_size=args.vocab_size, context_length=args.context, n_layer=args.n_layer,
                        n_head=args.n_head, n_embd=args.n_embd)
        model = GPT(cfg)
    cfg = model.cfg
    block = args.block or cfg.context_length
    print(f"model: {model.num_params():,} parameters, {cfg}")
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (decay if param.dim() >= 2 else no_decay).append(param)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    restore_optimizer(out if (out / "optimizer.safetensors").exists() else (args.init or out), model, opt, state)
    cursors = shard_cursors(state)
    if state.get("block", block) != block:
        raise SystemExit(f"{out} was trained on windows of {state['block']} tokens; resume it with --block "
                         f"{state['block']}, since its cursors count those windows")
    state["block"] = block  # a cursor counts windows of this many tokens
    streams = {}
    for path, weight in data:
        streams[path.name] = (TokenStream(path / "train.bin", block), weight)
        streams[path.name][0].cursor = cursors.get(path.name, 0)
        print(f"training on {path / 'train.bin'} (weight {weight:g}) from window {cursors.get(path.name, 0):,} "
              f"(epoch {streams[path.name][0].epoch:.2f})")
    stream = ShardMix(streams)
    budget = args.minutes * 60
    start = last_save = time.time()
    step_in_run = 0
    tokens_at_start = state["tokens"]
    bar = tqdm(desc="train", unit="step")
    model.train()
    stop_requested = install_stop_handler()
    while True:
        elapsed = time.time() - start
        if elapsed >= budget:
            stopped = "budget"
            break
        if args.max_steps is not None and step_in_run >= args.max_steps:
            stopped = "max_steps"
            break
        if stop_requested():
            tqdm.write("stop requested: saving the checkpoint")
            stopped = "signal"
            break
        lr = learning_rate(step_in_run, elapsed, budget, args.lr, args.warmup, args.decay_fraction)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = stream.batch(args.batch_size)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss, _ = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step_in_run += 1
        state["step"] += 1
        state["tokens"] += x.numel()
        cursors.update(stream.cursors())
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", lr=f"{lr:.1e}",
                        tok_s=f"{x.numel() * step_in_run / max(1e-9, time.time() - start):.0f}")
        if state["step"] % args.eval_every == 0:
            metrics = evaluate(model, val_data / "val.bin", block, args.eval_batches, args.batch_size)
            record = {"step": state["step"], "tokens": state["tokens"], "train_loss": loss.item(), "lr": lr,
                      "epochs": stream.epochs(), "val_data": val_data.name, **metrics}
            state["history"].append(record)
            tqdm.write(json.dumps(record))
        if time.time() - last_save > args.save_every_minutes * 60:
            save_checkpoint(out, model, opt, state)
            last_save = time.time()
    bar.close()
    seconds = round(time.time() - start, 1)
    metrics = evaluate(model, val_data / "val.bin", block, args.eval_batches, args.batch_size)
    state["history"].append({"step": state["step"], "tokens": state["tokens"], "final": True, "stopped": stopped,
                             "seconds": seconds, "tokens_this_run": state["tokens"] - tokens_at_start,
                             **metrics})
    save_checkpoint(out, model, opt, state)
    print(json.dumps(state["history"][-1]))


if __name__ == "__main__":
    main()
