"""Which of the model's lines to show first: the one the beams agree on most, not the likeliest one.

The beam search returns a handful of whole lines with their log-probabilities. Shown first is the
line with the highest expected edit similarity to the line the user will write, taking the model's
own probabilities of the lines it found as the distribution of that line (minimum Bayes risk).
When the likeliest line is an outlier and the others share most of their text, the shared text is
the safer bet: what the user keeps of a suggestion is what edit similarity measures. A line the
model is sure of stays first, because its own weight dominates its expected similarity.
"""
from __future__ import annotations

import math
from typing import Sequence

from rapidfuzz.distance import Levenshtein

TEMPERATURE = 1.0
"""Scores divided by this before the softmax. 1.0 takes the model's probabilities as they are, and
beat 1.25 to 2.5 on a split the card does not use (docs/experiments/2026-11-23-model-history.md,
"The first line: by consensus")."""


def consensus_index(lines: Sequence[str], scores: Sequence[float], temperature: float = TEMPERATURE) -> int:
    """The index of the line with the highest expected similarity to the others, each weighted by the
    softmax of its score (its log-probability); ties go to the earlier line. 0 for fewer than three
    lines: with two, each one's expectation is its own weight plus the same shared similarity, so the
    likelier one always wins."""
    if len(lines) != len(scores):
        raise ValueError("one score per line")
    if len(lines) < 3:
        return 0
    top = max(scores)
    weights = [math.exp((score - top) / temperature) for score in scores]
    total = sum(weights)
    best, best_value = 0, -1.0
    for i, line in enumerate(lines):
        value = sum(weight * (1.0 if i == j else Levenshtein.normalized_similarity(line, other))
                    for j, (other, weight) in enumerate(zip(lines, weights))) / total
        if value > best_value + 1e-12:
            best, best_value = i, value
    return best
