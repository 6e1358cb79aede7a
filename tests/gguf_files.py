"""GGUF files of the tiny test checkpoints (tests/hf_models.py), written as llama.cpp's converter writes them:
LLaMA's query and key rows permuted for its rotation, its tensor names and metadata, the vocabulary and merges.
tests/test_gguf_source.py checks this layout against llama.cpp itself."""
from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np


def _permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """What llama.cpp's converter does to LLaMA's query and key rows (conversion/llama.py, `permute`)."""
    return rows.reshape(heads, 2, rows.shape[0] // heads // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def write_gguf(source: Path, out: Path, family: str, quantized: bool) -> Path:
    """The checkpoint folder `source` as the GGUF llama.cpp's converter writes for it (matrices Q8_0 when
    `quantized` and their rows are whole blocks of 32, else F32; vectors F32); `family` names hf_models' variant
    (llama_bias: the llama architecture; gpt_bigcode: llama.cpp's `starcoder`; gpt2: its `gpt2`, whose converter
    writes GPT-2's Conv1D weights transposed and its tied output head as a tensor of its own)."""
    family = family.removesuffix("_bias")
    from safetensors.numpy import load_file

    config = json.loads((source / "config.json").read_text())
    spec = json.loads((source / "tokenizer.json").read_text())
    weights = load_file(str(source / "model.safetensors"))
    architecture = "starcoder" if family == "gpt_bigcode" else family
    writer = gguf.GGUFWriter(str(out), architecture)
    writer.add_name(f"tiny {family} coder")  # a Qwen2.5 file named for a general model converts without FIM
    writer.add_license("apache-2.0")
    heads, kv_heads = _hyperparameters(writer, config, family)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
    vocab = {**spec["model"]["vocab"], **{t["content"]: t["id"] for t in spec["added_tokens"]}}
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    special = {t["id"] for t in spec["added_tokens"]}
    padded = config["vocab_size"]
    tokens = [token for token, _ in by_id] + [f"[PAD{i}]" for i in range(len(by_id), padded)]
    types = [gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL for i in range(len(by_id))]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")  # hf_models' tokenizer splits text with Qwen2's pattern
    writer.add_token_list(tokens)
    writer.add_token_types(types + [gguf.TokenType.UNUSED] * (padded - len(by_id)))
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]])
    writer.add_eos_token_id(vocab["<|endoftext|>"])
    writer.add_add_bos_token(False)
    for name, value in weights.items():
        target = _gguf_name(name, family)
        value = np.ascontiguousarray(value, np.float32)
        if family == "gpt2" and name.endswith(CONV1D_WEIGHTS):  # conversion/gpt2.py: [in, out] -> [out, in]
            value = np.ascontiguousarray(value.T)
        if family == "llama" and target.endswith(("attn_q.weight", "attn_k.weight", "attn_q.bias", "attn_k.bias")):
            value = _permute(value, heads if "attn_q" in target else kv_heads)
        if quantized and value.ndim == 2 and value.shape[-1] % 32 == 0:  # as llama.cpp's, rows of whole blocks
            writer.add_tensor(target, gguf.quants.quantize(value, gguf.GGMLQuantizationType.Q8_0),
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(target, value)
    if family == "gpt2" and "lm_head.weight" not in weights:  # llama.cpp's gpt2 always has its output head
        writer.add_tensor("output.weight", np.ascontiguousarray(weights["transformer.wte.weight"], np.float32))
    finish(writer)
    return out


def _hyperparameters(writer, config: dict, family: str) -> tuple[int, int]:
    """The shape's metadata as llama.cpp's converter writes it for `family`; returns (heads, key/value heads)."""
    if family in ("gpt_bigcode", "gpt2"):  # conversion/starcoder.py: always one key/value head; gpt2: none named
        writer.add_context_length(config["n_positions"])
        writer.add_embedding_length(config["n_embd"])
        writer.add_feed_forward_length(config.get("n_inner") or 4 * config["n_embd"])
        writer.add_block_count(config["n_layer"])
        writer.add_head_count(config["n_head"])
        if family == "gpt_bigcode":
            writer.add_head_count_kv(1)
        writer.add_layer_norm_eps(config["layer_norm_epsilon"])
        return config["n_head"], 1 if family == "gpt_bigcode" else config["n_head"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(float(config.get("rope_theta") or config["rope_parameters"]["rope_theta"]))
    if config.get("head_dim"):  # Qwen3's head size of its own, as conversion/qwen.py writes it
        writer.add_key_length(config["head_dim"])
        writer.add_value_length(config["head_dim"])
    if family == "starcoder2":
        writer.add_layer_norm_eps(config["norm_epsilon"])
    else:
        writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    return heads, kv_heads


GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                "model.norm.bias": "output_norm.bias", "lm_head.weight": "output.weight",
                "transformer.wte.weight": "token_embd.weight", "transformer.wpe.weight": "position_embd.weight",
                "transformer.ln_f.weight": "output_norm.weight", "transformer.ln_f.bias": "output_norm.bias"}
LAYER_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
               "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
               "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
               "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down",
               "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
               "ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm"}


CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def _gguf_name(name: str, family: str) -> str:
    """llama.cpp's name of a checkpoint tensor (gguf-py's tensor_mapping.py)."""
    if name in GLOBAL_NAMES:
        return GLOBAL_NAMES[name]
    parts = name.split(".")
    layer, rest = (parts[2], parts[3:]) if parts[0] in ("model", "transformer") else (None, [])
    if layer is None or not layer.isdigit():
        raise ValueError(f"no GGUF name for {name}")
    return f"blk.{layer}.{LAYER_NAMES['.'.join(rest[:-1])]}.{rest[-1]}"


def finish(writer) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def rewritten(source: Path, out: Path, architecture: str = "qwen2", extra: dict | None = None,
               numbers: dict | None = None, drop: tuple[str, ...] = (), floats: dict | None = None,
               **changes) -> Path:
    """The GGUF file at `source` written again: under another `architecture` (its keys renamed), with some
    metadata values changed, keys in `drop` left out, new whole-number keys (`numbers`) and float32 keys
    (`floats`), and `extra` tensors."""
    reader = gguf.GGUFReader(str(source))
    writer = gguf.GGUFWriter(str(out), architecture)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture" or field.name in drop:
            continue
        sub_type = field.types[-1] if len(field.types) > 1 else None
        value = changes.get(field.name, field.contents())
        writer.add_key_value(field.name.replace("qwen2.", f"{architecture}."), value, field.types[0], sub_type=sub_type)
    for tensor in reader.tensors:
        shape = tuple(int(n) for n in reversed(tensor.shape))
        writer.add_tensor(tensor.name, np.asarray(tensor.data).reshape(shape))
    for name, number in (numbers or {}).items():
        writer.add_uint32(name, number)
    for name, number in (floats or {}).items():
        writer.add_float32(name, number)
    for name, value in (extra or {}).items():
        writer.add_tensor(name, value)
    finish(writer)
    return out
