"""The small description of a decoder that the graph builder reads, and the weight names it expects.

Three families cover the models users have: "gpt2" (learned positions, LayerNorm with bias, GELU MLP; GPT-2,
our own models, and StarCoder's gpt_bigcode with one key/value head), "llama" (rotary positions, RMSNorm, SwiGLU
MLP, grouped-query attention; Mistral and Qwen2 are this family with or without q/k/v biases, Qwen3 with each
query and key head RMS-normalized before its rotation) and "starcoder2"
(rotary positions and grouped-query attention, with GPT-2's LayerNorm and GELU MLP, biases everywhere). Weights
come in one canonical layout, matrices as [in, out]:

    embed [V, C]                        positions [N, C] (gpt2 only)
    layers.{i}.norm1.weight / .bias     layers.{i}.qkv.weight [C, (H + 2 KV) D] / .bias
    layers.{i}.q_norm.weight [D] and layers.{i}.k_norm.weight [D]                          (qk_norm)
    layers.{i}.o.weight [H D, C] / .bias
    layers.{i}.norm2.weight / .bias
    layers.{i}.fc.weight [C, F] / .bias and layers.{i}.out.weight [F, C] / .bias          (gpt2, starcoder2)
    layers.{i}.gate_up.weight [C, 2F] (gate, then up) and layers.{i}.down.weight [F, C]   (llama)
    norm_f.weight / .bias               lm_head [C, V] (absent: tied to embed)

A bias that is absent is zero.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

FAMILIES = ("gpt2", "llama", "starcoder2")
ACTIVATIONS = ("gelu", "gelu_tanh", "silu")
ROPE_SCALING_NUMBERS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


@dataclass(frozen=True)
class Architecture:
    family: str
    n_layer: int
    n_head: int
    n_kv_head: int
    head_dim: int
    hidden: int  # C
    mlp_hidden: int  # F
    vocab_size: int
    max_positions: int
    norm_eps: float = 1e-5
    activation: str = "gelu"
    rope_theta: float = 10000.0
    rope_scaling: dict = field(default_factory=dict)  # {} or {"rope_type": "linear" | "llama3", ...}
    qk_norm: bool = False  # each query and key head RMS-normalized before its rotation (Qwen3)

    def __post_init__(self) -> None:
        if self.family not in FAMILIES or self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown family {self.family!r} or activation {self.activation!r}")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"{self.n_head} attention heads cannot share {self.n_kv_head} key/value heads")
        if self.head_dim % 2 and self.rotary:
            raise ValueError(f"rotary positions need an even head size, not {self.head_dim}")
        if self.qk_norm and not self.rotary:
            raise ValueError("normalized query and key heads are built only with rotary positions")
        self._check_numbers()

    def _check_numbers(self) -> None:
        """Refuse the epsilon, rope_theta and rope scaling numbers that make every output NaN or infinite: a
        model that converts and never suggests anything is worse than a refusal."""
        if not (math.isfinite(self.norm_eps) and self.norm_eps >= 0):
            raise ValueError(f"the norms' epsilon must be a finite number, not negative: {self.norm_eps}")
        if not (math.isfinite(self.rope_theta) and self.rope_theta > 0):
            raise ValueError(f"rope_theta must be a finite number above 0, not {self.rope_theta}")
        for key in ROPE_SCALING_NUMBERS:
            value = self.rope_scaling.get(key)
            if isinstance(value, (int, float)) and not (math.isfinite(value) and value > 0):
                raise ValueError(f"rope scaling's {key} must be a finite number above 0, not {value}")

    @property
    def rotary(self) -> bool:
        """Rotary positions on the queries and keys, else a table of learned positions added to the embeddings."""
        return self.family != "gpt2"

    @property
    def layer_norm(self) -> bool:
        """LayerNorm with a bias, else RMSNorm."""
        return self.family != "llama"

    @property
    def gated_mlp(self) -> bool:
        """SwiGLU's gated MLP (gate, up, down), else GPT-2's two layers around a GELU."""
        return self.family == "llama"

    def manifest(self) -> dict:
        """What the bundle's manifest records: the runtime reads n_layer, n_kv_head and head_dim for the KV
        shapes; n_embd and n_head keep their old names so older readers still work."""
        record = asdict(self)
        record.update(n_embd=self.hidden)
        return record


def own_architecture(config: dict) -> Architecture:
    """Our own GPT (scripts/model.py): gpt2 family, no biases, exact GELU, tied head."""
    n_embd, n_head = int(config["n_embd"]), int(config["n_head"])
    return Architecture(family="gpt2", n_layer=int(config["n_layer"]), n_head=n_head, n_kv_head=n_head,
                        head_dim=n_embd // n_head, hidden=n_embd, mlp_hidden=int(config.get("mlp_width") or 4 * n_embd),
                        vocab_size=int(config["vocab_size"]), max_positions=int(config["context_length"]),
                        norm_eps=1e-5, activation="gelu")


def own_weights(weights: dict[str, np.ndarray], arch: Architecture) -> dict[str, np.ndarray]:
    """scripts/model.py's state dict (torch Linear layout [out, in]) in the canonical layout."""
    f32 = lambda a: np.asarray(a, dtype=np.float32)  # noqa: E731
    out = {"embed": f32(weights["wte.weight"]), "positions": f32(weights["wpe.weight"]),
           "norm_f.weight": f32(weights["ln_f.weight"]), "norm_f.bias": f32(weights["ln_f.bias"])}
    for i in range(arch.n_layer):
        p, q = f"blocks.{i}", f"layers.{i}"
        for ours, theirs in (("norm1", "ln_1"), ("norm2", "ln_2")):
            out[f"{q}.{ours}.weight"] = f32(weights[f"{p}.{theirs}.weight"])
            out[f"{q}.{ours}.bias"] = f32(weights[f"{p}.{theirs}.bias"])
        for ours, theirs in (("qkv", "attn.qkv"), ("o", "attn.proj"), ("fc", "mlp.fc"), ("out", "mlp.proj")):
            out[f"{q}.{ours}.weight"] = f32(weights[f"{p}.{theirs}.weight"]).T.copy()
    return out


def rotary_tables(arch: Architecture, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [positions, D/2] of the rotary angles, with the checkpoint's rope scaling."""
    dim = arch.head_dim
    inv_freq = 1.0 / (arch.rope_theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))  # [D/2]
    scaling = dict(arch.rope_scaling)
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    place = np.arange(positions, dtype=np.float64)
    if kind == "linear":
        place = place / float(scaling["factor"])
    elif kind == "llama3":
        inv_freq = _llama3_frequencies(inv_freq, scaling)
    elif kind != "default":
        raise ValueError(f"rope scaling {kind!r} is not implemented")
    angles = np.outer(place, inv_freq)  # [N, D/2]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _llama3_frequencies(inv_freq: np.ndarray, scaling: dict) -> np.ndarray:
    """Llama 3.1's frequency-dependent scaling: long wavelengths slowed by `factor`, short ones kept,
    a smooth blend between."""
    factor, low, high = float(scaling["factor"]), float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    original = float(scaling["original_max_position_embeddings"])
    wavelength = 2 * math.pi / inv_freq
    scaled = np.where(wavelength > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelength - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    middle = (wavelength >= original / high) & (wavelength <= original / low)
    return np.where(middle, blended, scaled)
