"""The one-step beam search inside the graph: log-softmax, the document's repeats mixed in, the mask,
the top candidates across all beams, and which of them end the line."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from .builder import IR_VERSION, NEG_INF, OPSET, GraphBuilder


def line_end_mask(ends_line: np.ndarray | int, vocab_size: int) -> np.ndarray:
    """[V] bool: the tokens whose bytes hold a newline. An int is a vocabulary whose only such token is that id."""
    if isinstance(ends_line, (int, np.integer)):
        mask = np.zeros(vocab_size, dtype=bool)
        mask[int(ends_line)] = True
        return mask
    mask = np.asarray(ends_line, dtype=bool)
    if mask.shape != (vocab_size,) or not mask.any():
        raise ValueError(f"the line-end mask must be [{vocab_size}] with at least one token set")
    return mask


def beam_step(g: GraphBuilder, logits: str, scores: str, finished: str, allowed: str, num_beams: str,
              repeat_tokens: str, repeat_probs: str, model_share: str, ends_line: np.ndarray | int, vocab_size: int
              ) -> dict[str, str]:
    """One beam-search step over the last-position logits.

    logits [B, V], scores [B] (cumulative log-probs), finished [B] bool, allowed [1 or B, V] bool,
    num_beams [1] int64 (K), repeat_tokens [1 or B, M], repeat_probs [1 or B, M] and model_share [1 or B]:
    the document's repeats mixed into the model's next-token distribution, p = model_share * p_model +
    repeat_probs at repeat_tokens and model_share * p_model elsewhere (completer/repeats.py, sparse: only
    the M tokens that followed a match pay for an Exp and a Log; a zero probability and a share of one
    leave the model's log-probabilities exactly as they are).
    A beam marked finished comes back once with an unchanged score (its row is -inf except one line-end
    token at 0), so shapes never change. `ends_line` marks the tokens whose bytes hold a newline: with a
    vocabulary that merges newlines into other tokens ("):\\n"), a line can end in any of them.
    Returns names of tokens [K], parents [K], new scores [K], new finished flags [K].
    """
    mask = line_end_mask(ends_line, vocab_size)
    logp = g.op("LogSoftmax", [logits], "logp", axis=-1)  # [B, V]
    axis1 = g.i64("axis1", [1])
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
    carry_row[0, int(np.flatnonzero(mask)[0])] = 0.0
    carry = g.const("finished_row", carry_row)  # [1, V]
    finished_col = g.op("Unsqueeze", [finished, axis1], "finished_col")  # [B, 1]
    logp = g.op("Where", [finished_col, carry, logp], "logp_carry")  # [B, V]
    total = g.op("Add", [logp, g.op("Unsqueeze", [scores, axis1], "scores_col")], "total")  # [B, V]
    row_vals, row_idx = g.op("TopK", [total, num_beams], "row_topk", outputs=2, axis=-1)  # [B, K] each
    minus_one = g.i64("minus_one", [-1])
    flat_vals = g.op("Reshape", [row_vals, minus_one], "flat_vals")  # [B*K]
    flat_idx = g.op("Reshape", [row_idx, minus_one], "flat_idx")  # [B*K]
    best_vals, best_pos = g.op("TopK", [flat_vals, num_beams], "best_topk", outputs=2, axis=-1)  # [K] each
    parents = g.op("Div", [best_pos, num_beams], "parents")  # [K] (int64 division floors)
    tokens = g.op("Gather", [flat_idx, best_pos], "tokens", axis=0)  # [K]
    was_finished = g.op("Gather", [finished, parents], "was_finished", axis=0)  # [K]
    ends = g.op("Gather", [g.const("ends_line", mask), tokens], "ends_line_now", axis=0)  # [K]
    now_finished = g.op("Or", [was_finished, ends], "now_finished")
    return {"tokens": tokens, "parents": parents, "scores": best_vals, "finished": now_finished}


BEAM_INPUTS = ("beam_scores", "beam_finished", "allowed_tokens", "num_beams", "repeat_tokens", "repeat_probs",
               "model_share")
BEAM_OUTPUTS = (("tokens", "next_tokens", TensorProto.INT64), ("parents", "parent_beams", TensorProto.INT64),
                ("scores", "next_scores", TensorProto.FLOAT), ("finished", "next_finished", TensorProto.BOOL))


def beam_input_infos(vocab_size: int) -> list:
    return [
        helper.make_tensor_value_info("beam_scores", TensorProto.FLOAT, ["B"]),
        helper.make_tensor_value_info("beam_finished", TensorProto.BOOL, ["B"]),
        helper.make_tensor_value_info("allowed_tokens", TensorProto.BOOL, ["Bm", vocab_size]),
        helper.make_tensor_value_info("num_beams", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("repeat_tokens", TensorProto.INT64, ["Br", "M"]),
        helper.make_tensor_value_info("repeat_probs", TensorProto.FLOAT, ["Br", "M"]),
        helper.make_tensor_value_info("model_share", TensorProto.FLOAT, ["Br"]),
    ]


def beam_step_model(vocab_size: int, ends_line: np.ndarray | int) -> onnx.ModelProto:
    """The beam step alone (logits in), so tests can compare it with a numpy reference."""
    g = GraphBuilder()
    out = beam_step(g, "logits", *BEAM_INPUTS, ends_line, vocab_size)
    outputs = []
    for key, name, dtype in BEAM_OUTPUTS:
        g.op("Identity", [out[key]], outputs=[name])
        outputs.append(helper.make_tensor_value_info(name, dtype, ["K"]))
    inputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", vocab_size]),
              *beam_input_infos(vocab_size)]
    graph = helper.make_graph(g.nodes, "beam_step", inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model
