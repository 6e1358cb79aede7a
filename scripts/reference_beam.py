"""The one-step beam search in plain numpy: the reference the in-graph step is tested against,
and the 'outside the graph' side of the engine benchmark."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from completer.repeats import RepeatMix  # noqa: E402


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def mix_repeats(logp: np.ndarray, repeats: RepeatMix) -> np.ndarray:
    """log(model_share * p_model + repeat_probs) where a repeat has weight, log p_model + log model_share
    elsewhere: the graph's mixture of the document's repeats (logp [B, V]; the repeats' rows, sparse, are
    spread over the vocabulary first: the reference takes the plain dense route)."""
    repeat_probs, model_share = repeats.dense(logp.shape[1]), repeats.model_share  # [1 or B, V], [1 or B]
    with np.errstate(divide="ignore"):  # log(0) = -inf where a probability underflows, as in the graph
        mixed = np.log(np.exp(logp) * model_share[:, None] + repeat_probs)
    return np.where(repeat_probs > 0, mixed, logp + np.log(model_share)[:, None]).astype(np.float32)


def beam_step(logits: np.ndarray, scores: np.ndarray, allowed: np.ndarray, k: int, repeats: RepeatMix | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """logits [B, V], scores [B], allowed [1 or B, V] bool, repeats (the document's repeats, mixed in:
    model_share * p_model + repeat_probs; completer/repeats.py) -> the best k candidates over all beams:
    tokens, parents, scores [K]."""
    logp = log_softmax(logits.astype(np.float32))
    if repeats is not None:
        logp = mix_repeats(logp, repeats)
    logp = np.where(allowed, logp, -np.inf)
    total = (logp + scores[:, None]).astype(np.float32)  # [B, V]
    row_idx = np.argsort(-total, axis=1, kind="stable")[:, :k]  # [B, K]
    row_vals = np.take_along_axis(total, row_idx, axis=1)  # [B, K]
    flat_vals, flat_idx = row_vals.reshape(-1), row_idx.reshape(-1)
    best = np.argsort(-flat_vals, kind="stable")[:k]  # [K]
    return flat_idx[best].astype(np.int64), (best // k).astype(np.int64), flat_vals[best]
