"""Build the decoder as an ONNX graph by hand, with the one-step beam search inside it.

Why by hand: the graph has a shape no exporter produces. The document's prefix KV is shared by
all beams (batch 1) while each beam carries only its short generated suffix, and attention takes
one softmax across both; then the beam step (seed 000) picks the next tokens and reorders the
suffix KV by parent beam, all in one ONNX call. The engine runs the same graph for prefill
(batch 1, empty suffix, several new tokens) and for every beam step (batch = live beams, 1 token).

Shapes: B beams, S new tokens, P prefix tokens, T suffix tokens so far, H heads, D head dim,
C = H * D, V vocabulary, K beams wanted.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # readable by onnxruntime releases well before the one we pin
NEG_INF = np.float32(-np.inf)


@dataclass
class GraphBuilder:
    """A thin accumulator of nodes and initializers with unique names."""

    nodes: list = field(default_factory=list)
    initializers: list = field(default_factory=list)
    counter: int = 0

    def name(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}_{self.counter}"

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, outputs: int | list[str] = 1,
           domain: str | None = None, **attrs) -> str | list[str]:
        if isinstance(outputs, int):
            out_names = [self.name(hint or op_type.lower()) for _ in range(outputs)]
        else:
            out_names = outputs
        self.nodes.append(helper.make_node(op_type, inputs, out_names, name=self.name(op_type), domain=domain, **attrs))
        return out_names[0] if len(out_names) == 1 else out_names


def beam_step(g: GraphBuilder, logits: str, scores: str, finished: str, allowed: str, num_beams: str,
              repeat_tokens: str, repeat_probs: str, model_share: str, newline_id: int, vocab_size: int
              ) -> dict[str, str]:
    """One beam-search step over the last-position logits.

    logits [B, V], scores [B] (cumulative log-probs), finished [B] bool, allowed [1 or B, V] bool,
    num_beams [1] int64 (K), repeat_tokens [1 or B, M], repeat_probs [1 or B, M] and model_share [1 or B]:
    the document's repeats mixed into the model's next-token distribution, p = model_share * p_model +
    repeat_probs at repeat_tokens and model_share * p_model elsewhere (completer/repeats.py, sparse: only
    the M tokens that followed a match pay for an Exp and a Log; a zero probability and a share of one
    leave the model's log-probabilities exactly as they are).
    Finished beams are carried by the -inf trick: their row is -inf except the newline token at 0, so
    each reappears once with an unchanged score and shapes never change.
    Returns names of tokens [K], parents [K], new scores [K], new finished flags [K].
    """
    logp = g.op("LogSoftmax", [logits], "logp", axis=-1)  # [B, V]
    axis1 = g.const("axis1", np.array([1], dtype=np.int64))
    share_col = g.op("Unsqueeze", [model_share, axis1], "model_share_col")  # [1 or B, 1]
    scaled = g.op("Add", [logp, g.op("Log", [share_col])], "logp_scaled")  # [B, V]: the model's part
    by_row = g.op("Concat", [g.op("Shape", [logp], start=0, end=1), g.op("Shape", [repeat_tokens], start=1, end=2)],
                  "repeat_shape", axis=0)  # [2] = (B, M)
    columns = g.op("Expand", [repeat_tokens, by_row], "repeat_columns")  # [B, M]
    at = g.op("GatherElements", [logp, columns], "repeat_logp", axis=1)  # [B, M]
    mixed = g.op("Log", [g.op("Add", [g.op("Mul", [g.op("Exp", [at]), share_col]), repeat_probs])],
                 "repeat_mixed")  # [B, M]
    repeated = g.op("Greater", [repeat_probs, g.const("zero_p", np.array(0, dtype=np.float32))], "repeated")
    mixed = g.op("Where", [repeated, mixed, g.op("GatherElements", [scaled, columns], axis=1)],
                 "repeat_values")  # [B, M]: no Exp/Log round trip where a token has no weight
    logp = g.op("ScatterElements", [scaled, columns, mixed], "logp_with_repeats", axis=1)  # [B, V]
    neg_inf = g.const("neg_inf", np.array(NEG_INF, dtype=np.float32))
    logp = g.op("Where", [allowed, logp, neg_inf], "logp_masked")  # [B, V]
    carry_row = np.full((1, vocab_size), NEG_INF, dtype=np.float32)
    carry_row[0, newline_id] = 0.0
    carry = g.const("finished_row", carry_row)  # [1, V]
    finished_col = g.op("Unsqueeze", [finished, axis1], "finished_col")  # [B, 1]
    logp = g.op("Where", [finished_col, carry, logp], "logp_carry")  # [B, V]
    total = g.op("Add", [logp, g.op("Unsqueeze", [scores, axis1], "scores_col")], "total")  # [B, V]
    row_vals, row_idx = g.op("TopK", [total, num_beams], "row_topk", outputs=2, axis=-1)  # [B, K] each
    minus_one = g.const("minus_one", np.array([-1], dtype=np.int64))
    flat_vals = g.op("Reshape", [row_vals, minus_one], "flat_vals")  # [B*K]
    flat_idx = g.op("Reshape", [row_idx, minus_one], "flat_idx")  # [B*K]
    best_vals, best_pos = g.op("TopK", [flat_vals, num_beams], "best_topk", outputs=2, axis=-1)  # [K] each
    parents = g.op("Div", [best_pos, num_beams], "parents")  # [K] (int64 division floors)
    tokens = g.op("Gather", [flat_idx, best_pos], "tokens", axis=0)  # [K]
    newline = g.const("newline", np.array(newline_id, dtype=np.int64))
    was_finished = g.op("Gather", [finished, parents], "was_finished", axis=0)  # [K]
    now_finished = g.op("Or", [was_finished, g.op("Equal", [tokens, newline], "is_newline")], "now_finished")
    return {"tokens": tokens, "parents": parents, "scores": best_vals, "finished": now_finished}


def beam_step_model(vocab_size: int, newline_id: int) -> onnx.ModelProto:
    """The beam step alone (logits in), so tests can compare it with a numpy reference."""
    g = GraphBuilder()
    out = beam_step(g, "logits", "beam_scores", "beam_finished", "allowed_tokens", "num_beams", "repeat_tokens",
                    "repeat_probs", "model_share", newline_id, vocab_size)
    names = {"tokens": "next_tokens", "parents": "parent_beams", "scores": "next_scores", "finished": "next_finished"}
    for key, name in names.items():
        g.op("Identity", [out[key]], outputs=[name])
    inputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", vocab_size]),
        helper.make_tensor_value_info("beam_scores", TensorProto.FLOAT, ["B"]),
        helper.make_tensor_value_info("beam_finished", TensorProto.BOOL, ["B"]),
        helper.make_tensor_value_info("allowed_tokens", TensorProto.BOOL, ["Bm", vocab_size]),
        helper.make_tensor_value_info("num_beams", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("repeat_tokens", TensorProto.INT64, ["Br", "M"]),
        helper.make_tensor_value_info("repeat_probs", TensorProto.FLOAT, ["Br", "M"]),
        helper.make_tensor_value_info("model_share", TensorProto.FLOAT, ["Br"]),
    ]
    outputs = [
        helper.make_tensor_value_info("next_tokens", TensorProto.INT64, ["K"]),
        helper.make_tensor_value_info("parent_beams", TensorProto.INT64, ["K"]),
        helper.make_tensor_value_info("next_scores", TensorProto.FLOAT, ["K"]),
        helper.make_tensor_value_info("next_finished", TensorProto.BOOL, ["K"]),
    ]
    graph = helper.make_graph(g.nodes, "beam_step", inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


def _layer_norm(g: GraphBuilder, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
    return g.op("LayerNormalization", [x, g.const(f"{prefix}.weight", weights[f"{prefix}.weight"]),
                                       g.const(f"{prefix}.bias", weights[f"{prefix}.bias"])],
                f"{prefix}_out", axis=-1, epsilon=1e-5)


def decoder_model(weights: dict[str, np.ndarray], config: dict, newline_id: int,
                  beam_in_graph: bool = True) -> onnx.ModelProto:
    """The whole decoder step. With beam_in_graph=False it returns last-position logits instead of
    the beam step (used only to benchmark the in-graph step against a numpy one)."""
    n_layer, n_head, n_embd, vocab = config["n_layer"], config["n_head"], config["n_embd"], config["vocab_size"]
    head_dim = n_embd // n_head
    g = GraphBuilder()
    i64 = lambda hint, v: g.const(hint, np.array(v, dtype=np.int64))  # noqa: E731

    wte = weights["wte.weight"].astype(np.float32)  # [V, C]
    tok = g.op("Gather", [g.const("wte", wte), "input_ids"], "tok_emb", axis=0)  # [B, S, C]
    pos = g.op("Gather", [g.const("wpe", weights["wpe.weight"]), "position_ids"], "pos_emb", axis=0)  # [1, S, C]
    x = g.op("Add", [tok, pos], "x0")  # [B, S, C]

    # Shapes used to build the causal mask over the suffix part: row i may see suffix column j <= T + i.
    s_len = g.op("Gather", [g.op("Shape", ["input_ids"]), i64("one", 1)], "S", axis=0)  # scalar S
    t_len = g.op("Gather", [g.op("Shape", ["past_key_0"]), i64("two", 2)], "T", axis=0)  # scalar T
    rows = g.op("Range", [i64("zero", 0), s_len, i64("step", 1)], "rows")  # [S]
    cols = g.op("Range", [i64("zero", 0), g.op("Add", [t_len, s_len]), i64("step", 1)], "cols")  # [T+S]
    row_limit = g.op("Unsqueeze", [g.op("Add", [rows, t_len]), i64("ax", [1])], "row_limit")  # [S, 1]
    visible = g.op("LessOrEqual", [g.op("Unsqueeze", [cols, i64("ax", [0])]), row_limit], "visible")  # [S, T+S]
    causal = g.op("Where", [visible, g.const("zero_f", np.array(0, np.float32)),
                            g.const("neg_inf", np.array(NEG_INF, np.float32))], "causal")  # [S, T+S]
    b_len = g.op("Gather", [g.op("Shape", ["input_ids"]), i64("zero", 0)], "B", axis=0)  # scalar B
    bs_len = g.op("Unsqueeze", [g.op("Mul", [b_len, s_len]), i64("ax", [0])], "BS")  # [1] = B*S
    heads_first = g.op("Concat", [i64("one_h", [1, n_head]), bs_len, i64("d", [head_dim])], "heads_first", axis=0)
    heads_first_p = g.op("Concat", [i64("one_h", [1, n_head]), bs_len, i64("rest", [-1])], "heads_first_p", axis=0)
    by_beam = g.op("Concat", [i64("h", [n_head]), g.op("Unsqueeze", [b_len, i64("ax", [0])]),
                              g.op("Unsqueeze", [s_len, i64("ax", [0])]), i64("rest", [-1])], "by_beam", axis=0)
    split_heads = i64("split_heads", [0, 0, n_head, head_dim])
    merge_heads = i64("merge_heads", [0, 0, n_embd])
    scale = 1.0 / np.sqrt(head_dim)

    for layer in range(n_layer):
        p = f"blocks.{layer}"
        h = _layer_norm(g, x, weights, f"{p}.ln_1")  # [B, S, C]
        w_qkv = weights[f"{p}.attn.qkv.weight"].T.copy()  # [C, 3C]
        w_qkv[:, :n_embd] *= scale  # fold 1/sqrt(D) into the query projection
        qkv = g.op("MatMul", [h, g.const(f"{p}.w_qkv", w_qkv.astype(np.float32))], f"{p}_qkv")  # [B, S, 3C]
        q, k, v = g.op("Split", [qkv, i64("qkv_sizes", [n_embd] * 3)], f"{p}_split", outputs=3, axis=2)
        q, k, v = (g.op("Transpose", [g.op("Reshape", [t, split_heads])], perm=[0, 2, 1, 3])
                   for t in (q, k, v))  # each [B, H, S, D]
        k_all = g.op("Concat", [f"past_key_{layer}", k], outputs=[f"present_key_{layer}"], axis=2)  # [B, H, T+S, D]
        v_all = g.op("Concat", [f"past_value_{layer}", v], outputs=[f"present_value_{layer}"], axis=2)
        # Prefix attention batches all beams into one matrix product per head, so the shared
        # prefix KV is read once per step, not once per beam: [H, B*S, D] @ [H, D, P].
        q_heads = g.op("Reshape", [g.op("Transpose", [q], perm=[1, 0, 2, 3]), heads_first], f"{p}_q_heads")  # [1, H, B*S, D]
        score_prefix = g.op("Reshape", [g.op("MatMul", [q_heads, f"prefix_key_{layer}"]), by_beam],
                            f"{p}_score_prefix")  # [H, B, S, P]
        k_t = g.op("Transpose", [k_all], f"{p}_k_t", perm=[0, 1, 3, 2])  # [B, H, D, T+S]
        score_suffix = g.op("Add", [g.op("MatMul", [q, k_t]), causal], f"{p}_score_suffix")  # [B, H, S, T+S]
        score_suffix = g.op("Transpose", [score_suffix], perm=[1, 0, 2, 3])  # [H, B, S, T+S]
        weights_all = g.op("Softmax", [g.op("Concat", [score_prefix, score_suffix], axis=3)], f"{p}_attn",
                           axis=3)  # [H, B, S, P+T+S]: one softmax across prefix and suffix
        p_len = g.op("Shape", [score_prefix], start=3, end=4)  # [1] = P
        w_prefix = g.op("Slice", [weights_all, i64("zero1", [0]), p_len, i64("ax3", [3])], f"{p}_w_prefix")
        w_suffix = g.op("Slice", [weights_all, p_len, i64("big", [2**62]), i64("ax3", [3])], f"{p}_w_suffix")
        w_prefix = g.op("Reshape", [w_prefix, heads_first_p], f"{p}_w_prefix_heads")  # [1, H, B*S, P]
        y_prefix = g.op("Reshape", [g.op("MatMul", [w_prefix, f"prefix_value_{layer}"]), by_beam],
                        f"{p}_y_prefix")  # [H, B, S, D]
        y_suffix = g.op("MatMul", [g.op("Transpose", [w_suffix], perm=[1, 0, 2, 3]), v_all], f"{p}_y_suffix")
        y = g.op("Add", [g.op("Transpose", [y_prefix], perm=[1, 0, 2, 3]), y_suffix], f"{p}_y")  # [B, H, S, D]
        y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), merge_heads], f"{p}_y_merged")  # [B, S, C]
        proj = weights[f"{p}.attn.proj.weight"].T.astype(np.float32)  # [C, C]
        x = g.op("Add", [x, g.op("MatMul", [y, g.const(f"{p}.w_proj", proj)])], f"{p}_x_attn")  # [B, S, C]
        h = _layer_norm(g, x, weights, f"{p}.ln_2")
        fc = weights[f"{p}.mlp.fc.weight"].T.astype(np.float32)  # [C, 4C]
        h = g.op("Gelu", [g.op("MatMul", [h, g.const(f"{p}.w_fc", fc)])], f"{p}_gelu", domain="com.microsoft")
        out = weights[f"{p}.mlp.proj.weight"].T.astype(np.float32)  # [4C, C]
        x = g.op("Add", [x, g.op("MatMul", [h, g.const(f"{p}.w_out", out)])], f"{p}_x_out")  # [B, S, C]

    last = g.op("Gather", [x, g.op("Sub", [s_len, i64("one", 1)])], "last_hidden", axis=1)  # [B, C]
    last = _layer_norm(g, last, weights, "ln_f")
    logits = g.op("MatMul", [last, g.const("lm_head", wte.T.copy())], "logits_raw")  # [B, V], tied weights

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "S"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "S"]),
    ]
    outputs = []
    for layer in range(n_layer):
        inputs += [
            helper.make_tensor_value_info(f"prefix_key_{layer}", TensorProto.FLOAT, [1, n_head, head_dim, "P"]),
            helper.make_tensor_value_info(f"prefix_value_{layer}", TensorProto.FLOAT, [1, n_head, "P", head_dim]),
            helper.make_tensor_value_info(f"past_key_{layer}", TensorProto.FLOAT, ["B", n_head, "T", head_dim]),
            helper.make_tensor_value_info(f"past_value_{layer}", TensorProto.FLOAT, ["B", n_head, "T", head_dim]),
        ]
        outputs += [
            helper.make_tensor_value_info(f"present_key_{layer}", TensorProto.FLOAT, ["B", n_head, "T+S", head_dim]),
            helper.make_tensor_value_info(f"present_value_{layer}", TensorProto.FLOAT,
                                          ["B", n_head, "T+S", head_dim]),
        ]
    if beam_in_graph:
        inputs += [
            helper.make_tensor_value_info("beam_scores", TensorProto.FLOAT, ["B"]),
            helper.make_tensor_value_info("beam_finished", TensorProto.BOOL, ["B"]),
            helper.make_tensor_value_info("allowed_tokens", TensorProto.BOOL, ["Bm", vocab]),
            helper.make_tensor_value_info("num_beams", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("repeat_tokens", TensorProto.INT64, ["Br", "M"]),
            helper.make_tensor_value_info("repeat_probs", TensorProto.FLOAT, ["Br", "M"]),
            helper.make_tensor_value_info("model_share", TensorProto.FLOAT, ["Br"]),
        ]
        step = beam_step(g, logits, "beam_scores", "beam_finished", "allowed_tokens", "num_beams", "repeat_tokens",
                         "repeat_probs", "model_share", newline_id, vocab)
        for key, name, dtype in (("tokens", "next_tokens", TensorProto.INT64),
                                 ("parents", "parent_beams", TensorProto.INT64),
                                 ("scores", "next_scores", TensorProto.FLOAT),
                                 ("finished", "next_finished", TensorProto.BOOL)):
            g.op("Identity", [step[key]], outputs=[name])
            outputs.append(helper.make_tensor_value_info(name, dtype, ["K"]))
        for layer in range(n_layer):  # the suffix KV reordered by parent beam: only T+S rows per beam move
            for kind in ("key", "value"):
                g.op("Gather", [f"present_{kind}_{layer}", step["parents"]], outputs=[f"beam_{kind}_{layer}"], axis=0)
                outputs.append(helper.make_tensor_value_info(f"beam_{kind}_{layer}", TensorProto.FLOAT,
                                                             ["K", n_head, "T+S", head_dim]))
    else:
        g.op("Identity", [logits], outputs=["logits"])
        outputs.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", vocab]))

    graph = helper.make_graph(g.nodes, "completer_decoder", inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model
