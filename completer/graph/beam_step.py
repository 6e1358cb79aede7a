"""Each row's best next tokens, inside the graph: log-softmax, the document's repeats mixed in, the
token-healing mask, the beam's score added, the top K. The search picks among its rows' candidates outside
the graph (completer/runtime.py), since one call holds the rows of several searches."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from .builder import OPSET, GraphBuilder


def row_candidates(g: GraphBuilder, logits: str, vocab_size: int, scores: str = "beam_scores",
                   allowed: str = "allowed_tokens", num_beams: str = "num_beams", repeat_tokens: str = "repeat_tokens",
                   repeat_probs: str = "repeat_probs", model_share: str = "model_share") -> dict[str, str]:
    """The top `num_beams` continuations of each row.

    logits [B, V], scores [B] (cumulative log-probs; -inf for a padding row), allowed [1 or B, V] bool,
    num_beams [1] int64 (K), repeat_tokens [1 or B, M], repeat_probs [1 or B, M] and model_share [1 or B]:
    the document's repeats mixed into the model's next-token distribution, p = model_share * p_model +
    repeat_probs at repeat_tokens and model_share * p_model elsewhere (completer/repeats.py, sparse: only
    the M tokens that followed a match pay for an Exp and a Log; a zero probability and a share of one
    leave the model's log-probabilities exactly as they are).
    Returns the names of scores [B, K] (the row's score plus each token's log-probability) and tokens [B, K].
    """
    axis1 = g.i64("axis1", [1])
    logp = g.op("LogSoftmax", [logits], "logp", axis=-1)  # [B, V]
    scores_col = g.op("Unsqueeze", [scores, axis1], "scores_col")  # [B, 1]
    share_col = g.op("Unsqueeze", [model_share, axis1], "model_share_col")  # [1 or B, 1]
    offset = g.op("Add", [g.op("Log", [share_col]), scores_col], "offset")  # [B, 1]
    total = g.op("Add", [logp, offset], "total_model")  # [B, V]: score + log(share * p_model), one pass
    # The repeats' tokens: the mixed probability instead, where a repeat gives one.
    by_row = g.op("Concat", [g.op("Shape", [logits], start=0, end=1), g.op("Shape", [repeat_tokens], start=1, end=2)],
                  "repeat_shape", axis=0)  # [2] = (B, M)
    columns = g.op("Expand", [repeat_tokens, by_row], "repeat_columns")  # [B, M]
    at = g.op("GatherElements", [logp, columns], "repeat_logp", axis=1)  # [B, M]
    mixed = g.op("Log", [g.op("Add", [g.op("Mul", [g.op("Exp", [at]), share_col]), repeat_probs])],
                 "repeat_mixed")  # [B, M]
    repeated = g.op("Greater", [repeat_probs, g.const("zero_p", np.array(0, dtype=np.float32))], "repeated")
    # [B, M]: no Exp/Log round trip where a token has no weight
    mixed = g.op("Where", [repeated, g.op("Add", [mixed, scores_col]),
                           g.op("GatherElements", [total, columns], axis=1)], "repeat_values")
    total = g.op("ScatterElements", [total, columns, mixed], "total_mixed", axis=1)  # [B, V]
    bias = g.op("Log", [g.op("Cast", [allowed], to=TensorProto.FLOAT)], "mask_bias")  # [1 or B, V]: 0 or -inf
    total = g.op("Add", [total, bias], "total")  # [B, V]: the token-healing mask, an additive row
    values, tokens = g.op("TopK", [total, num_beams], "row_topk", outputs=2, axis=-1)  # [B, K] each
    return {"scores": values, "tokens": tokens}


CANDIDATE_INPUTS = ("beam_scores", "allowed_tokens", "num_beams", "repeat_tokens", "repeat_probs", "model_share")
CANDIDATE_OUTPUTS = (("scores", "row_scores", TensorProto.FLOAT), ("tokens", "row_tokens", TensorProto.INT64))


def candidate_input_infos(vocab_size: int) -> list:
    return [
        helper.make_tensor_value_info("beam_scores", TensorProto.FLOAT, ["B"]),
        helper.make_tensor_value_info("allowed_tokens", TensorProto.BOOL, ["Bm", vocab_size]),
        helper.make_tensor_value_info("num_beams", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("repeat_tokens", TensorProto.INT64, ["Br", "M"]),
        helper.make_tensor_value_info("repeat_probs", TensorProto.FLOAT, ["Br", "M"]),
        helper.make_tensor_value_info("model_share", TensorProto.FLOAT, ["Br"]),
    ]


def row_candidates_model(vocab_size: int) -> onnx.ModelProto:
    """The candidates alone (logits in), so tests can compare them with a numpy reference."""
    g = GraphBuilder()
    out = row_candidates(g, "logits", vocab_size)
    outputs = []
    for key, name, dtype in CANDIDATE_OUTPUTS:
        g.op("Identity", [out[key]], outputs=[name])
        outputs.append(helper.make_tensor_value_info(name, dtype, ["B", "K"]))
    inputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", vocab_size]),
              *candidate_input_infos(vocab_size)]
    return g.model("row_candidates", inputs, outputs, {"": OPSET})
