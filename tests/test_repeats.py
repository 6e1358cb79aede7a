"""The document's repeats: longest earlier matches, what followed them, and the mixture rows the beam step takes."""
from __future__ import annotations

import numpy as np
import pytest

from completer.repeats import MAX_MATCH, SHARE_BY_MATCH, DocumentRepeats, share_for

VOCAB = 32


def test_the_longest_earlier_match_and_what_followed_it():
    repeats = DocumentRepeats([1, 2, 3, 4, 5, 1, 2, 3, 9, 7, 1, 2, 3], VOCAB)
    longest, followers = repeats.longest_match()
    assert longest == 3 and sorted(followers.tolist()) == [4, 9]  # "1 2 3" came twice before, then 4 and 9


def test_generated_tokens_extend_the_match():
    repeats = DocumentRepeats([1, 2, 3, 4, 5, 1, 2, 3, 9, 7, 1, 2, 3], VOCAB)
    longest, followers = repeats.longest_match([4])
    assert longest == 4 and followers.tolist() == [5]  # only the first "1 2 3" went on with 4
    assert repeats.longest_match([4, 5, 30])[0] == 0  # 30 never occurred


def test_the_last_token_does_not_match_itself():
    longest, followers = DocumentRepeats([5, 6, 7], VOCAB).longest_match()
    assert longest == 0 and followers.size == 0
    longest, followers = DocumentRepeats([7, 7, 7], VOCAB).longest_match()
    assert longest == 2 and followers.tolist() == [7]  # the run "7 7" before the end, followed by 7


def test_matches_stop_at_max_match():
    block = list(range(1, 21)) * 10  # a block of 20 tokens repeated: every earlier copy matches far back
    longest, followers = DocumentRepeats(block, VOCAB).longest_match()
    assert longest == MAX_MATCH and set(followers.tolist()) == {1}


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


def test_shares_grow_with_the_match():
    shares = [share_for(n) for n in range(0, MAX_MATCH + 2)]
    assert shares[0] == 0.0 and all(a <= b for a, b in zip(shares[1:], shares[2:]))
    assert shares[-1] == SHARE_BY_MATCH[-1][1] < 1.0  # the model always keeps some weight
