"""Deepen or widen a trained checkpoint without changing what it computes, so a larger model starts
where the small one stopped instead of from scratch.

Deeper (--factor): each old block i becomes block i*f, followed by f-1 copies of itself whose two
residual output projections (attention and MLP) are zero: a zeroed copy adds nothing to the
residual stream, so the deeper model's logits equal the old model's at step 0, while its other
weights start from trained values rather than noise.

Wider MLPs (--mlp-width): each MLP gains hidden units whose input weights are drawn as at
initialisation and whose output weights are zero, so they add nothing until training moves them.
This is the cheap way to add parameters at inference: a keystroke's time at a long context goes
mostly to attention over the prefix, which a wider MLP does not touch
(docs/experiments/2026-11-24-benchmarks-history.md, "Wider MLPs").

Training then gives the new weights their own work. The train state (tokens seen, shard cursors,
window length, history) carries over so the data stream continues where it was; the AdamW moments
do not (new parameters have none), so train the result with a warmup.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import GPT, INIT_STD, GPTConfig  # noqa: E402
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


def widen_mlps(weights: dict[str, torch.Tensor], n_layer: int, width: int, seed: int = 0
               ) -> dict[str, torch.Tensor]:
    """The weights of a model whose MLPs have `width` hidden units and that computes what `weights`
    computes: the new units' output weights are zero."""
    generator = torch.Generator().manual_seed(seed)
    grown = dict(weights)
    for layer in range(n_layer):
        fc, proj = weights[f"blocks.{layer}.mlp.fc.weight"], weights[f"blocks.{layer}.mlp.proj.weight"]  # [M, C], [C, M]
        extra = width - fc.shape[0]
        new_in = torch.randn(extra, fc.shape[1], generator=generator, dtype=fc.dtype) * INIT_STD  # [extra, C]
        grown[f"blocks.{layer}.mlp.fc.weight"] = torch.cat([fc, new_in])  # [width, C]
        grown[f"blocks.{layer}.mlp.proj.weight"] = torch.cat([proj, torch.zeros(proj.shape[0], extra,
                                                                                   dtype=proj.dtype)], dim=1)  # [C, width]
    return grown


def grow(source: Path, out: Path, factor: int = 1, mlp_width: int | None = None) -> GPTConfig:
    """Write a deepened and/or widened copy of the checkpoint in `source` to `out`; returns the new
    config. Stop a run before growing its checkpoint, so the weights and the cursors come from the
    same save."""
    if factor < 1:
        raise SystemExit("--factor must be at least 1")
    if factor == 1 and mlp_width is None:
        raise SystemExit("nothing to grow: give --factor 2 or more, or --mlp-width")
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
    if mlp_width is not None and mlp_width <= cfg.mlp_hidden:
        raise SystemExit(f"--mlp-width must exceed the MLPs' present {cfg.mlp_hidden} hidden units")
    grown_cfg = GPTConfig(**{**cfg.to_dict(), "n_layer": cfg.n_layer * factor,
                             "mlp_width": mlp_width or cfg.mlp_width})
    grown = weights if mlp_width is None else widen_mlps(weights, cfg.n_layer, mlp_width)
    grown = grown if factor == 1 else deepen(grown, cfg.n_layer, factor)
    GPT(grown_cfg).load_state_dict(grown)
    state = carried_state(source)
    record = {"from": source.resolve().name, "n_layer": cfg.n_layer, "factor": factor,
              "step": state["step"] or 0, "tokens": state["tokens"] or 0}
    if mlp_width is not None:
        record.update(mlp_from=cfg.mlp_hidden, mlp_width=mlp_width)
    state.setdefault("grown", []).append(record)
    write_weights_checkpoint(out, grown, grown_cfg, state)
    return grown_cfg


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from", dest="source", type=Path, required=True, help="checkpoint dir to deepen")
    p.add_argument("--out", type=Path, required=True, help="new checkpoint dir; train it with train.py --init")
    p.add_argument("--factor", type=int, default=None,
                   help="blocks per old block (2 doubles the depth; default 2, or 1 with --mlp-width)")
    p.add_argument("--mlp-width", type=int, default=None, help="hidden units per MLP after widening")
    args = p.parse_args()
    factor = args.factor if args.factor is not None else (1 if args.mlp_width else 2)
    cfg = grow(args.source, args.out, factor, args.mlp_width)
    print(f"wrote {args.out}: {cfg.n_layer} layers, MLPs of {cfg.mlp_hidden}; train it with "
          f"python scripts/train.py --init {args.out} --out NEWDIR --warmup 200 ...")


if __name__ == "__main__":
    main()
