"""Tiny Hugging Face checkpoints built in the test run (no downloads): a byte-level BPE tokenizer that merges
newlines into other tokens, as released code models' do, and random models of each supported family."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

# Qwen2's pre-tokenizer pattern: punctuation keeps the newlines after it ("):\n"), so they merge.
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|repo_name|>", "<|file_sep|>"]
STARCODER2_SPECIALS = ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<repo_name>", "<file_sep>"]
STARCODER_SPECIALS = STARCODER2_SPECIALS[:4]  # StarCoder's and SantaCoder's: FIM, no repository markers


def training_text() -> str:
    import argparse
    import json as json_module
    import textwrap

    return "\n".join(Path(m.__file__).read_text() for m in (argparse, json_module.decoder, textwrap))


def build_tokenizer(folder: Path, vocab_size: int = 600, fim: bool = True, specials: list[str] = SPECIALS) -> Path:
    """A byte-level BPE tokenizer.json whose vocabulary merges newlines with punctuation; with `fim`, the
    `specials` (Qwen2.5-Coder's markers by default), else end-of-text alone."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    specials = specials if fim else specials[:1]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([training_text()], trainer=trainer)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def perturb(model, seed: int = 0, scale: float = 0.3) -> None:
    """Give every parameter (biases and norms too) random values, so a missed bias or a wrong norm shows."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator) * scale
            norm = name.endswith("norm.weight") or (".ln_" in name or "layernorm" in name) and "weight" in name
            param.copy_(1.0 + noise * 0.3 if norm else noise)


def build_model(folder: Path, family: str, vocab_size: int, tied: bool = True, seed: int = 0, head_dim: int = 24):
    """A random checkpoint of `family` saved with save_pretrained; returns the transformers model (`head_dim`:
    Qwen3's head size)."""
    import torch
    from transformers import (AutoModelForCausalLM, GPT2Config, GPTBigCodeConfig, LlamaConfig, Qwen2Config,
                              Qwen3Config, Starcoder2Config)

    torch.manual_seed(seed)
    if family == "gpt2":
        config = GPT2Config(n_embd=48, n_layer=2, n_head=4, vocab_size=vocab_size, n_positions=256,
                            tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0)
    elif family.startswith("llama"):  # grouped-query attention: 2 key/value heads for 4 query heads
        biases = family == "llama_bias"  # as Granite's code models have, on attention and MLP
        config = LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, vocab_size=vocab_size, max_position_embeddings=512,
                             rope_theta=50000.0, tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0,
                             attention_bias=biases, mlp_bias=biases)
    elif family == "gpt_bigcode":  # StarCoder's: GPT-2 with one key/value head (multi-query attention)
        config = GPTBigCodeConfig(n_embd=48, n_layer=2, n_head=4, vocab_size=vocab_size, n_positions=256,
                                  multi_query=True, tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0)
    elif family == "gpt_bigcode_mha":  # gpt_bigcode with a key/value head per query head: its rows interleaved
        config = GPTBigCodeConfig(n_embd=48, n_layer=2, n_head=4, vocab_size=vocab_size, n_positions=256,
                                  multi_query=False, tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0)
    elif family.startswith("starcoder2"):  # rotary, grouped-query attention, LayerNorm and GELU MLP (biases)
        config = Starcoder2Config(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, vocab_size=vocab_size, max_position_embeddings=512,
                                  rope_theta=999999.0, sliding_window=4096, tie_word_embeddings=tied,
                                  use_bias=family != "starcoder2_no_bias", bos_token_id=0, eos_token_id=0)
    elif family == "qwen3":  # each query and key head RMS-normalized; a head size of its own (not 64 / 4)
        config = Qwen3Config(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=head_dim, vocab_size=vocab_size,
                             max_position_embeddings=512, tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0)
    else:  # qwen2: q/k/v biases, one key/value head
        config = Qwen2Config(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=1, vocab_size=vocab_size, max_position_embeddings=512,
                             tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0)
    model = AutoModelForCausalLM.from_config(config).eval()
    perturb(model, seed)
    if tied:
        model.tie_weights()
    model.save_pretrained(folder)
    return model


def checkpoint(folder: Path, family: str, tied: bool = True, fim: bool = True, pad: int = 8, seed: int = 0,
               specials: list[str] = SPECIALS, head_dim: int = 24):
    """A whole checkpoint folder: tokenizer.json, config.json, model.safetensors, a model card; the model's
    vocabulary padded `pad` ids past the tokenizer's, as released models pad theirs."""
    from tokenizers import Tokenizer

    tokenizer = build_tokenizer(folder, fim=fim, specials=specials)
    size = Tokenizer.from_file(str(tokenizer)).get_vocab_size()
    model = build_model(folder, family, size + pad, tied=tied, seed=seed, head_dim=head_dim)
    (folder / "README.md").write_text("---\nlicense: apache-2.0\n---\n# tiny test model\n")
    return model


def logits(model, ids: list[int]) -> np.ndarray:
    import torch

    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()  # [S, V]


def json_edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))
