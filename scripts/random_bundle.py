"""A bundle of random weights in a given shape, to price a shape's keystroke before anything trains it.

    python scripts/random_bundle.py --shape 8x8x256 --out /tmp/shape-8x8x256
    python scripts/bench_engine.py --candidate /tmp/shape-8x8x256 --rounds 2

Its suggestions are noise and its searches run longer or shorter than a trained model's, so compare
the benchmark's time per model run (ratio_per_model_run_p50), not its keystroke times. The INT8 size
it prints is the trained model's, to within the quantization's per-channel scales.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export import export  # noqa: E402
from gpu_train import BASE_TOKENIZER, parse_shape  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=parse_shape, required=True, help="LAYERSxHEADSxWIDTH")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, default=BASE_TOKENIZER)
    args = parser.parse_args()
    layers, heads, width = args.shape
    size = Tokenizer.from_file(str(args.tokenizer)).get_vocab_size()
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=size, context_length=1024, n_layer=layers, n_head=heads, n_embd=width))
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = Path(tmp)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(checkpoint / "model.safetensors"))
        (checkpoint / "config.json").write_text(json.dumps(model.cfg.to_dict()))
        manifest = export(checkpoint, args.out, args.tokenizer, checkpoint / "fp32.onnx", f"random-{layers}x{heads}x{width}")
    print(f"{args.out}: {model.num_params():,} parameters, INT8 model.onnx "
          f"{manifest['files']['model.onnx']['bytes'] / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
