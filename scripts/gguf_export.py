"""Write our own model as a GGUF that llama.cpp runs as its `gpt2` architecture.

    python scripts/gguf_export.py --out /tmp/python-small.gguf [--source models/python-small/training] [--type f32]
    python scripts/gguf_export.py --out /tmp/python-small.gguf --check   # also: llama.cpp's greedy token vs ours

Why: the tests and benchmarks of the OpenAI-compatible remote backend need a real server to talk to, and
llama-cpp-python's server is the one that installs from PyPI and runs offline. Giving it our own weights
(rather than a downloaded model) keeps everything offline and lets a test check that the server's
predictions are our model's. llama.cpp's converter wants torch and a Hugging Face folder, so this writes
the file itself with the `gguf` package's GGUFWriter from the fp32 training weights (safetensors, read
without torch) and the bundle's tokenizer.json.

Our model (scripts/model.py) is GPT-2 without linear biases and with a tied output head; llama.cpp's gpt2
requires every bias, so those are written as zeros, and it ties the head itself when `output.weight` is
absent. Differences that remain: llama.cpp's GELU is the tanh approximation (ours is erf), and no
pre-tokenizer llama.cpp knows isolates a line's leading spaces as ours does: for text it tokenizes itself,
"    return" becomes "   " + " return" where ours gives "    " + "return" (every other line tokenizes as
ours does, and "\n" stays a token of its own because no merge joins it). Ids given to it run our model's
computation either way: `--check` measures that.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gguf
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from completer.graph.safetensors_reader import load  # noqa: E402

DEFAULT_SOURCE = REPO / "models" / "python-small" / "training"
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which scripts/model.py uses
PRE_TOKENIZER = "gpt-2"  # the closest llama.cpp knows (deepseek-*, starcoder, laguna split more lines unlike ours)
TYPES = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
         "q8_0": gguf.GGMLQuantizationType.Q8_0}
FILE_TYPES = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
              "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


def gguf_tensors(weights: dict[str, np.ndarray], n_layer: int) -> dict[str, np.ndarray]:
    """Our weight names to llama.cpp's gpt2 names; zero biases where our linear layers have none.

    nn.Linear keeps (out, in), which is the numpy shape GGUF expects (ggml reads it as ne = {in, out})."""
    out = {"token_embd.weight": weights["wte.weight"], "position_embd.weight": weights["wpe.weight"],
           "output_norm.weight": weights["ln_f.weight"], "output_norm.bias": weights["ln_f.bias"]}
    for i in range(n_layer):
        ours, theirs = f"blocks.{i}.", f"blk.{i}."
        linear = {"attn_qkv": "attn.qkv.weight", "attn_output": "attn.proj.weight",
                  "ffn_up": "mlp.fc.weight", "ffn_down": "mlp.proj.weight"}
        for name, source in linear.items():
            weight = weights[ours + source]
            out[f"{theirs}{name}.weight"] = weight
            out[f"{theirs}{name}.bias"] = np.zeros(weight.shape[0], np.float32)
        for name, source in {"attn_norm": "ln_1", "ffn_norm": "ln_2"}.items():
            out[f"{theirs}{name}.weight"] = weights[f"{ours}{source}.weight"]
            out[f"{theirs}{name}.bias"] = weights[f"{ours}{source}.bias"]
    return out


def encoded(tensor: np.ndarray, kind: str) -> tuple[np.ndarray, gguf.GGMLQuantizationType]:
    """One tensor in the chosen type; vectors (norms, biases) stay f32, as llama.cpp's own converter keeps them."""
    tensor = np.ascontiguousarray(tensor, dtype=np.float32)
    qtype = TYPES[kind] if tensor.ndim == 2 else gguf.GGMLQuantizationType.F32
    if qtype == gguf.GGMLQuantizationType.F32:
        return tensor, qtype
    if qtype == gguf.GGMLQuantizationType.F16:
        return tensor.astype(np.float16), qtype
    return gguf.quants.quantize(tensor, qtype), qtype


