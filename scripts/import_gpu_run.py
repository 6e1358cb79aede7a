"""Turn the files a GPU run returned (scripts/gpu_train.py) into a runtime bundle with its FIM template.

    python scripts/import_gpu_run.py RUN_DIR --out models/python-small

It checks every weights file against the checksum run.json gives, joins them, widens bf16 to fp32,
cuts the embedding's padding back to the tokenizer's vocabulary, and writes a training checkpoint
(<cache dir>/checkpoints/gpu-<name>) that scripts/train.py, grow.py and export.py read. Then it exports
the INT8 bundle as export.py does, adds the FIM tokens to the manifest, and keeps run.json (corpus,
licenses, history; the weights' list dropped) beside the fp32 weights in the bundle's training/.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export import export, fill_model_card  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from paths import cache_dir  # noqa: E402


class RunError(Exception):
    """The returned files are incomplete, altered or not a gpu_train.py run."""


def read_run(run_dir: Path) -> dict:
    path = run_dir / "run.json"
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise RunError(f"{path}: not readable as JSON ({error})") from error
    for key in ("config", "weights", "fim", "step", "tokens"):
        if key not in run:
            raise RunError(f"{path}: no {key!r}: not the run.json of scripts/gpu_train.py")
    return run


def joined_weights(run_dir: Path, run: dict) -> dict[str, torch.Tensor]:
    """Every tensor of the listed files, each file checked against its checksum first."""
    weights: dict[str, torch.Tensor] = {}
    for name, entry in sorted(run["weights"].items()):
        path = run_dir / name
        if not path.is_file():
            raise RunError(f"{path} is missing: run.json lists it (were all the files fetched?)")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != entry["sha256"]:
            raise RunError(f"{path}: checksum {digest[:12]}… is not run.json's {entry['sha256'][:12]}… "
                           f"(cut short or from another run)")
        tensors = load_file(str(path))
        if sorted(tensors) != sorted(entry["tensors"]):
            raise RunError(f"{path}: holds other tensors than run.json lists")
        weights.update(tensors)
    return weights


def check_tokenizer(run_dir: Path, run: dict) -> None:
    """The tokenizer is the run's: its checksum (runs that record one), its size and its FIM ids."""
    path = run_dir / "tokenizer.json"
    if not path.is_file():
        raise RunError(f"{path} is missing")
    expected = (run.get("tokenizer") or {}).get("sha256")
    if expected and hashlib.sha256(path.read_bytes()).hexdigest() != expected:
        raise RunError(f"{path}: not the tokenizer the run trained with (its checksum differs from run.json's)")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:  # the tokenizers library raises a bare Exception for a file it cannot parse
        raise RunError(f"{path}: not a tokenizer ({error})") from error
    size = run["config"].get("tokenizer_vocab_size")
    if tokenizer.get_vocab_size() != size:
        raise RunError(f"{path}: {tokenizer.get_vocab_size():,} tokens, the run's model was trained on {size}")
    for part, token in run["fim"].get("tokens", {}).items():
        if tokenizer.token_to_id(token) != run["fim"]["ids"].get(part):
            raise RunError(f"{path}: {token} is not id {run['fim']['ids'].get(part)}, as run.json says")


def checkpoint_from_run(run_dir: Path, out: Path) -> tuple[dict, GPTConfig]:
    """Write out/{model.safetensors (fp32), config.json, train_state.json}; returns the run and the config."""
    run = read_run(run_dir)
    check_tokenizer(run_dir, run)
    weights = joined_weights(run_dir, run)
    fields = {k: run["config"][k] for k in ("context_length", "n_layer", "n_head", "n_embd", "dropout", "mlp_width")}
    vocab = int(run["config"]["tokenizer_vocab_size"])
    cfg = GPTConfig(vocab_size=vocab, **fields)
    expected = set(GPT(cfg).state_dict())
    if set(weights) != expected:
        raise RunError(f"{run_dir}: the weights do not make a {cfg.n_layer}x{cfg.n_head}x{cfg.n_embd} model "
                       f"(missing {sorted(expected - set(weights))[:3]}, extra {sorted(set(weights) - expected)[:3]})")
    fp32 = {name: tensor.float() for name, tensor in weights.items()}
    fp32["wte.weight"] = fp32["wte.weight"][:vocab].contiguous()  # (V, C): the padding rows go
    model = GPT(cfg)
    model.load_state_dict(fp32)  # shapes checked here
    out.mkdir(parents=True, exist_ok=True)
    save_file(fp32, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    history = run.get("history", [])
    state = {"step": run["step"], "tokens": run["tokens"], "block": run["config"]["context_length"],
             "history": history[-1:], "gpu_run": {k: run.get(k) for k in ("machine", "train_seconds",
                                                                           "tokens_per_second", "epochs", "args")}}
    (out / "train_state.json").write_text(json.dumps(state, indent=1))
    return run, cfg


def add_fim(bundle: Path, run: dict) -> dict:
    """The manifest's FIM template: the three tokens' text and ids, the order the engine prompts in, and the
    orders the model was trained in."""
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    fim = run["fim"]
    manifest["special_tokens"].update({f"fim_{part}": fim["ids"][part] for part in ("prefix", "suffix", "middle")})
    # The engine prompts in SPM order: the PSM half of training taught these small models little (the first
    # middle token comes out a newline), SPM as much as the plain prompt (docs/experiments/2026-11-25-gpu-training.md).
    manifest["fim"] = {"tokens": fim["tokens"], "ids": fim["ids"], "order": "spm", "trained_orders": fim["orders"],
                       "rate": fim["rate"], "middle_ends_with": "newline"}
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the folder holding the run's files (run.json, model-*.safetensors, "
                                               "tokenizer.json)")
    parser.add_argument("--out", type=Path, required=True, help="the bundle dir to write")
    parser.add_argument("--name", default=None, help="the bundle's name (default: the --out folder's)")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="where the fp32 checkpoint goes (default: <cache dir>/checkpoints/gpu-<name>)")
    parser.add_argument("--training-note", default="", help="a sentence for the model card")
    parser.add_argument("--no-training-weights", action="store_true",
                        help="leave the fp32 weights out of the bundle's training/ (they stay in --checkpoint): "
                             "a bundle kept in git whose weights are too large for it")
    args = parser.parse_args()
    name = args.name or args.out.name
    checkpoint = args.checkpoint or cache_dir() / "checkpoints" / f"gpu-{name}"
    tokenizer = args.run / "tokenizer.json"
    try:
        run, cfg = checkpoint_from_run(args.run, checkpoint)
    except RunError as error:
        raise SystemExit(f"import_gpu_run.py: {error}") from None
    fp32_out = cache_dir() / "export" / f"{name}.fp32.onnx"
    export(checkpoint, args.out, tokenizer, fp32_out, name)
    manifest = add_fim(args.out, run)
    if args.no_training_weights:
        (args.out / "training" / "model.safetensors").unlink()
    kept = {k: v for k, v in run.items() if k != "weights"}
    (args.out / "training" / "gpu_run.json").write_text(json.dumps(kept, indent=1) + "\n")
    fill_model_card(args.out, manifest, args.training_note)
    size = manifest["files"]["model.onnx"]["bytes"]
    print(f"{args.out}: {cfg.n_layer}x{cfg.n_head}x{cfg.n_embd}, {run['tokens']:,} tokens; INT8 model.onnx "
          f"{size / 1e6:.2f} MB; checkpoint in {checkpoint}")


if __name__ == "__main__":
    main()
