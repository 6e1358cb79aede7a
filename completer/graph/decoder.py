"""Build the decoder as an ONNX graph by hand, with the one-step beam search inside it.

Why by hand: the graph has a shape no exporter produces. The document's prefix KV is shared by all
beams (batch 1) while each beam carries only its short generated suffix, and attention takes one
softmax across both; then the beam step picks the next tokens and reorders the suffix KV by parent
beam, all in one ONNX call. The engine runs the same graph for prefill (batch 1, empty suffix,
several new tokens) and for every beam step (batch = live beams, one token).

Positions: `position_ids` [1, S] are the places of the S new tokens, the same for every beam: a beam's
suffix tokens sit at P, P+1, ... after the P prefix tokens. Keys are stored after their rotation, so
the cache never needs the positions again.

Shapes: B beams, S new tokens, P prefix tokens, T suffix tokens so far, H query heads, KV key/value
heads (H = KV * G: G query heads read each key/value head), D head size, C model width, F MLP width,
V vocabulary, K beams wanted.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from .architecture import Architecture, rotary_tables
from .beam_step import BEAM_OUTPUTS, beam_input_infos, beam_step
from .builder import IR_VERSION, NEG_INF, OPSET, GraphBuilder


def _norm(g: GraphBuilder, arch: Architecture, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
    weight = g.const(f"{prefix}.weight", weights[f"{prefix}.weight"])
    if arch.family == "gpt2":
        bias = weights.get(f"{prefix}.bias")
        bias = np.zeros(arch.hidden, np.float32) if bias is None else bias
        return g.op("LayerNormalization", [x, weight, g.const(f"{prefix}.bias", bias)], f"{prefix}_out", axis=-1,
                    epsilon=arch.norm_eps)
    # RMSNorm, in the Pow/ReduceMean/Add/Sqrt/Div/Mul pattern onnxruntime fuses into SimplifiedLayerNormalization
    square = g.op("Pow", [x, g.const("two", np.array(2.0, np.float32))])
    mean = g.op("ReduceMean", [square], axes=[-1], keepdims=1)
    root = g.op("Sqrt", [g.op("Add", [mean, g.const("eps", np.array(arch.norm_eps, np.float32))])])
    return g.op("Mul", [g.op("Div", [x, root]), weight], f"{prefix}_out")


def _linear(g: GraphBuilder, x: str, weights: dict[str, np.ndarray], name: str, scale_cols: tuple[int, float] = (0, 1.0)
            ) -> str:
    """x @ W (+ b). `scale_cols` = (n, s) multiplies the first n output columns by s (folds 1/sqrt(D) into q)."""
    w = np.asarray(weights[f"{name}.weight"], np.float32)
    b = weights.get(f"{name}.bias")
    n, s = scale_cols
    if n and s != 1.0:
        w = w.copy()
        w[:, :n] *= s
        if b is not None:
            b = np.asarray(b, np.float32).copy()
            b[:n] *= s
    y = g.op("MatMul", [x, g.const(f"{name}.w", w)], f"{name}_mm")
    return g.op("Add", [y, g.const(f"{name}.b", np.asarray(b, np.float32))], f"{name}_out") if b is not None else y


def _mlp(g: GraphBuilder, arch: Architecture, h: str, weights: dict[str, np.ndarray], p: str) -> str:
    if arch.family == "gpt2":
        h = _linear(g, h, weights, f"{p}.fc")  # [B, S, F]
        gelu = "Gelu" if arch.activation == "gelu" else "FastGelu"  # FastGelu: the tanh approximation
        return _linear(g, g.op(gelu, [h], f"{p}_gelu", domain="com.microsoft"), weights, f"{p}.out")
    gate, up = g.op("Split", [_linear(g, h, weights, f"{p}.gate_up"), g.i64("gate_up", [arch.mlp_hidden] * 2)],
                    outputs=2, axis=2)  # each [B, S, F]
    silu = g.op("Mul", [gate, g.op("Sigmoid", [gate])], f"{p}_silu")
    return _linear(g, g.op("Mul", [silu, up], f"{p}_swiglu"), weights, f"{p}.down")  # [B, S, C]


def decoder_model(arch: Architecture, weights: dict[str, np.ndarray], ends_line: np.ndarray | int,
                  context_length: int, beam_in_graph: bool = True,
                  on_layer: Callable[[int], None] | None = None) -> onnx.ModelProto:
    """The whole decoder step for `context_length` positions. `weights` are in the canonical layout
    (architecture.py). With beam_in_graph=False it returns last-position logits instead of the beam step
    (for parity tests and to benchmark the in-graph step against a numpy one). `on_layer` hears of each
    layer built (a progress bar)."""
    n_head, n_kv, dim, vocab = arch.n_head, arch.n_kv_head, arch.head_dim, arch.vocab_size
    group = n_head // n_kv
    g = GraphBuilder()
    i64 = g.i64

    embed = np.asarray(weights["embed"], np.float32)  # [V, C]
    x = g.op("Gather", [g.const("embed", embed), "input_ids"], "tok_emb", axis=0)  # [B, S, C]
    cos = sin = batch_positions = ""
    if arch.family == "gpt2":
        table = np.asarray(weights["positions"], np.float32)[:context_length]
        x = g.op("Add", [x, g.op("Gather", [g.const("positions", table), "position_ids"], "pos_emb", axis=0)],
                 "x0")  # [B, S, C]
    else:  # onnxruntime's fused RotaryEmbedding reads the tables at each row's position: [B, S] positions
        cos_table, sin_table = rotary_tables(arch, context_length)  # [N, D/2] each
        cos, sin = g.const("rope_cos", cos_table), g.const("rope_sin", sin_table)
        batch_positions = g.op("Expand", ["position_ids", g.op("Shape", ["input_ids"])], "batch_positions")  # [B, S]

    # Shapes used to build the causal mask over the suffix part: row i may see suffix column j <= T + i.
    s_len = g.op("Gather", [g.op("Shape", ["input_ids"]), i64("one", 1)], "S", axis=0)  # scalar S
    t_len = g.op("Gather", [g.op("Shape", ["past_key_0"]), i64("two", 2)], "T", axis=0)  # scalar T
    b_len = g.op("Gather", [g.op("Shape", ["input_ids"]), i64("zero", 0)], "B", axis=0)  # scalar B
    rows = g.op("Range", [i64("zero", 0), s_len, i64("step", 1)], "rows")  # [S]
    cols = g.op("Range", [i64("zero", 0), g.op("Add", [t_len, s_len]), i64("step", 1)], "cols")  # [T+S]
    row_limit = g.op("Unsqueeze", [g.op("Add", [rows, t_len]), i64("ax", [1])], "row_limit")  # [S, 1]
    visible = g.op("LessOrEqual", [g.op("Unsqueeze", [cols, i64("ax", [0])]), row_limit], "visible")  # [S, T+S]
    causal = g.op("Where", [visible, g.const("zero_f", np.array(0, np.float32)),
                            g.const("neg_inf", np.array(NEG_INF, np.float32))], "causal")  # [S, T+S]
    as_1d = lambda t: g.op("Unsqueeze", [t, i64("ax", [0])])  # noqa: E731
    s_1d, b_1d = as_1d(s_len), as_1d(b_len)
    gs = g.op("Mul", [s_1d, i64("g", [group])], "GS")  # [1] = G*S
    gbs = g.op("Mul", [gs, b_1d], "GBS")  # [1] = G*B*S
    kv_prefix_rows = g.op("Concat", [i64("one_kv", [1, n_kv]), gbs, i64("rest", [-1])], "kv_prefix_rows", axis=0)
    kv_suffix_rows = g.op("Concat", [i64("b_kv", [0, n_kv]), gs, i64("rest", [-1])], "kv_suffix_rows", axis=0)
    by_beam = g.op("Concat", [i64("h", [n_head]), b_1d, s_1d, i64("rest", [-1])], "by_beam", axis=0)  # H, B, S, -1
    per_head = g.op("Concat", [i64("b_h", [0, n_head]), s_1d, i64("rest", [-1])], "per_head", axis=0)  # B, H, S, -1
    split_q = i64("split_q", [0, 0, n_head, dim])
    split_kv = i64("split_kv", [0, 0, n_kv, dim])
    merge_heads = i64("merge_heads", [0, 0, n_head * dim])
    q_width, kv_width = n_head * dim, n_kv * dim

    for layer in range(arch.n_layer):
        p = f"layers.{layer}"
        h = _norm(g, arch, x, weights, f"{p}.norm1")  # [B, S, C]
        qkv = _linear(g, h, weights, f"{p}.qkv", scale_cols=(q_width, 1.0 / np.sqrt(dim)))  # [B, S, (H+2KV)D]
        q, k, v = g.op("Split", [qkv, i64("qkv_sizes", [q_width, kv_width, kv_width])], f"{p}_split", outputs=3,
                       axis=2)  # [B, S, H D], [B, S, KV D], [B, S, KV D]
        if arch.family == "llama":  # rotary positions, HF's rotate-half convention (not interleaved)
            q = g.op("RotaryEmbedding", [q, batch_positions, cos, sin], f"{p}_q_rot", domain="com.microsoft",
                     interleaved=0, num_heads=n_head)
            k = g.op("RotaryEmbedding", [k, batch_positions, cos, sin], f"{p}_k_rot", domain="com.microsoft",
                     interleaved=0, num_heads=n_kv)
        q = g.op("Transpose", [g.op("Reshape", [q, split_q])], perm=[0, 2, 1, 3])  # [B, H, S, D]
        k = g.op("Transpose", [g.op("Reshape", [k, split_kv])], perm=[0, 2, 1, 3])  # [B, KV, S, D]
        v = g.op("Transpose", [g.op("Reshape", [v, split_kv])], perm=[0, 2, 1, 3])  # [B, KV, S, D]
        k_all = g.op("Concat", [f"past_key_{layer}", k], outputs=[f"present_key_{layer}"], axis=2)  # [B, KV, T+S, D]
        v_all = g.op("Concat", [f"past_value_{layer}", v], outputs=[f"present_value_{layer}"], axis=2)
        # Prefix attention batches all beams into one matrix product per key/value head, so the shared
        # prefix KV is read once per step, not once per beam: [KV, G*B*S, D] @ [KV, D, P].
        q_rows = g.op("Reshape", [g.op("Transpose", [q], perm=[1, 0, 2, 3]), kv_prefix_rows],
                      f"{p}_q_rows")  # [1, KV, G*B*S, D]
        score_prefix = g.op("Reshape", [g.op("MatMul", [q_rows, f"prefix_key_{layer}"]), by_beam],
                            f"{p}_score_prefix")  # [H, B, S, P]
        k_t = g.op("Transpose", [k_all], f"{p}_k_t", perm=[0, 1, 3, 2])  # [B, KV, D, T+S]
        q_groups = g.op("Reshape", [q, kv_suffix_rows], f"{p}_q_groups")  # [B, KV, G*S, D]
        score_suffix = g.op("Reshape", [g.op("MatMul", [q_groups, k_t]), per_head])  # [B, H, S, T+S]
        score_suffix = g.op("Add", [score_suffix, causal], f"{p}_score_suffix")
        score_suffix = g.op("Transpose", [score_suffix], perm=[1, 0, 2, 3])  # [H, B, S, T+S]
        weights_all = g.op("Softmax", [g.op("Concat", [score_prefix, score_suffix], axis=3)], f"{p}_attn",
                           axis=3)  # [H, B, S, P+T+S]: one softmax across prefix and suffix
        p_len = g.op("Shape", [score_prefix], start=3, end=4)  # [1] = P
        w_prefix = g.op("Slice", [weights_all, i64("zero1", [0]), p_len, i64("ax3", [3])], f"{p}_w_prefix")
        w_suffix = g.op("Slice", [weights_all, p_len, i64("big", [2**62]), i64("ax3", [3])], f"{p}_w_suffix")
        w_prefix = g.op("Reshape", [w_prefix, kv_prefix_rows], f"{p}_w_prefix_rows")  # [1, KV, G*B*S, P]
        y_prefix = g.op("Reshape", [g.op("MatMul", [w_prefix, f"prefix_value_{layer}"]), by_beam],
                        f"{p}_y_prefix")  # [H, B, S, D]
        w_suffix = g.op("Reshape", [g.op("Transpose", [w_suffix], perm=[1, 0, 2, 3]), kv_suffix_rows],
                        f"{p}_w_suffix_groups")  # [B, KV, G*S, T+S]
        y_suffix = g.op("Reshape", [g.op("MatMul", [w_suffix, v_all]), per_head], f"{p}_y_suffix")  # [B, H, S, D]
        y = g.op("Add", [g.op("Transpose", [y_prefix], perm=[1, 0, 2, 3]), y_suffix], f"{p}_y")  # [B, H, S, D]
        y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), merge_heads], f"{p}_y_merged")  # [B, S, HD]
        x = g.op("Add", [x, _linear(g, y, weights, f"{p}.o")], f"{p}_x_attn")  # [B, S, C]
        h = _norm(g, arch, x, weights, f"{p}.norm2")
        x = g.op("Add", [x, _mlp(g, arch, h, weights, p)], f"{p}_x_out")  # [B, S, C]
        if on_layer is not None:
            on_layer(layer + 1)

    last = g.op("Gather", [x, g.op("Sub", [s_len, i64("one", 1)])], "last_hidden", axis=1)  # [B, C]
    last = _norm(g, arch, last, weights, "norm_f")
    head = weights.get("lm_head")
    head = embed.T.copy() if head is None else np.asarray(head, np.float32)  # [C, V]
    logits = g.op("MatMul", [last, g.const("lm_head", head)], "logits_raw")  # [B, V]

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "S"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "S"]),
    ]
    outputs = []
    for layer in range(arch.n_layer):
        inputs += [
            helper.make_tensor_value_info(f"prefix_key_{layer}", TensorProto.FLOAT, [1, n_kv, dim, "P"]),
            helper.make_tensor_value_info(f"prefix_value_{layer}", TensorProto.FLOAT, [1, n_kv, "P", dim]),
            helper.make_tensor_value_info(f"past_key_{layer}", TensorProto.FLOAT, ["B", n_kv, "T", dim]),
            helper.make_tensor_value_info(f"past_value_{layer}", TensorProto.FLOAT, ["B", n_kv, "T", dim]),
        ]
        outputs += [
            helper.make_tensor_value_info(f"present_key_{layer}", TensorProto.FLOAT, ["B", n_kv, "T+S", dim]),
            helper.make_tensor_value_info(f"present_value_{layer}", TensorProto.FLOAT, ["B", n_kv, "T+S", dim]),
        ]
    if beam_in_graph:
        inputs += beam_input_infos(vocab)
        step = beam_step(g, logits, "beam_scores", "beam_finished", "allowed_tokens", "num_beams", "repeat_tokens",
                         "repeat_probs", "model_share", ends_line, vocab)
        for key, name, dtype in BEAM_OUTPUTS:
            g.op("Identity", [step[key]], outputs=[name])
            outputs.append(helper.make_tensor_value_info(name, dtype, ["K"]))
        for layer in range(arch.n_layer):  # the suffix KV reordered by parent beam: only T+S rows per beam move
            for kind in ("key", "value"):
                g.op("Gather", [f"present_{kind}_{layer}", step["parents"]], outputs=[f"beam_{kind}_{layer}"], axis=0)
                outputs.append(helper.make_tensor_value_info(f"beam_{kind}_{layer}", TensorProto.FLOAT,
                                                             ["K", n_kv, "T+S", dim]))
    else:
        g.op("Identity", [logits], outputs=["logits"])
        outputs.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", vocab]))

    graph = helper.make_graph(g.nodes, "completer_decoder", inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = IR_VERSION
    return model


def own_decoder(weights: dict[str, np.ndarray], config: dict, ends_line: np.ndarray | int,
                beam_in_graph: bool = True) -> onnx.ModelProto:
    """The graph of one of our own checkpoints (scripts/model.py's state dict and config)."""
    from .architecture import own_architecture, own_weights

    arch = own_architecture(config)
    return decoder_model(arch, own_weights(weights, arch), ends_line, int(config["context_length"]), beam_in_graph)
