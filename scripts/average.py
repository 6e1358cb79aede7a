"""Average the weights of checkpoints from one training lineage, so the end points of two runs that
each decayed into a slightly different spot give one model that lies between them.

Averaging is only meaningful for checkpoints of one shape that descend from the same weights (a run
and the run that resumed it): independently trained models do not share a basin, and their mean
computes nothing useful. The mean is taken in float64 and stored in each tensor's own dtype. The train
state of the last checkpoint (tokens seen, shard cursors) carries over so export.py can describe the
data; its AdamW moments do not, since no optimizer produced the mean. With `--val`, the averaged
model's own validation loss is measured and recorded, so the model card states the loss of the
weights it ships rather than the last run's.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import GPT, GPTConfig  # noqa: E402
from train import carried_state, evaluate, write_weights_checkpoint  # noqa: E402


def mean_weights(sources: list[Path]) -> tuple[GPTConfig, dict[str, torch.Tensor]]:
    """The config the sources share and the mean of their tensors; refuses sources of another shape."""
    if len(sources) < 2:
        raise SystemExit("average.py needs at least two checkpoints: the mean of one is itself")
    configs = []
    for source in sources:
        for needed in ("config.json", "model.safetensors"):
            if not (source / needed).exists():
                raise SystemExit(f"{source / needed} is missing: each --from takes a checkpoint dir written by "
                                 f"train.py")
        configs.append(json.loads((source / "config.json").read_text()))
    if any(config != configs[0] for config in configs[1:]):
        raise SystemExit("the checkpoints differ in shape (config.json): only one lineage's weights can be averaged")
    total: dict[str, torch.Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    for source in sources:
        weights = load_file(str(source / "model.safetensors"))
        if total and weights.keys() != total.keys():
            raise SystemExit(f"{source}: its tensors are not the first checkpoint's")
        for name, tensor in weights.items():
            dtypes[name] = tensor.dtype
            total[name] = total.get(name, 0) + tensor.double()
    cfg = GPTConfig(**configs[0])
    return cfg, {name: (summed / len(sources)).to(dtypes[name]) for name, summed in total.items()}


def average(sources: list[Path], out: Path, val: Path | None = None, batches: int = 8, batch_size: int = 8) -> dict:
    """Write the mean of `sources` to `out` as a checkpoint train.py --init and export.py read; returns
    its train state."""
    if out.exists():
        raise SystemExit(f"{out} already exists; pick a fresh --out")
    if val is not None and not val.is_file():
        raise SystemExit(f"{val} is missing: --val takes the val.bin that corpus.py and tokenizer.py wrote")
    cfg, weights = mean_weights(sources)
    model = GPT(cfg)
    model.load_state_dict(weights)
    state = carried_state(sources[-1])
    record: dict = {"step": state["step"], "tokens": state["tokens"], "averaged": [s.resolve().name for s in sources]}
    if val is not None:
        record.update(evaluate(model, val, state.get("block", cfg.context_length), batches, batch_size))
    state["history"] = [*state.get("history", []), record]
    state.setdefault("averaged", []).append(record["averaged"])
    write_weights_checkpoint(out, weights, cfg, state)
    return state


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from", dest="sources", type=Path, action="append", required=True,
                   help="a checkpoint dir (repeat; the last one's train state carries over)")
    p.add_argument("--out", type=Path, required=True, help="new checkpoint dir; export it with export.py")
    p.add_argument("--val", type=Path, default=None, help="a val.bin to measure the mean's validation loss on")
    p.add_argument("--eval-batches", type=int, default=8, help="as train.py's, so the losses compare")
    args = p.parse_args()
    torch.manual_seed(0)
    state = average(args.sources, args.out, args.val, args.eval_batches)
    print(json.dumps(state["history"][-1]))


if __name__ == "__main__":
    main()
