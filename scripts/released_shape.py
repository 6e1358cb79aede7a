"""A random checkpoint in the exact shape of a released model, as a Hugging Face folder, to measure what
`completer convert` makes of that shape on this machine without downloading anything.

    python scripts/released_shape.py --shape smollm2-135m --out /tmp/smollm2-135m-random
    completer convert /tmp/smollm2-135m-random --out /tmp/smollm2-135m-bundle
    python scripts/bench_lsp.py --settings '{"modelPath": "/tmp/smollm2-135m-bundle"}'

Speed depends on the shape, not on training. The weights are random bf16 (as released checkpoints are
stored); the tokenizer is a byte-level BPE trained here on the stdlib with Qwen2's pre-tokenizer, so it
merges newlines into other tokens as the released ones do, and the model's vocabulary pads it to the
released size (the padding ids are never generated, but the output head computes all of them).
"""
from __future__ import annotations

import argparse
import json
import sys
import sysconfig
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from hf_models import QWEN_PATTERN, SPECIALS, STARCODER_SPECIALS  # noqa: E402

_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
          "tie_word_embeddings": True}
_QWEN2 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu",
          "tie_word_embeddings": True, "use_sliding_window": False, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
          "max_position_embeddings": 32768}
SHAPES = {  # from each model's published config.json
    "smollm2-135m": {**_LLAMA, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                     "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
                     "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5},
    "smollm2-360m": {**_LLAMA, "hidden_size": 960, "intermediate_size": 2560, "num_hidden_layers": 32,
                     "num_attention_heads": 15, "num_key_value_heads": 5, "vocab_size": 49152,
                     "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5},
    "qwen2.5-coder-0.5b": {**_QWEN2, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                           "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936},
    "qwen2.5-coder-1.5b": {**_QWEN2, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
                           "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936},
    "qwen2.5-coder-3b": {**_QWEN2, "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                         "num_attention_heads": 16, "num_key_value_heads": 2, "vocab_size": 151936},
    "qwen3-0.6b": {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_act": "silu",
                   "tie_word_embeddings": True, "use_sliding_window": False, "rope_theta": 1000000.0,
                   "rms_norm_eps": 1e-6, "max_position_embeddings": 32768, "hidden_size": 1024,
                   "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 128, "attention_bias": False, "vocab_size": 151936},
    "tiny-starcoder-py": {"model_type": "gpt_bigcode", "architectures": ["GPTBigCodeForCausalLM"], "n_embd": 768,
                          "n_head": 12, "n_inner": 3072, "n_layer": 20, "n_positions": 8192, "multi_query": True,
                          "activation_function": "gelu_pytorch_tanh", "layer_norm_epsilon": 1e-5,
                          "scale_attn_weights": True, "vocab_size": 49152, "bos_token_id": 0, "eos_token_id": 0},
}
TOKENIZER_VOCAB = 8192


def tokenizer(out: Path, specials: list[str]) -> None:
    """A byte-level BPE over the stdlib's Python, newlines merged as Qwen2's pre-tokenizer allows, with the
    `specials` (end-of-text first, then the shape's FIM markers) as added tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(stdlib.glob("*.py"))[:120]]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=TOKENIZER_VOCAB, special_tokens=specials,
                                  show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(texts, trainer=trainer)
    bpe.save(str(out / "tokenizer.json"))


def _rand(generator: torch.Generator, *shape: int) -> torch.Tensor:
    return (torch.randn(shape, generator=generator) * 0.02).to(torch.bfloat16)


def bigcode_weights(config: dict, seed: int) -> dict[str, torch.Tensor]:
    """gpt_bigcode's tensors (StarCoder, tiny_starcoder): torch Linear layouts, one key/value head, biases,
    LayerNorms; the output head tied to the embeddings, as released."""
    generator = torch.Generator().manual_seed(seed)
    c, f, v, n = config["n_embd"], config["n_inner"], config["vocab_size"], config["n_positions"]
    d = c // config["n_head"]
    ones, zeros = torch.ones(c, dtype=torch.bfloat16), torch.zeros(c, dtype=torch.bfloat16)
    out = {"transformer.wte.weight": _rand(generator, v, c), "transformer.wpe.weight": _rand(generator, n, c),
           "transformer.ln_f.weight": ones, "transformer.ln_f.bias": zeros}
    for i in range(config["n_layer"]):
        p = f"transformer.h.{i}"
        out.update({f"{p}.ln_1.weight": ones, f"{p}.ln_1.bias": zeros, f"{p}.ln_2.weight": ones,
                    f"{p}.ln_2.bias": zeros, f"{p}.attn.c_attn.weight": _rand(generator, c + 2 * d, c),
                    f"{p}.attn.c_attn.bias": _rand(generator, c + 2 * d),
                    f"{p}.attn.c_proj.weight": _rand(generator, c, c), f"{p}.attn.c_proj.bias": _rand(generator, c),
                    f"{p}.mlp.c_fc.weight": _rand(generator, f, c), f"{p}.mlp.c_fc.bias": _rand(generator, f),
                    f"{p}.mlp.c_proj.weight": _rand(generator, c, f), f"{p}.mlp.c_proj.bias": _rand(generator, c)})
    return {name: tensor.clone() for name, tensor in out.items()}  # safetensors refuses shared storage


def weights(config: dict, seed: int) -> dict[str, torch.Tensor]:
    if config["model_type"] == "gpt_bigcode":
        return bigcode_weights(config, seed)
    generator = torch.Generator().manual_seed(seed)
    c, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    d = config.get("head_dim") or c // config["num_attention_heads"]  # Qwen3's heads are wider than C / H
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d

    def rand(*shape: int) -> torch.Tensor:
        return _rand(generator, *shape)

    out = {"model.embed_tokens.weight": rand(v, c), "model.norm.weight": torch.ones(c, dtype=torch.bfloat16)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out.update({f"{p}.input_layernorm.weight": torch.ones(c, dtype=torch.bfloat16),
                    f"{p}.post_attention_layernorm.weight": torch.ones(c, dtype=torch.bfloat16),
                    f"{p}.self_attn.q_proj.weight": rand(q, c), f"{p}.self_attn.k_proj.weight": rand(kv, c),
                    f"{p}.self_attn.v_proj.weight": rand(kv, c), f"{p}.self_attn.o_proj.weight": rand(c, q),
                    f"{p}.mlp.gate_proj.weight": rand(f, c), f"{p}.mlp.up_proj.weight": rand(f, c),
                    f"{p}.mlp.down_proj.weight": rand(c, f)})
        if config["model_type"] == "qwen3":  # Qwen3 normalizes each query and key head
            out.update({f"{p}.self_attn.q_norm.weight": torch.ones(d, dtype=torch.bfloat16),
                        f"{p}.self_attn.k_norm.weight": torch.ones(d, dtype=torch.bfloat16)})
        if config["model_type"] == "qwen2":  # Qwen2's q/k/v projections carry biases
            out.update({f"{p}.self_attn.q_proj.bias": rand(q), f"{p}.self_attn.k_proj.bias": rand(kv),
                        f"{p}.self_attn.v_proj.bias": rand(kv)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = dict(SHAPES[args.shape])
    args.out.mkdir(parents=True, exist_ok=True)
    specials = {"qwen2": SPECIALS, "gpt_bigcode": STARCODER_SPECIALS}.get(config["model_type"], SPECIALS[:1])
    tokenizer(args.out, specials)
    (args.out / "config.json").write_text(json.dumps(config, indent=1))
    save_file(weights(config, args.seed), str(args.out / "model.safetensors"))
    (args.out / "README.md").write_text(f"---\nlicense: random-weights\n---\nRandom weights in the {args.shape} shape.\n")
    print(f"wrote {args.out} ({args.shape}, random bf16 weights)")


if __name__ == "__main__":
    main()
