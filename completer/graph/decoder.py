"""Build the decoder as an ONNX graph by hand, with the beam step's first half inside it.

Why by hand: the graph has a shape no exporter produces. Several searches share one call (the engine's
scheduler batches them, completer/scheduler.py): the projections, the MLPs and the output head run once over
the rows of all of them, and attention runs per search (a *slot*), each over its own document's prefix KV of its
own length, fed as that slot's own inputs, so no prefix is ever copied into a padded batch. Within a slot the
prefix is shared by all its beams; each beam carries only its short generated suffix, and attention takes one
softmax across both. The same graph runs a prefill (one slot, one row, several new tokens, no suffix) and a
beam step (one token per live beam).

Rows: the B rows are grouped by slot, `slot_rows` [N] of them in slot i (0 for an empty slot, whose prefix
inputs are empty; a graph of one slot holds every row and has no `slot_rows`). Positions: `position_ids`
[B, S], each row's own. Suffixes: `past_*` [B, KV, T, D] holds each row's generated suffix, padded at its start
to the longest in the call; `past_mask` [B, T] is 0 on a real column and -inf on padding. Keys are stored after
their rotation, so the cache never needs positions again. The graph of one slot takes and returns every KV
tensor with an axis of 1 after the KV heads ([B, KV, 1, T, D], prefix [1, KV, 1, D, P]): the axis the G query
heads of a KV head broadcast over, kept in the cache so no layer spends operators adding and removing it.

Heads: the fused q/k/v product's columns are built grouped by KV head (`_grouped_columns`), so one Reshape and
one Transpose give the queries [B, KV, G, S, D] and the keys and values [B, KV, 1, S, D], and one
RotaryEmbedding turns the queries and keys together.

After the last position's logits, each row's best candidates (`row_candidates`, beam_step.py): log-softmax,
the document's repeats, the token-healing mask, the beam's score added, the top `num_beams`. Which of them each
search keeps, and the suffix KV they carry on, is picked outside the graph (completer/runtime.py), per search.

Shapes: B rows, S new tokens, P_i prefix tokens of slot i, T suffix tokens so far, H query heads, KV key/value
heads (H = KV * G: G query heads read each key/value head), D head size, C model width, F MLP width,
V vocabulary, N slots, K candidates per row.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from .architecture import Architecture, rotary_tables
from .beam_step import CANDIDATE_OUTPUTS, candidate_input_infos, row_candidates
from . import int8, lazy
from .builder import NEG_INF, OPSET, GraphBuilder
from .lazy import Lazy


def _norm(g: GraphBuilder, arch: Architecture, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
    weight = g.const(f"{prefix}.weight", weights[f"{prefix}.weight"])
    if arch.layer_norm:
        bias = weights.get(f"{prefix}.bias")
        bias = np.zeros(arch.hidden, np.float32) if bias is None else bias
        return g.op("LayerNormalization", [x, weight, g.const(f"{prefix}.bias", bias)], f"{prefix}_out", axis=-1,
                    epsilon=arch.norm_eps)
    # RMSNorm, in the Pow/ReduceMean/Add/Sqrt/Div/Mul pattern onnxruntime fuses into SimplifiedLayerNormalization
    square = g.op("Pow", [x, g.const("two", np.array(2.0, np.float32))])
    mean = g.op("ReduceMean", [square], axes=[-1], keepdims=1)
    root = g.op("Sqrt", [g.op("Add", [mean, g.const("eps", np.array(arch.norm_eps, np.float32))])])
    return g.op("Mul", [g.op("Div", [x, root]), weight], f"{prefix}_out")


def _linear(g: GraphBuilder, x: str, weights: dict[str, np.ndarray], name: str) -> str:
    """x @ W (+ b), W in INT8 in a graph built so."""
    w = np.asarray(weights[f"{name}.weight"], np.float32)
    b = weights.get(f"{name}.bias")
    y = int8.matmul(g, x, w, name) if g.int8 else g.op("MatMul", [x, g.const(f"{name}.w", w)], f"{name}_mm")
    return g.op("Add", [y, g.const(f"{name}.b", np.asarray(b, np.float32))], f"{name}_out") if b is not None else y


def _grouped_columns(arch: Architecture) -> np.ndarray:
    """The order the fused q/k/v product's output columns are built in, as indices into the canonical [q | k | v]:
    each KV head's G query heads, then its key head (then its value head, without rotary positions), so one
    Reshape and one Transpose lay out every head by its KV head. With rotary positions the values come last, apart,
    so one RotaryEmbedding turns the queries and keys together and not the values."""
    n_kv, group, dim = arch.n_kv_head, arch.n_head // arch.n_kv_head, arch.head_dim
    q, k, v = 0, arch.n_head * dim, (arch.n_head + n_kv) * dim
    heads = []  # each entry: the first canonical column of one head
    for j in range(n_kv):
        heads += [q + (j * group + i) * dim for i in range(group)] + [k + j * dim]
        if not arch.rotary:
            heads.append(v + j * dim)
    if arch.rotary:
        heads += [v + j * dim for j in range(n_kv)]
    return (np.asarray(heads)[:, None] + np.arange(dim)).reshape(-1)


def _heads(g: GraphBuilder, arch: Architecture, h: str, weights: dict[str, np.ndarray], p: str, cos: str, sin: str
           ) -> tuple[str, str, str]:
    """The fused q/k/v product, laid out by KV head: q [B, KV, G, S, D], k and v [B, KV, 1, S, D]. The queries
    carry 1/sqrt(D), folded into their weights (or, where each head is normalized, into its norm's weights)."""
    n_kv, group, dim = arch.n_kv_head, arch.n_head // arch.n_kv_head, arch.head_dim
    i64 = g.i64
    query_scale = 1.0 if arch.qk_norm else 1.0 / np.sqrt(dim)
    w = np.asarray(weights[f"{p}.qkv.weight"], np.float32).copy()  # [C, (H + 2 KV) D]
    w[:, :arch.n_head * dim] *= query_scale
    order = _grouped_columns(arch)
    fused = {f"{p}.qkv.weight": w[:, order]}
    bias = weights.get(f"{p}.qkv.bias")
    if bias is not None:
        bias = np.asarray(bias, np.float32).copy()
        bias[:arch.n_head * dim] *= query_scale
        fused[f"{p}.qkv.bias"] = bias[order]
    qkv = _linear(g, h, fused, f"{p}.qkv")  # [B, S, (H + 2 KV) D], grouped
    by_kv = [0, 2, 3, 1, 4]  # [B, S, KV, n, D] -> [B, KV, n, S, D]
    if not arch.rotary:
        heads = g.op("Transpose", [g.op("Reshape", [qkv, i64("qkv5", [0, 0, n_kv, group + 2, dim])])], perm=by_kv)
        q, k, v = g.op("Split", [heads, i64("qkv_heads", [group, 1, 1])], f"{p}_qkv", outputs=3, axis=2)
        return q, k, v
    qk, v = g.op("Split", [qkv, i64("qk_v", [(arch.n_head + n_kv) * dim, n_kv * dim])], f"{p}_qk_v", outputs=2,
                 axis=2)  # [B, S, (H + KV) D], [B, S, KV D]
    if arch.qk_norm:
        qk = _head_norms(g, arch, qk, weights, p)
    # rotary positions, HF's rotate-half convention (not interleaved), on the queries and keys at once
    qk = g.op("RotaryEmbedding", [qk, "position_ids", cos, sin], f"{p}_qk_rot", domain="com.microsoft",
              interleaved=0, num_heads=arch.n_head + n_kv)
    heads = g.op("Transpose", [g.op("Reshape", [qk, i64("qk5", [0, 0, n_kv, group + 1, dim])])], perm=by_kv)
    q, k = g.op("Split", [heads, i64("qk_heads", [group, 1])], f"{p}_qk", outputs=2, axis=2)
    v = g.op("Transpose", [g.op("Reshape", [v, i64("v5", [0, 0, n_kv, 1, dim])])], f"{p}_v", perm=by_kv)
    return q, k, v


def _head_norms(g: GraphBuilder, arch: Architecture, qk: str, weights: dict[str, np.ndarray], p: str) -> str:
    """Qwen3's RMSNorm of each query and key head over its D values, before the rotation. The queries' 1/sqrt(D)
    goes into their norm's weights: the norm would undo it in the product before. The norm is built with weights of
    one, which onnxruntime's fusion takes into SimplifiedLayerNormalization (a norm's weights must be [D] there), and
    the heads' own weights multiply after it."""
    n_kv, group, dim = arch.n_kv_head, arch.n_head // arch.n_kv_head, arch.head_dim
    query = np.asarray(weights[f"{p}.q_norm.weight"], np.float32) / np.sqrt(dim)  # [D]
    key = np.asarray(weights[f"{p}.k_norm.weight"], np.float32)  # [D]
    rows = np.tile(np.stack([query] * group + [key]), (n_kv, 1)).astype(np.float32)  # [(G + 1) KV, D], grouped
    heads = g.op("Reshape", [qk, g.i64("qk_by_head", [0, 0, (group + 1) * n_kv, dim])])  # [B, S, H + KV, D]
    square = g.op("Pow", [heads, g.const("two", np.array(2.0, np.float32))])
    mean = g.op("ReduceMean", [square], axes=[-1], keepdims=1)  # [B, S, H + KV, 1]
    root = g.op("Sqrt", [g.op("Add", [mean, g.const("eps", np.array(arch.norm_eps, np.float32))])])
    unit = g.op("Mul", [g.op("Div", [heads, root]), g.const("ones", np.ones(dim, np.float32))])
    flat = g.const(f"{p}.qk_norm.weight", rows.reshape(-1))  # a vector stays in the graph, where the fusions' shape
    weight = g.op("Reshape", [flat, g.i64("qk_norm_rows", list(rows.shape))])  # inference reads it by value
    normed = g.op("Mul", [unit, weight], f"{p}_qk_normed")
    return g.op("Reshape", [normed, g.i64("qk_flat", [0, 0, (group + 1) * n_kv * dim])])  # [B, S, (H + KV) D]


def _mlp(g: GraphBuilder, arch: Architecture, h: str, weights: dict[str, np.ndarray], p: str) -> str:
    if not arch.gated_mlp:
        h = _linear(g, h, weights, f"{p}.fc")  # [B, S, F]
        gelu = "Gelu" if arch.activation == "gelu" else "FastGelu"  # FastGelu: the tanh approximation
        return _linear(g, g.op(gelu, [h], f"{p}_gelu", domain="com.microsoft"), weights, f"{p}.out")
    gate, up = g.op("Split", [_linear(g, h, weights, f"{p}.gate_up"), g.i64("gate_up", [arch.mlp_hidden] * 2)],
                    outputs=2, axis=2)  # each [B, S, F]
    silu = g.op("Mul", [gate, g.op("Sigmoid", [gate])], f"{p}_silu")
    return _linear(g, g.op("Mul", [silu, up], f"{p}_swiglu"), weights, f"{p}.down")  # [B, S, C]


def kv_layout(slots: int) -> dict[str, str]:
    """The KV shapes a graph of `slots` searches takes, as the manifest records them."""
    group = ", 1" if slots == 1 else ""  # the axis of 1 the G query heads broadcast over (_one_slot_attention)
    return {"prefix_key": f"[1, KV{group}, D, P]", "prefix_value": f"[1, KV{group}, P, D]",
            "past": f"[B, KV{group}, T, D]"}


DEFAULT_SLOTS = 8
"""Searches one call can hold. Each slot costs ten small operators per layer even when empty; eight hold the
live keystrokes, search-ahead and prefetch of several windows."""


def _slot_attention(g: GraphBuilder, arch: Architecture, layer: int, q: str, k_all: str, v_all: str, shapes: dict,
                    slots: int) -> str:
    """Attention of every row over its slot's prefix and its own suffix, with one softmax across both.
    q [B, KV, G, S, D]; k_all, v_all [B, KV, T+S, D]; returns [B, S, H D]."""
    n_kv, group, dim = arch.n_kv_head, arch.n_head // arch.n_kv_head, arch.head_dim
    i64, p = g.i64, f"layers.{layer}"
    # Suffix part, per row: [B, KV, G*S, D] @ [B, KV, D, T+S], masked (padding, causal).
    q_rows = g.op("Reshape", [q, i64("q_rows", [0, n_kv, -1, dim])], f"{p}_q_rows")  # [B, KV, G*S, D]
    k_t = g.op("Transpose", [k_all], f"{p}_k_t", perm=[0, 1, 3, 2])  # [B, KV, D, T+S]
    s_suffix = g.op("Add", [g.op("MatMul", [q_rows, k_t]), shapes["mask"]], f"{p}_s_suffix")  # [B, KV, G*S, T+S]
    # Prefix part, per slot: the slot's rows of every KV head against its own prefix, [KV, r G S, D] @ [1, KV, D, P].
    q_slots = g.op("Reshape", [g.op("Transpose", [q], perm=[1, 0, 2, 3, 4]), i64("q_slots", [n_kv, -1, dim])],
                   f"{p}_q_slots")  # [KV, B*G*S, D], rows in (b, g, s) order: a slot's rows are one block
    parts = g.op("Split", [q_slots, shapes["slot_sizes"]], f"{p}_q_slot", outputs=slots, axis=1)  # slots > 1
    pieces = []
    for i, part in enumerate(parts):
        # One product per (KV head, beam, query head of the group) over its S rows, [S, D] @ [D, P]: in a beam
        # step S = 1, and onnxruntime multiplies a single row without first copying the prefix into packed
        # panels, as it does for a product of several rows; those copies cost more than the product itself.
        part = g.op("Reshape", [part, shapes["slot_q"]], f"{p}_q_slot_rows_{i}")  # [KV, r G, S, D]
        key = g.op("Reshape", [f"prefix_key_{layer}_{i}", i64("kv_key", [n_kv, 1, dim, -1])])  # [KV, 1, D, P_i]
        value = g.op("Reshape", [f"prefix_value_{layer}_{i}", i64("kv_value", [n_kv, 1, -1, dim])])  # [KV, 1, P_i, D]
        scores = g.op("MatMul", [part, key], f"{p}_s_prefix_{i}")  # [KV, r G, S, P_i]
        top = g.op("ReduceMax", [scores], f"{p}_m_prefix_{i}", axes=[-1], keepdims=1)  # -inf when P_i = 0
        e = g.op("Exp", [g.op("Sub", [scores, top])], f"{p}_e_prefix_{i}")
        total = g.op("ReduceSum", [e, i64("last", [-1])], f"{p}_z_prefix_{i}", keepdims=1)
        y = g.op("MatMul", [e, value], f"{p}_y_prefix_{i}")  # [KV, r G, S, D]
        pieces.append(g.op("Concat", [y, top, total], f"{p}_prefix_{i}", axis=-1))  # [KV, r G, S, D + 2]
    joined = g.op("Concat", pieces, f"{p}_prefix", axis=1)  # [KV, B G, S, D + 2]
    joined = g.op("Transpose", [g.op("Reshape", [joined, shapes["by_row"]])], perm=[1, 0, 2, 3])  # [B, KV, G*S, D+2]
    y_prefix, m_prefix, z_prefix = g.op("Split", [joined, i64("ymz", [dim, 1, 1])], f"{p}_ymz", outputs=3, axis=-1)
    # One softmax across both: rescale each part to the larger maximum.
    m_all = g.op("Max", [m_prefix, g.op("ReduceMax", [s_suffix], axes=[-1], keepdims=1)], f"{p}_m")  # [B, KV, G*S, 1]
    e_suffix = g.op("Exp", [g.op("Sub", [s_suffix, m_all])], f"{p}_e_suffix")  # [B, KV, G*S, T+S]
    w_prefix = g.op("Exp", [g.op("Sub", [m_prefix, m_all])], f"{p}_w_prefix")  # [B, KV, G*S, 1]
    z_all = g.op("Add", [g.op("Mul", [z_prefix, w_prefix]), g.op("ReduceSum", [e_suffix, i64("last", [-1])],
                                                                   keepdims=1)], f"{p}_z")
    y = g.op("Add", [g.op("Mul", [y_prefix, w_prefix]), g.op("MatMul", [e_suffix, v_all])], f"{p}_y_sum")
    y = g.op("Div", [y, z_all], f"{p}_y")  # [B, KV, G*S, D]
    y = g.op("Reshape", [y, i64("y5", [0, n_kv, group, -1, dim])])  # [B, KV, G, S, D]
    return g.op("Reshape", [g.op("Transpose", [y], perm=[0, 3, 1, 2, 4]), i64("merge", [0, 0, n_kv * group * dim])],
                f"{p}_y_merged")  # [B, S, H D]


def _one_slot_attention(g: GraphBuilder, arch: Architecture, layer: int, q: str, k_all: str, v_all: str,
                        shapes: dict) -> str:
    """`_slot_attention` for a graph of one slot, in fewer operators: every row's scores over the prefix and over
    its suffix are laid side by side and take one Softmax, where several slots' prefixes of different lengths
    must be reduced apart and merged. Each row reads the shared prefix through MatMul's broadcasting over the
    rows and over the G query heads of each KV head (the axis of 1 in the keys and values): one product of its
    S rows per row and head. q [B, KV, G, S, D]; k_all, v_all [B, KV, 1, T+S, D]; returns [B, S, H D]."""
    i64, p = g.i64, f"layers.{layer}"
    key, value = f"prefix_key_{layer}_0", f"prefix_value_{layer}_0"  # [1, KV, 1, D, P], [1, KV, 1, P, D]
    k_t = g.op("Transpose", [k_all], f"{p}_k_t", perm=[0, 1, 2, 4, 3])  # [B, KV, 1, D, T+S]
    s_prefix = g.op("MatMul", [q, key], f"{p}_s_prefix")  # [B, KV, G, S, P]
    s_suffix = g.op("Add", [g.op("MatMul", [q, k_t]), shapes["mask"]], f"{p}_s_suffix")  # [B, KV, G, S, T+S]
    scores = g.op("Concat", [s_prefix, s_suffix], f"{p}_scores", axis=-1)  # [B, KV, G, S, P+T+S]
    weights = g.op("Softmax", [scores], f"{p}_weights", axis=-1)
    # Two Slices, not a Split: onnxruntime's symbolic shape inference, which its fusions need, takes no split
    # sizes computed in the graph.
    last, length = i64("last_axis", [-1]), shapes["prefix_length"]
    w_prefix = g.op("Slice", [weights, i64("start", [0]), length, last], f"{p}_w_prefix")  # [B, KV, G, S, P]
    w_suffix = g.op("Slice", [weights, length, i64("end", [2**62]), last], f"{p}_w_suffix")  # [.., S, T+S]
    y = g.op("Add", [g.op("MatMul", [w_prefix, value]), g.op("MatMul", [w_suffix, v_all])], f"{p}_y")  # [.., S, D]
    merged = i64("merge", [0, 0, arch.n_head * arch.head_dim])
    return g.op("Reshape", [g.op("Transpose", [y], perm=[0, 3, 1, 2, 4]), merged], f"{p}_y_merged")  # [B, S, H D]


def _shapes(g: GraphBuilder, arch: Architecture, slots: int) -> dict:
    """What every layer's attention shares, computed once: the suffix mask (the padding of `past_mask`, then
    causal over the new tokens); with one slot, the prefix's length; with several, each slot's row count in
    q_slots and the prefix results' row layout."""
    i64, group = g.i64, arch.n_head // arch.n_kv_head
    s_1d = g.op("Shape", ["input_ids"], "S", start=1, end=2)  # [1]
    b_1d = g.op("Shape", ["input_ids"], "B", start=0, end=1)  # [1]
    s_len = g.op("Squeeze", [s_1d, i64("axis0", [0])], "S_scalar")
    rows = g.op("Range", [i64("zero", 0), s_len, i64("one", 1)], "rows")  # [S]
    visible = g.op("LessOrEqual", [g.op("Unsqueeze", [rows, i64("ax0", [0])]),
                                    g.op("Unsqueeze", [rows, i64("ax1", [1])])])
    causal = g.op("Where", [visible, g.const("zero_f", np.array(0, np.float32)),
                            g.const("neg_inf", np.array(NEG_INF, np.float32))], "causal")  # [S, S]: row s sees j <= s
    bs = g.op("Concat", [b_1d, s_1d], "BS", axis=0)  # [2]
    past = g.op("Unsqueeze", ["past_mask", i64("ax1", [1])], "past_rows")  # [B, 1, T]
    past = g.op("Expand", [past, g.op("Concat", [b_1d, s_1d, g.op("Shape", ["past_mask"], start=1, end=2)],
                                      axis=0)], "past_expanded")  # [B, S, T]
    causal = g.op("Expand", [causal, g.op("Concat", [bs, s_1d], axis=0)], "causal_rows")  # [B, S, S]
    mask = g.op("Concat", [past, causal], "mask_bs", axis=2)  # [B, S, T+S]
    if slots > 1:
        columns = g.op("Shape", [mask], start=2, end=3)  # [1] = T+S
    mask = g.op("Unsqueeze", [mask, i64("ax12", [1, 2])], "mask5")  # [B, 1, 1, S, T+S]
    if slots == 1:  # _one_slot_attention's mask, broadcast over the heads; and where the prefix's scores end
        return {"mask": mask,  # [B, 1, 1, S, T+S]
                "prefix_length": g.op("Shape", ["prefix_key_0_0"], "P0", start=4, end=5)}  # [1]
    g_1d, one = i64("G", [group]), i64("one1", [1])
    mask = g.op("Expand", [mask, g.op("Concat", [b_1d, one, g_1d, s_1d, columns], axis=0)])  # [B, 1, G, S, T+S]
    mask = g.op("Reshape", [mask, g.op("Concat", [b_1d, one, i64("minus_one", [-1]), columns], axis=0)],
                "mask")  # [B, 1, G*S, T+S]
    slot_sizes = g.op("Mul", ["slot_rows", g.op("Mul", [g_1d, s_1d])], "slot_sizes")  # [N] = r_i * G * S
    by_row = g.op("Concat", [i64("kv", [arch.n_kv_head]), b_1d, i64("rest", [-1, arch.head_dim + 2])], "by_row",
                  axis=0)  # (KV, B, G*S, D + 2)
    slot_q = g.op("Concat", [i64("kv", [arch.n_kv_head]), i64("minus_one", [-1]), s_1d, i64("d", [arch.head_dim])],
                  "slot_q", axis=0)  # (KV, r G, S, D)
    return {"mask": mask, "slot_sizes": slot_sizes, "by_row": by_row, "slot_q": slot_q}


def decoder_model(arch: Architecture, weights: dict[str, np.ndarray | Lazy], context_length: int, slots: int = 1,
                  logits_only: bool = False, on_layer: Callable[[int], None] | None = None,
                  quantized: bool = False, weights_file: Path | None = None) -> onnx.ModelProto:
    """The whole decoder for `context_length` positions and `slots` searches per call (1: the graph a single
    search runs; DEFAULT_SLOTS: the batched graph beside it). `weights` are in the canonical layout
    (architecture.py), arrays or tensors read when taken (lazy.py); each is read once, so a mapping that lets go
    of what was read never holds the model whole. With logits_only it returns the last position's logits [B, V]
    instead of each row's candidates (for parity tests). `on_layer` hears of each layer built (a progress bar).
    `quantized` writes the weight MatMuls and embedding tables in INT8 as they are built (int8.py);
    `weights_file` writes the weights there as they are made, the graph naming them (GraphBuilder)."""
    n_kv, dim, vocab = arch.n_kv_head, arch.head_dim, arch.vocab_size
    g = GraphBuilder(int8=quantized, weights_file=weights_file)
    i64 = g.i64

    def lookup(table: np.ndarray | Lazy, name: str, indices: str, hint: str) -> str:
        """table[indices]; `name`, the table's, is what save.quantize knows an embedding table by."""
        if quantized:
            return int8.gather(g, table, indices, hint)
        return g.op("Gather", [g.const(name, np.asarray(table, np.float32)), indices], hint, axis=0)

    embed = lazy.of(weights["embed"])  # [V, C]; read again for a tied output head rather than held meanwhile
    x = lookup(embed, "embed", "input_ids", "tok_emb")  # [B, S, C]
    cos = sin = ""
    if not arch.rotary:
        table = np.asarray(weights["positions"], np.float32)[:context_length]
        x = g.op("Add", [x, lookup(table, "positions", "position_ids", "pos_emb")], "x0")  # [B, S, C]
    else:  # onnxruntime's fused RotaryEmbedding reads the tables at each row's positions [B, S]
        cos_table, sin_table = rotary_tables(arch, context_length)  # [N, D/2] each
        cos, sin = g.const("rope_cos", cos_table), g.const("rope_sin", sin_table)
    shapes = _shapes(g, arch, slots)

    for layer in range(arch.n_layer):
        p = f"layers.{layer}"
        h = _norm(g, arch, x, weights, f"{p}.norm1")  # [B, S, C]
        q, k, v = _heads(g, arch, h, weights, p, cos, sin)  # [B, KV, G, S, D], [B, KV, 1, S, D] twice
        if slots > 1:  # only the graph of one slot keeps the axis of 1 that lets the G query heads share a KV head
            k, v = (g.op("Squeeze", [name, i64("ax2", [2])]) for name in (k, v))  # [B, KV, S, D]
        time_axis = 3 if slots == 1 else 2
        k_all = g.op("Concat", [f"past_key_{layer}", k], outputs=[f"present_key_{layer}"], axis=time_axis)
        v_all = g.op("Concat", [f"past_value_{layer}", v], outputs=[f"present_value_{layer}"], axis=time_axis)
        if slots == 1:
            y = _one_slot_attention(g, arch, layer, q, k_all, v_all, shapes)  # [B, S, H D]
        else:
            y = _slot_attention(g, arch, layer, q, k_all, v_all, shapes, slots)
        x = g.op("Add", [x, _linear(g, y, weights, f"{p}.o")], f"{p}_x_attn")  # [B, S, C]
        h = _norm(g, arch, x, weights, f"{p}.norm2")
        x = g.op("Add", [x, _mlp(g, arch, h, weights, p)], f"{p}_x_out")  # [B, S, C]
        if on_layer is not None:
            on_layer(layer + 1)

    s_len = g.op("Squeeze", [g.op("Shape", ["input_ids"], start=1, end=2), i64("axis0", [0])])
    last = g.op("Gather", [x, g.op("Sub", [s_len, i64("one", 1)])], "last_hidden", axis=1)  # [B, C]
    last = _norm(g, arch, last, weights, "norm_f")
    head = weights.get("lm_head")
    head = embed.transposed() if head is None else lazy.of(head)  # [C, V]
    del embed
    if quantized:
        logits = int8.matmul(g, last, head, "lm_head")  # [B, V]
    else:
        logits = g.op("MatMul", [last, g.const("lm_head", np.asarray(head, np.float32))], "logits_raw")  # [B, V]

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "S"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["B", "S"]),
        helper.make_tensor_value_info("past_mask", TensorProto.FLOAT, ["B", "T"]),
    ]
    if slots > 1:  # how many of the rows each slot holds; one slot holds them all
        inputs.insert(2, helper.make_tensor_value_info("slot_rows", TensorProto.INT64, [slots]))
    outputs = []
    group_axis = [1] if slots == 1 else []  # the graph of one slot keeps the KV's axis of 1 (_one_slot_attention)
    for layer in range(arch.n_layer):
        for i in range(slots):
            inputs += [
                helper.make_tensor_value_info(f"prefix_key_{layer}_{i}", TensorProto.FLOAT,
                                              [1, n_kv, *group_axis, dim, f"P{i}"]),
                helper.make_tensor_value_info(f"prefix_value_{layer}_{i}", TensorProto.FLOAT,
                                              [1, n_kv, *group_axis, f"P{i}", dim]),
            ]
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_{kind}_{layer}", TensorProto.FLOAT,
                                                        ["B", n_kv, *group_axis, "T", dim]))
            outputs.append(helper.make_tensor_value_info(f"present_{kind}_{layer}", TensorProto.FLOAT,
                                                         ["B", n_kv, *group_axis, "T+S", dim]))
    if logits_only:
        g.op("Identity", [logits], outputs=["logits"])
        outputs.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", vocab]))
    else:
        inputs += candidate_input_infos(vocab)
        found = row_candidates(g, logits, vocab)
        for key, name, dtype in CANDIDATE_OUTPUTS:
            g.op("Identity", [found[key]], outputs=[name])
            outputs.append(helper.make_tensor_value_info(name, dtype, ["B", "K"]))

    return g.model("completer_decoder", inputs, outputs, {"": OPSET, "com.microsoft": 1})


def own_decoder(weights: dict[str, np.ndarray], config: dict, logits_only: bool = False, slots: int = 1
                ) -> onnx.ModelProto:
    """The graph of one of our own checkpoints (scripts/model.py's state dict and config)."""
    from .architecture import own_architecture, own_weights

    arch = own_architecture(config)
    return decoder_model(arch, own_weights(weights, arch), int(config["context_length"]), slots, logits_only)
