"""The document's repeats: longest earlier matches, what followed them, and the mixture rows the beam step takes."""
from __future__ import annotations

import numpy as np
import pytest

from completer.repeats import MAX_MATCH, SHARE_BY_MATCH, DocumentRepeats, share_for

VOCAB = 32


def test_the_longest_earlier_match_and_what_followed_it():
    repeats = DocumentRepeats([1, 2, 3, 4, 5, 1, 2, 3, 9, 7, 1, 2, 3], VOCAB)
    longest, followers, _ = repeats.longest_match()
    assert longest == 3 and sorted(followers.tolist()) == [4, 9]  # "1 2 3" came twice before, then 4 and 9


def test_generated_tokens_extend_the_match():
    repeats = DocumentRepeats([1, 2, 3, 4, 5, 1, 2, 3, 9, 7, 1, 2, 3], VOCAB)
    longest, followers, _ = repeats.longest_match([4])
    assert longest == 4 and followers.tolist() == [5]  # only the first "1 2 3" went on with 4
    assert repeats.longest_match([4, 5, 30])[0] == 0  # 30 never occurred


def test_the_last_token_does_not_match_itself():
    longest, followers, _ = DocumentRepeats([5, 6, 7], VOCAB).longest_match()
    assert longest == 0 and followers.size == 0
    longest, followers, _ = DocumentRepeats([7, 7, 7], VOCAB).longest_match()
    assert longest == 2 and followers.tolist() == [7]  # the run "7 7" before the end, followed by 7


def test_matches_stop_at_max_match():
    block = list(range(1, 21)) * 10  # a block of 20 tokens repeated: every earlier copy matches far back
    longest, followers, _ = DocumentRepeats(block, VOCAB).longest_match()
    assert longest == MAX_MATCH and set(followers.tolist()) == {1}


def brute_force_match(context: list[int], generated: list[int], window_start: int) -> tuple[int, list[int], bool]:
    """Every earlier place, walked back one token at a time: what DocumentRepeats must agree with."""
    tail = (context + generated)[-MAX_MATCH:]
    longest, followers, ends = 0, [], []
    for end in range(len(context) - 1):
        length = 0
        while length < len(tail) and end - length >= 0 and context[end - length] == tail[-1 - length]:
            length += 1
        if length and length >= longest:
            if length > longest:
                longest, followers, ends = length, [], []
            followers.append(context[end + 1])
            ends.append(end)
    return longest, sorted(followers), bool(ends) and max(ends) >= window_start


@pytest.mark.parametrize("seed", range(4))
def test_the_coded_search_finds_what_walking_every_place_finds(seed: int):
    """Small vocabularies make long, many and overlapping matches, with and without generated tokens."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        vocab = int(rng.integers(2, 6))
        context = rng.integers(0, vocab, int(rng.integers(0, 150))).tolist()
        generated = rng.integers(0, vocab, int(rng.integers(0, 80))).tolist()
        window_start = int(rng.integers(0, len(context) + 1))
        longest, followers, in_window = DocumentRepeats(context, vocab, window_start).longest_match(generated)
        assert (longest, sorted(followers.tolist()), in_window) == brute_force_match(context, generated, window_start)


def test_a_match_before_the_window_takes_the_larger_share():
    document = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3]  # "1 2 3" came once, at places 0 to 2
    seen = DocumentRepeats(document, VOCAB, window_start=0)
    unseen = DocumentRepeats(document, VOCAB, window_start=5)  # the model's window starts after it
    assert seen.longest_match()[2] and not unseen.longest_match()[2]
    assert seen.mixture([[]])[1][0] == pytest.approx(1 - share_for(3, in_window=True))
    assert unseen.mixture([[]])[1][0] == pytest.approx(1 - share_for(3, in_window=False))
    assert share_for(3, in_window=False) > share_for(3, in_window=True)


def test_mixture_rows_hold_the_share_and_the_neutral_row_changes_nothing():
    repeats = DocumentRepeats([1, 2, 3, 4, 5, 1, 2, 3, 9, 7, 1, 2, 3], VOCAB)
    probs, model_share = repeats.mixture([[], [4], [4, 5, 30]])
    assert probs.shape == (3, VOCAB) and model_share.shape == (3,)
    assert probs[0, 4] == pytest.approx(share_for(3) / 2) and probs[0, 9] == pytest.approx(share_for(3) / 2)
    assert probs[1, 5] == pytest.approx(share_for(4)) and model_share[1] == pytest.approx(1 - share_for(4))
    assert not probs[2].any() and model_share[2] == 1.0  # no match: the model alone
    assert np.allclose(probs.sum(axis=1) + model_share, 1.0)  # each row stays a distribution
    probs, model_share = DocumentRepeats([5, 6, 7], VOCAB).mixture([[], [8]])
    assert probs.shape == (1, VOCAB) and not probs.any() and model_share.tolist() == [1.0]
    probs, model_share = DocumentRepeats([], VOCAB).mixture([[], [3, 4]])  # an empty document: neutral
    assert not probs.any() and model_share.tolist() == [1.0]


@pytest.mark.parametrize("in_window", [True, False])
def test_shares_grow_with_the_match(in_window: bool):
    shares = [share_for(n, in_window) for n in range(0, MAX_MATCH + 2)]
    assert shares[0] == 0.0 and all(a <= b for a, b in zip(shares[1:], shares[2:]))
    assert shares[-1] == SHARE_BY_MATCH[-1][1 if in_window else 2] < 1.0  # the model always keeps some weight
