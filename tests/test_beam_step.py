"""Each row's candidates from the graph, picked per search as the runtime picks them, equal the numpy reference
beam step on the same logits and beam state."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from completer.graph import row_candidates_model
from completer.repeats import NO_REPEATS, RepeatMix
from completer.runtime import pick_candidates
from reference_beam import beam_step
from reference_beam import log_softmax as reference_log_softmax

VOCAB = 64


@pytest.fixture(scope="module")
def session() -> ort.InferenceSession:
    return ort.InferenceSession(row_candidates_model(VOCAB).SerializeToString(), providers=["CPUExecutionProvider"])


def run(session, logits, scores, allowed, k, repeats=NO_REPEATS):
    """The graph's per-row candidates, then the runtime's pick among them: tokens, parents, scores."""
    feed = {"logits": logits, "beam_scores": scores, "allowed_tokens": allowed,
            "num_beams": np.array([k], dtype=np.int64), "repeat_tokens": repeats.tokens,
            "repeat_probs": repeats.probs, "model_share": repeats.model_share}
    row_scores, row_tokens = session.run(["row_scores", "row_tokens"], feed)
    assert row_scores.shape == row_tokens.shape == (logits.shape[0], k)
    return pick_candidates(row_scores, row_tokens, k)


def assert_same(graph, reference):
    g_tok, g_par, g_score = graph
    r_tok, r_par, r_score = reference
    np.testing.assert_allclose(g_score, r_score, rtol=1e-5, atol=1e-5)
    finite = np.isfinite(r_score)  # among -inf candidates any order is right
    np.testing.assert_array_equal(g_tok[finite], r_tok[finite])
    np.testing.assert_array_equal(g_par[finite], r_par[finite])


@pytest.mark.parametrize("seed", range(5))
def test_first_step_from_one_beam(session, seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(1, VOCAB)).astype(np.float32) * 3
    args = (logits, np.zeros(1, np.float32), np.ones((1, VOCAB), bool), 4)
    out = run(session, *args)
    assert_same(out, beam_step(*args))
    assert np.all(out[1] == 0) and len(set(out[0].tolist())) == 4


@pytest.mark.parametrize("seed", range(5))
def test_later_steps_pick_across_all_beams(session, seed):
    rng = np.random.default_rng(100 + seed)
    logits = rng.normal(size=(4, VOCAB)).astype(np.float32) * 3
    scores = np.array([-0.5, -1.0, -2.5, -0.1], np.float32)
    args = (logits, scores, np.ones((1, VOCAB), bool), 8)
    out = run(session, *args)
    assert_same(out, beam_step(*args))
    assert len(set(out[1].tolist())) > 1  # candidates come from several beams


@pytest.mark.parametrize("seed", range(5))
def test_first_token_mask_per_beam(session, seed):
    rng = np.random.default_rng(200 + seed)
    logits = rng.normal(size=(3, VOCAB)).astype(np.float32) * 3
    scores = rng.normal(size=3).astype(np.float32)
    allowed = rng.random((3, VOCAB)) < 0.2
    args = (logits, scores, allowed, 4)
    out = run(session, *args)
    assert_same(out, beam_step(*args))
    for parent, token, score in zip(out[1], out[0], out[2]):
        assert not np.isfinite(score) or allowed[parent, token]


def test_mask_leaving_fewer_candidates_than_beams(session):
    logits = np.zeros((1, VOCAB), np.float32)
    allowed = np.zeros((1, VOCAB), bool)
    allowed[0, [7, 9]] = True
    args = (logits, np.zeros(1, np.float32), allowed, 4)
    out = run(session, *args)
    assert_same(out, beam_step(*args))
    assert sorted(out[0][np.isfinite(out[2])].tolist()) == [7, 9]
    assert np.isneginf(out[2][2:]).all()


def random_repeats(rng, batch: int) -> RepeatMix:
    """What completer/repeats.py hands the step: some beams with a few repeated tokens (padded, as it pads
    a shorter row, by repeating the row's first entry), one with none."""
    tokens = np.zeros((batch, 3), np.int64)
    probs = np.zeros((batch, 3), np.float32)
    share = np.ones(batch, np.float32)
    for row in range(batch - 1):
        followed, counts = np.unique(rng.integers(0, VOCAB, size=3), return_counts=True)
        share[row] = 1 - rng.uniform(0.02, 0.7)
        tokens[row] = np.pad(followed, (0, 3 - len(followed)), mode="edge")
        probs[row] = np.pad(counts * (1 - share[row]) / 3, (0, 3 - len(counts)), mode="edge")
    return RepeatMix(tokens, probs, share)


@pytest.mark.parametrize("seed", range(5))
def test_document_repeats_mix_into_the_step(session, seed):
    rng = np.random.default_rng(300 + seed)
    logits = rng.normal(size=(3, VOCAB)).astype(np.float32) * 3
    scores = -rng.random(3).astype(np.float32)
    args = (logits, scores, rng.random((3, VOCAB)) < 0.8, 4)
    repeats = random_repeats(rng, 3)
    out = run(session, *args, repeats=repeats)
    assert_same(out, beam_step(*args, repeats=repeats))
    plain = run(session, *args)
    assert not np.allclose(out[2], plain[2])  # the mixture changed the scores


def test_a_long_repeat_outranks_the_models_favourite(session):
    """p = share * p_model + repeat: a token the model finds unlikely wins when the document repeats it."""
    logits = np.zeros((1, VOCAB), np.float32)
    logits[0, 3] = 6.0  # the model's favourite by far
    args = (logits, np.zeros(1, np.float32), np.ones((1, VOCAB), bool), 2)
    out = run(session, *args, repeats=RepeatMix(np.array([[9]]), np.array([[0.7]], np.float32),
                                                np.array([0.3], np.float32)))
    assert out[0].tolist() == [9, 3]
    expected = np.log(0.3 * np.exp(reference_log_softmax(logits)[0, 9]) + 0.7)
    assert out[2][0] == pytest.approx(expected, abs=1e-5)


def test_a_masked_token_stays_out_even_when_the_document_repeats_it(session):
    logits = np.zeros((1, VOCAB), np.float32)
    allowed = np.ones((1, VOCAB), bool)
    allowed[0, 9] = False
    out = run(session, logits, np.zeros(1, np.float32), allowed, 3,
              repeats=RepeatMix(np.array([[9]]), np.array([[0.9]], np.float32), np.array([0.1], np.float32)))
    assert 9 not in out[0].tolist() and np.isfinite(out[2]).all()


def test_neutral_repeats_leave_the_scores_exactly(session):
    rng = np.random.default_rng(400)
    logits = rng.normal(size=(2, VOCAB)).astype(np.float32) * 3
    args = (logits, -rng.random(2).astype(np.float32), np.ones((1, VOCAB), bool), 4)
    neutral = run(session, *args, repeats=RepeatMix(np.array([[4, 4], [7, 9]]), np.zeros((2, 2), np.float32),
                                                    np.ones(2, np.float32)))  # tokens named, with no weight
    reference = beam_step(*args)
    np.testing.assert_array_equal(neutral[0], reference[0])
    np.testing.assert_array_equal(neutral[2], run(session, *args)[2])  # bit for bit: no exp/log round trip


@pytest.mark.parametrize("seed", range(5))
def test_the_benchmarks_numpy_step_does_the_references_work(seed):
    """bench_engine's numpy side (argpartition) must compute the same step as the reference, or the
    in-graph vs numpy comparison would not be like for like."""
    from bench_engine import fast_numpy_beam_step

    rng = np.random.default_rng(seed)
    k = 4
    logits = rng.normal(size=(k, VOCAB)).astype(np.float32) * 3
    scores = -rng.random(k).astype(np.float32) * 5
    allowed = rng.random((k, VOCAB)) > 0.3
    assert_same(fast_numpy_beam_step(logits, scores, allowed, k), beam_step(logits, scores, allowed, k))
    repeats = random_repeats(rng, k)
    assert_same(fast_numpy_beam_step(logits, scores, allowed, k, repeats),
                beam_step(logits, scores, allowed, k, repeats))