def add_tokenizer(writer: gguf.GGUFWriter, tokenizer_path: Path, end_of_text: int) -> None:
    """Byte-level BPE vocabulary in id order, its merges, and our end-of-text as both bos and eos."""
    spec = json.loads(tokenizer_path.read_text(encoding="utf-8"))
    vocab: dict[str, int] = spec["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise ValueError(f"{tokenizer_path}: token ids are not 0..{len(tokens) - 1}")
    special = {t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(PRE_TOKENIZER)
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
                            for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(end_of_text)
    writer.add_eos_token_id(end_of_text)
    writer.add_add_bos_token(False)  # our engine starts a document with end-of-text itself; a prompt is text


def export(source: Path, out: Path, kind: str = "f32", bundle: Path | None = None) -> Path:
    """Write `out` from the training folder `source` (config.json, model.safetensors) and the bundle beside it."""
    bundle = bundle or source.parent
    config = json.loads((source / "config.json").read_text())
    manifest = json.loads((bundle / "manifest.json").read_text())
    n_layer, n_embd = int(config["n_layer"]), int(config["n_embd"])
    tensors = gguf_tensors(load(source / "model.safetensors"), n_layer)
    writer = gguf.GGUFWriter(str(out), "gpt2")
    writer.add_name(manifest.get("name", source.parent.name))
    writer.add_context_length(int(config["context_length"]))
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(int(config.get("mlp_width") or 4 * n_embd))
    writer.add_head_count(int(config["n_head"]))
    writer.add_layer_norm_eps(LAYER_NORM_EPS)
    writer.add_file_type(FILE_TYPES[kind])
    add_tokenizer(writer, bundle / "tokenizer.json", int(manifest["special_tokens"]["end_of_text"]))
    for name, tensor in tensors.items():
        data, qtype = encoded(tensor, kind)
        writer.add_tensor(name, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz and Stegun 7.1.26 (error under 1.5e-7, below float32's resolution here): numpy has no erf."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LAYER_NORM_EPS) * weight + bias


def reference_next_tokens(source: Path, ids: list[int]) -> np.ndarray:
    """Our model's greedy next token after each position: scripts/model.py's forward in float32 numpy."""
    config = json.loads((source / "config.json").read_text())
    w = load(source / "model.safetensors")
    n_head, n = int(config["n_head"]), len(ids)
    x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    causal = np.triu(np.full((n, n), -np.inf, np.float32), 1)
    for i in range(int(config["n_layer"])):
        b = f"blocks.{i}."
        q, k, v = np.split(_layer_norm(x, w[b + "ln_1.weight"], w[b + "ln_1.bias"]) @ w[b + "attn.qkv.weight"].T, 3, -1)
        q, k, v = (m.reshape(n, n_head, -1).transpose(1, 0, 2) for m in (q, k, v))  # (H, T, D)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1]) + causal
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        y = (probs / probs.sum(-1, keepdims=True)) @ v
        x = x + y.transpose(1, 0, 2).reshape(n, -1) @ w[b + "attn.proj.weight"].T
        h = _layer_norm(x, w[b + "ln_2.weight"], w[b + "ln_2.bias"]) @ w[b + "mlp.fc.weight"].T
        x = x + (0.5 * h * (1.0 + _erf(h / np.sqrt(2.0)))) @ w[b + "mlp.proj.weight"].T
    return (_layer_norm(x, w["ln_f.weight"], w["ln_f.bias"]) @ w["wte.weight"].T).argmax(-1)


def llama_next_tokens(gguf_path: Path, ids: list[int], threads: int = 2) -> np.ndarray:
    """llama.cpp's greedy next token after each position of the same ids."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf_path), logits_all=True, n_ctx=1024, n_batch=1024, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    try:
        llm.eval(ids)
        return np.asarray(llm.scores[:len(ids)]).argmax(-1)
    finally:
        llm.close()


def heldout_ids(source: Path, limit: int) -> list[int]:
    """End-of-text and then our tokenizer's ids of this repository's own completer/*.py (not in the corpus)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(source.parent / "tokenizer.json"))
    tokenizer.encode_special_tokens = True
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "completer").glob("*.py")))
    end_of_text = json.loads((source.parent / "manifest.json").read_text())["special_tokens"]["end_of_text"]
    return [int(end_of_text), *tokenizer.encode(text, add_special_tokens=False).ids[:limit - 1]]


def agreement(gguf_path: Path, source: Path = DEFAULT_SOURCE, positions: int = 600) -> float:
    """Share of positions where llama.cpp's greedy next token is ours, both fed our tokenizer's ids."""
    ids = heldout_ids(source, positions)
    return float((llama_next_tokens(gguf_path, ids) == reference_next_tokens(source, ids)).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                        help="training folder: config.json and model.safetensors (its parent holds the bundle)")
    parser.add_argument("--type", choices=sorted(TYPES), default="f32", help="type of the 2-D tensors")
    parser.add_argument("--check", action="store_true",
                        help="then report how often llama.cpp's greedy next token is ours (600 held-out positions)")
    args = parser.parse_args()
    path = export(args.source, args.out, args.type)
    print(f"{path}: {path.stat().st_size / 2**20:.1f} MiB ({args.type})")
    if args.check:
        print(f"greedy next-token agreement with our model: {agreement(path, args.source):.2%}")


if __name__ == "__main__":
    main()
