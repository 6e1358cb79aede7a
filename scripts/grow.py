"""Deepen a trained checkpoint without changing what it computes, so a larger model starts where the
small one stopped instead of from scratch.

Each old block i becomes block i*f, followed by f-1 copies of itself whose two residual output
projections (attention and MLP) are zero: a zeroed copy adds nothing to the residual stream, so the
deeper model's logits equal the old model's at step 0, while its other weights start from trained
values rather than noise. Training then gives the new blocks their own work. The train state (tokens
seen, shard cursors, window length, history) carries over so the data stream continues where it
was; the AdamW moments do not (new parameters have none), so train the result with a warmup.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import GPT, GPTConfig  # noqa: E402
from train import carried_state, load_model, write_weights_checkpoint  # noqa: E402

RESIDUAL_OUTPUTS = ("attn.proj.weight", "mlp.proj.weight")  # what a block adds to the residual stream


def deepen(weights: dict[str, torch.Tensor], n_layer: int, factor: int) -> dict[str, torch.Tensor]:
    """The weights of a model with n_layer * factor blocks that computes what `weights` computes."""
    grown = {name: tensor for name, tensor in weights.items() if not name.startswith("blocks.")}
    for old in range(n_layer):
        prefix = f"blocks.{old}."
        block = {name[len(prefix):]: tensor for name, tensor in weights.items() if name.startswith(prefix)}
        for copy in range(factor):
            for name, tensor in block.items():
                silent = copy > 0 and name in RESIDUAL_OUTPUTS
                grown[f"blocks.{old * factor + copy}.{name}"] = torch.zeros_like(tensor) if silent else tensor.clone()
    return grown


def grow(source: Path, out: Path, factor: int) -> GPTConfig:
    """Write a deepened copy of the checkpoint in `source` to `out`; returns the new config. Stop a run
    before growing its checkpoint, so the weights and the cursors come from the same save."""
    if factor < 2:
        raise SystemExit("--factor must be at least 2: a factor of 1 is the model itself")
    for needed in ("config.json", "model.safetensors"):
        if not (source / needed).exists():
            raise SystemExit(f"{source / needed} is missing: --from takes a checkpoint dir written by train.py")
    if out.exists():
        raise SystemExit(f"{out} already exists; pick a fresh --out")
    try:
        model = load_model(source)  # every tensor of the source, each of the shape its config says
    except RuntimeError as error:
        raise SystemExit(f"{source}: model.safetensors does not match its config.json: "
                         f"{str(error).splitlines()[0]}") from None
    cfg, weights = model.cfg, model.state_dict()
    grown_cfg = GPTConfig(**{**cfg.to_dict(), "n_layer": cfg.n_layer * factor})
    grown = deepen(weights, cfg.n_layer, factor)
    GPT(grown_cfg).load_state_dict(grown)
    state = carried_state(source)
    state.setdefault("grown", []).append({"from": source.resolve().name, "n_layer": cfg.n_layer, "factor": factor,
                                          "step": state["step"] or 0, "tokens": state["tokens"] or 0})
    write_weights_checkpoint(out, grown, grown_cfg, state)
    return grown_cfg


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from", dest="source", type=Path, required=True, help="checkpoint dir to deepen")
    p.add_argument("--out", type=Path, required=True, help="new checkpoint dir; train it with train.py --init")
    p.add_argument("--factor", type=int, default=2, help="blocks per old block (2 doubles the depth)")
    args = p.parse_args()
    cfg = grow(args.source, args.out, args.factor)
    print(f"wrote {args.out}: {cfg.n_layer} layers; train it with "
          f"python scripts/train.py --init {args.out} --out NEWDIR --warmup 200 ...")


if __name__ == "__main__":
    main()
