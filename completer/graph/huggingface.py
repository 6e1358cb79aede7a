"""A local Hugging Face checkpoint folder as an Architecture and canonical weights.

Reads config.json and *.safetensors (one file or shards named by model.safetensors.index.json), never
the network and never pickles. Anything the graph does not implement is refused with one line that
names it: a silent wrong model is worse than none.
"""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np

from ..convertible import SUPPORTED_TYPES
from . import lazy, safetensors_reader
from .architecture import Architecture
from .lazy import Lazy

GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu": "gelu"}
TIED_BY_DEFAULT = ("gpt2", "gpt_bigcode", "starcoder2")  # transformers' default where config.json is silent
IGNORED_SUFFIXES = ("attn.bias", "attn.masked_bias", "rotary_emb.inv_freq")  # buffers some checkpoints saved


class Unsupported(ValueError):
    """The checkpoint asks for something the graph does not implement; the message says what."""


def read_json(folder: Path, name: str, missing: str) -> object:
    """A JSON file of the checkpoint folder, or a one-line refusal; `missing` says what to do when it is absent."""
    path = folder / name
    if not path.is_file():
        raise Unsupported(f"{folder}: no {name} ({missing})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: arrays nested thousands deep
        raise Unsupported(f"{path}: not readable JSON ({exc})") from exc


def read_config(folder: Path) -> dict:
    config = read_json(folder, "config.json", "download the whole model folder")
    path = folder / "config.json"
    if not isinstance(config, dict):
        raise Unsupported(f"{path}: not a JSON object")
    return config


def architecture(config: dict, context: int) -> Architecture:
    """The Architecture of a config.json, for a graph of `context` positions."""
    kind = config.get("model_type")
    if kind not in SUPPORTED_TYPES:
        raise Unsupported(f"model_type {kind!r} is not supported (supported: {', '.join(SUPPORTED_TYPES)})")
    read = {"gpt2": _gpt2, "gpt_bigcode": _gpt_bigcode, "starcoder2": _starcoder2}.get(kind, _llama)
    try:
        return read(config, context)
    except KeyError as exc:
        raise Unsupported(f"config.json has no {exc.args[0]!r}, which a {kind} model needs") from exc
    except (TypeError, ValueError, AttributeError, ArithmeticError) as exc:  # OverflowError: int(1e999)
        if isinstance(exc, Unsupported):
            raise
        raise Unsupported(f"config.json has a value a {kind} model cannot have ({exc})") from exc


def _gelu(name: object) -> str:
    activation = GPT2_ACTIVATIONS.get(name) if isinstance(name, str) else None
    if activation is None:
        raise Unsupported(f"activation {name!r} is not supported (supported: {', '.join(GPT2_ACTIVATIONS)})")
    return activation


def _gpt2(config: dict, _context: int = 0, kv_heads: int | None = None) -> Architecture:
    """GPT-2, and (with `kv_heads`) gpt_bigcode, which is GPT-2 with fewer key/value heads."""
    activation = _gelu(config.get("activation_function", "gelu_new"))
    if not config.get("scale_attn_weights", True) or config.get("scale_attn_by_inverse_layer_idx", False):
        raise Unsupported("GPT-2 attention scaling other than 1/sqrt(head size) is not supported")
    n_embd, n_head = int(config["n_embd"]), int(config["n_head"])
    return Architecture(family="gpt2", n_layer=int(config["n_layer"]), n_head=n_head, n_kv_head=kv_heads or n_head,
                        head_dim=n_embd // n_head, hidden=n_embd, mlp_hidden=int(config.get("n_inner") or 4 * n_embd),
                        vocab_size=int(config["vocab_size"]), max_positions=int(config["n_positions"]),
                        norm_eps=float(config.get("layer_norm_epsilon", 1e-5)), activation=activation)


def _gpt_bigcode(config: dict, _context: int) -> Architecture:
    """StarCoder, StarCoderBase, SantaCoder's gpt_bigcode port, tiny_starcoder: one key/value head
    (multi-query attention), or one per query head."""
    if config.get("add_cross_attention"):
        raise Unsupported("gpt_bigcode with cross-attention is not supported")
    return _gpt2(config, kv_heads=1 if config.get("multi_query", True) else None)


def _starcoder2(config: dict, context: int) -> Architecture:
    """StarCoder2: rotary positions and grouped-query attention, with LayerNorm and a GELU MLP."""
    # transformers applies StarCoder2's window whenever it is set: no use_sliding_window switch turns it off
    _check_window({k: v for k, v in config.items() if k != "use_sliding_window"}, context, active=True)
    if not isinstance(config.get("use_bias", True), bool):
        raise Unsupported(f"use_bias must be true or false, not {config.get('use_bias')!r}")
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    theta, scaling = _rope(config)
    return Architecture(family="starcoder2", n_layer=int(config["num_hidden_layers"]), n_head=heads,
                        n_kv_head=int(config.get("num_key_value_heads") or heads), head_dim=hidden // heads,
                        hidden=hidden, mlp_hidden=int(config["intermediate_size"]),
                        vocab_size=int(config["vocab_size"]),
                        max_positions=int(config.get("max_position_embeddings", context)),
                        norm_eps=float(config.get("norm_epsilon", 1e-5)),
                        activation=_gelu(config.get("hidden_act", "gelu_pytorch_tanh")), rope_theta=theta,
                        rope_scaling=scaling)


def _check_window(config: dict, context: int, active: bool) -> None:
    """Refuse a sliding window shorter than the graph's context: the graph lets every position see all before it."""
    window = config.get("sliding_window")
    if window is not None and config.get("use_sliding_window", active) and _layers_slide(config) and \
            int(window) < context:
        raise Unsupported(f"sliding-window attention ({window} tokens) is not implemented; convert with "
                          f"--context {window} or less")


def _layers_slide(config: dict) -> bool:
    """Whether any layer attends through the window, as transformers reads Qwen2's and Qwen3's config: the layers
    `layer_types` calls sliding, or where it is absent those from `max_window_layers` (28 unless named) on. Other
    families slide in every layer, whatever their config names: MistralModel and Starcoder2Model read neither."""
    if config.get("model_type") not in QWEN_WINDOW_BY_LAYER:
        return True
    kinds = config.get("layer_types")
    if isinstance(kinds, list):
        return "sliding_attention" in kinds
    first = config.get("max_window_layers", QWEN_WINDOW_LAYERS)
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return first < int(config["num_hidden_layers"])
    return True


QWEN_WINDOW_BY_LAYER = ("qwen2", "qwen3")
"""The model types whose window transformers turns on by layer (Qwen2Config's and Qwen3Config's layer_types)."""
QWEN_WINDOW_LAYERS = 28
"""Qwen2Config's and Qwen3Config's max_window_layers where a config names none."""


def _rope(config: dict) -> tuple[float, dict]:
    """rope_theta and the scaling, from transformers 4's rope_theta/rope_scaling or 5's rope_parameters."""
    params = dict(config.get("rope_parameters") or {})
    theta = float(config.get("rope_theta") or params.pop("rope_theta", None) or 10000.0)
    params.pop("rope_theta", None)
    scaling = dict(config.get("rope_scaling") or params)
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in ("default", "linear", "llama3"):
        raise Unsupported(f"rope scaling {kind!r} is not supported (supported: default, linear, llama3)")
    needs = {"linear": ("factor",),
             "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}
    missing = [key for key in needs.get(kind, ()) if isinstance(scaling.get(key), bool)
               or not isinstance(scaling.get(key), (int, float))]
    if missing:
        raise Unsupported(f"rope scaling {kind!r} needs {', '.join(missing)} as numbers")
    return theta, ({} if kind == "default" else scaling)


def _llama(config: dict, context: int) -> Architecture:
    if config.get("hidden_act", "silu") != "silu":
        raise Unsupported(f"activation {config.get('hidden_act')!r} is not supported (LLaMA-family models use silu)")
    if float(config.get("partial_rotary_factor", 1.0)) != 1.0:
        raise Unsupported("partial rotary positions are not supported")
    _check_window(config, context, active=config.get("model_type") == "mistral")
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    theta, scaling = _rope(config)
    qwen3 = config.get("model_type") == "qwen3"  # transformers' Qwen3Config: heads 128 wide where none is named
    return Architecture(family="llama", n_layer=int(config["num_hidden_layers"]), n_head=heads,
                        n_kv_head=int(config.get("num_key_value_heads") or heads),
                        head_dim=int(config.get("head_dim") or (128 if qwen3 else hidden // heads)), hidden=hidden,
                        mlp_hidden=int(config["intermediate_size"]), vocab_size=int(config["vocab_size"]),
                        max_positions=int(config.get("max_position_embeddings", context)),
                        norm_eps=float(config.get("rms_norm_eps", 1e-6)), activation="silu", rope_theta=theta,
                        rope_scaling=scaling, qk_norm=qwen3)


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a checkpoint; .bin checkpoints are refused (they are pickles)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
            if not all(isinstance(name, str) and "/" not in name for name in names):
                raise ValueError("its weight_map must name files in this folder")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise Unsupported(f"{index}: unreadable shard index ({exc})") from exc
        files = [folder / name for name in names]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise Unsupported(f"{folder}: shards named in {index.name} are missing: {', '.join(missing)}")
        return files
    files = sorted(folder.glob("*.safetensors"))
    if files:
        return files
    if any(folder.glob("*.bin")) or any(folder.glob("*.pt")) or any(folder.glob("*.pth")):
        raise Unsupported(f"{folder}: only a PyTorch .bin/.pt checkpoint, which is a pickle and is never loaded; "
                          "download the model's .safetensors files instead")
    raise Unsupported(f"{folder}: no *.safetensors weights")


def load_weights(folder: Path) -> dict[str, Lazy]:
    """The checkpoint's tensors by name, each read when the graph builder takes it (lazy.py). A name in two files
    is refused: which copy a loader keeps is an accident of order, and a stale file beside the shards would be
    silently read instead of them."""
    tensors: dict[str, Lazy] = {}
    found_in: dict[str, Path] = {}
    for path in weight_files(folder):
        for name, tensor in safetensors_reader.tensors(path).items():
            if name in found_in:
                raise Unsupported(f"{folder}: tensor {name!r} is in both {found_in[name].name} and {path.name}; "
                                  "remove the file that does not belong to the checkpoint")
            tensors[name], found_in[name] = tensor, path
    return tensors


class _Taker:
    """Takes tensors by name, checking shapes, so whatever is left over can be refused."""

    def __init__(self, tensors: dict[str, Lazy | np.ndarray]) -> None:
        self.tensors = tensors  # taken over: each tensor is let go as it is taken

    def take(self, name: str, shape: tuple[int, ...], optional: bool = False) -> Lazy | None:
        """The tensor as float32 when read, its dtype and shape checked now from its description."""
        if name not in self.tensors:
            if optional:
                return None
            raise Unsupported(f"the weights have no tensor {name!r}")
        value = lazy.of(self.tensors.pop(name))
        if not np.issubdtype(value.dtype, np.floating):
            raise Unsupported(f"tensor {name!r} is {value.dtype}, not floating point (a quantized checkpoint?)")
        if value.shape != shape:
            raise Unsupported(f"tensor {name!r} has shape {list(value.shape)}, the config implies {list(shape)}")
        if value.dtype == np.float32:
            return value
        return value.then(lambda array: array.astype(np.float32), dtype=np.float32)

    def leftover(self) -> list[str]:
        return sorted(n for n in self.tensors if not n.endswith(IGNORED_SUFFIXES))


def canonical_weights(tensors: dict[str, Lazy | np.ndarray], arch: Architecture, config: dict) -> dict[str, Lazy]:
    """The checkpoint's tensors in the graph's canonical layout (architecture.py), every one accounted for, its
    names and shapes checked now, each read and rearranged only when the graph builder takes it (lazy.py), so
    the model is never held whole in fp32. `tensors` is emptied as they are taken."""
    taker = _Taker(tensors)
    kind = config.get("model_type")
    read = {"gpt2": _gpt2_weights, "gpt_bigcode": _gpt_bigcode_weights,
            "starcoder2": partial(_starcoder2_weights, biases=bool(config.get("use_bias", True)))}
    out = read.get(kind, _llama_weights)(taker, arch)
    tied = bool(config.get("tie_word_embeddings", kind in TIED_BY_DEFAULT))
    head = taker.take("lm_head.weight", (arch.vocab_size, arch.hidden), optional=True)
    if head is not None and not (tied and lazy.equal(head, out["embed"])):
        out["lm_head"] = head.transposed()  # [C, V]
    elif head is None and not tied:
        raise Unsupported("the config says the output head is not tied, but the weights have no lm_head.weight")
    left = taker.leftover()
    if left:
        shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        raise Unsupported(f"the weights hold tensors this architecture does not use: {shown}")
    return out


def _gpt2_tables(taker: _Taker, arch: Architecture) -> dict[str, Lazy]:
    """GPT-2's and gpt_bigcode's embeddings, positions and final LayerNorm (names without `transformer.`)."""
    named = taker.tensors
    taker.tensors = {name.removeprefix("transformer."): value for name, value in named.items()}
    named.clear()  # the tensors are held by their new names alone
    c = arch.hidden
    return {"embed": taker.take("wte.weight", (arch.vocab_size, c)),
            "positions": taker.take("wpe.weight", (arch.max_positions, c)),
            "norm_f.weight": taker.take("ln_f.weight", (c,)), "norm_f.bias": taker.take("ln_f.bias", (c,))}


def _layer_norms(out: dict[str, Lazy], taker: _Taker, p: str, q: str, c: int, theirs: tuple[str, str]) -> None:
    """A layer's two LayerNorms, weights and biases, named `theirs` in the checkpoint."""
    for ours, name in zip(("norm1", "norm2"), theirs):
        out[f"{q}.{ours}.weight"] = taker.take(f"{p}.{name}.weight", (c,))
        out[f"{q}.{ours}.bias"] = taker.take(f"{p}.{name}.bias", (c,))


def _gpt2_weights(taker: _Taker, arch: Architecture) -> dict[str, Lazy]:
    c, f = arch.hidden, arch.mlp_hidden
    out = _gpt2_tables(taker, arch)
    for i in range(arch.n_layer):  # Conv1D weights are already [in, out]
        p, q = f"h.{i}", f"layers.{i}"
        for ours, theirs, shape in (("norm1", "ln_1", None), ("norm2", "ln_2", None), ("qkv", "attn.c_attn", (c, 3 * c)),
                                    ("o", "attn.c_proj", (c, c)), ("fc", "mlp.c_fc", (c, f)),
                                    ("out", "mlp.c_proj", (f, c))):
            out[f"{q}.{ours}.weight"] = taker.take(f"{p}.{theirs}.weight", shape or (c,))
            out[f"{q}.{ours}.bias"] = taker.take(f"{p}.{theirs}.bias", ((shape or (c,))[-1],))
    return out


def _gpt_bigcode_weights(taker: _Taker, arch: Architecture) -> dict[str, Lazy]:
    """gpt_bigcode's tensors: GPT-2's names, but torch Linear weights ([out, in]); with one key/value head the
    fused product's rows are [q | k | v], with one per query head they are interleaved by head [q_h k_h v_h]."""
    c, f, d, kv = arch.hidden, arch.mlp_hidden, arch.head_dim, arch.n_kv_head
    out = _gpt2_tables(taker, arch)
    qkv_rows = c + 2 * kv * d
    for i in range(arch.n_layer):
        p, q = f"h.{i}", f"layers.{i}"
        _layer_norms(out, taker, p, q, c, ("ln_1", "ln_2"))
        weight = taker.take(f"{p}.attn.c_attn.weight", (qkv_rows, c))  # [rows, C]
        bias = taker.take(f"{p}.attn.c_attn.bias", (qkv_rows,))
        if kv > 1:  # [H, 3, D] by head -> [3, H, D]: queries, then keys, then values
            weight = weight.then(lambda w: w.reshape(arch.n_head, 3, d, c).transpose(1, 0, 2, 3).reshape(qkv_rows, c))
            bias = bias.then(lambda b: b.reshape(arch.n_head, 3, d).transpose(1, 0, 2).reshape(qkv_rows))
        out[f"{q}.qkv.weight"], out[f"{q}.qkv.bias"] = weight.transposed(), bias
        for ours, theirs, shape in (("o", "attn.c_proj", (c, c)), ("fc", "mlp.c_fc", (f, c)),
                                    ("out", "mlp.c_proj", (c, f))):
            out[f"{q}.{ours}.weight"] = taker.take(f"{p}.{theirs}.weight", shape).transposed()  # [in, out]
            out[f"{q}.{ours}.bias"] = taker.take(f"{p}.{theirs}.bias", (shape[0],))
    return out


def _starcoder2_weights(taker: _Taker, arch: Architecture, biases: bool = True) -> dict[str, Lazy]:
    """StarCoder2's tensors: LLaMA's attention names, LayerNorms with biases, GPT-2's MLP names as Linear layers;
    the linear layers' biases all required with use_bias, else none taken (any left over are refused)."""
    c, f = arch.hidden, arch.mlp_hidden
    out = {"embed": taker.take("model.embed_tokens.weight", (arch.vocab_size, c)),
           "norm_f.weight": taker.take("model.norm.weight", (c,)), "norm_f.bias": taker.take("model.norm.bias", (c,))}
    for i in range(arch.n_layer):
        p, q = f"model.layers.{i}", f"layers.{i}"
        _layer_norms(out, taker, p, q, c, ("input_layernorm", "post_attention_layernorm"))
        _attention(out, taker, p, q, arch, biases)
        for ours, theirs, shape in (("fc", "mlp.c_fc", (f, c)), ("out", "mlp.c_proj", (c, f))):
            out[f"{q}.{ours}.weight"] = taker.take(f"{p}.{theirs}.weight", shape).transposed()  # [in, out]
            if biases:
                out[f"{q}.{ours}.bias"] = taker.take(f"{p}.{theirs}.bias", (shape[0],))
    return out


def _attention(out: dict[str, Lazy], taker: _Taker, p: str, q: str, arch: Architecture,
               biases: bool | None = None) -> None:
    """LLaMA-style q/k/v/o projections (torch Linear) into the fused qkv and o; their biases where the checkpoint
    has them (`biases` None), all required (True), or none taken (False)."""
    c, d = arch.hidden, arch.head_dim
    q_w, kv_w = arch.n_head * d, arch.n_kv_head * d
    parts = [taker.take(f"{p}.self_attn.{n}_proj.weight", (w, c)) for n, w in (("q", q_w), ("k", kv_w), ("v", kv_w))]
    out[f"{q}.qkv.weight"] = lazy.concatenate(parts).transposed()  # [C, (H + 2 KV) D]
    if biases is not False:
        found = [taker.take(f"{p}.self_attn.{n}_proj.bias", (w,), optional=biases is None)
                 for n, w in (("q", q_w), ("k", kv_w), ("v", kv_w))]
        if any(b is not None for b in found):
            out[f"{q}.qkv.bias"] = lazy.concatenate([b if b is not None else lazy.of(np.zeros(w, np.float32))
                                                     for b, w in zip(found, (q_w, kv_w, kv_w))])
    out[f"{q}.o.weight"] = taker.take(f"{p}.self_attn.o_proj.weight", (c, q_w)).transposed()  # [H D, C]
    if biases is not False:
        _maybe(out, f"{q}.o.bias", taker.take(f"{p}.self_attn.o_proj.bias", (c,), optional=biases is None))


def _llama_weights(taker: _Taker, arch: Architecture) -> dict[str, Lazy]:
    c, f = arch.hidden, arch.mlp_hidden
    out = {"embed": taker.take("model.embed_tokens.weight", (arch.vocab_size, c)),
           "norm_f.weight": taker.take("model.norm.weight", (c,))}
    for i in range(arch.n_layer):
        p, q = f"model.layers.{i}", f"layers.{i}"
        out[f"{q}.norm1.weight"] = taker.take(f"{p}.input_layernorm.weight", (c,))
        out[f"{q}.norm2.weight"] = taker.take(f"{p}.post_attention_layernorm.weight", (c,))
        _attention(out, taker, p, q, arch)
        if arch.qk_norm:
            for name in ("q_norm", "k_norm"):
                out[f"{q}.{name}.weight"] = taker.take(f"{p}.self_attn.{name}.weight", (arch.head_dim,))
        gate = taker.take(f"{p}.mlp.gate_proj.weight", (f, c))
        up = taker.take(f"{p}.mlp.up_proj.weight", (f, c))
        out[f"{q}.gate_up.weight"] = lazy.concatenate([gate, up]).transposed()  # [C, 2F]
        gate_b = taker.take(f"{p}.mlp.gate_proj.bias", (f,), optional=True)
        up_b = taker.take(f"{p}.mlp.up_proj.bias", (f,), optional=True)
        if gate_b is not None or up_b is not None:
            zeros = lazy.of(np.zeros(f, np.float32))
            out[f"{q}.gate_up.bias"] = lazy.concatenate([gate_b if gate_b is not None else zeros,
                                                         up_b if up_b is not None else zeros])
        out[f"{q}.down.weight"] = taker.take(f"{p}.mlp.down_proj.weight", (c, f)).transposed()  # [F, C]
        _maybe(out, f"{q}.down.bias", taker.take(f"{p}.mlp.down_proj.bias", (c,), optional=True))
    return out


def _maybe(out: dict[str, Lazy], name: str, value: Lazy | None) -> None:
    if value is not None:
        out[name] = value
