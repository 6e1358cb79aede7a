"""The document's repeats: longest earlier matches, what followed them, and the mixture rows the beam step takes."""
from __future__ import annotations

import numpy as np
import pytest

from completer.repeats import (BEFORE_WINDOW, IN_WINDOW, MAX_MATCH, OTHER_FILES, SHARE_BY_MATCH, DocumentRepeats,
                               share_for)

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


def brute_force_match(context: list[int], generated: list[int], window_start: int, others_end: int
                      ) -> tuple[int, list[int], int]:
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
    if not ends or max(ends) >= window_start:
        return longest, sorted(followers), IN_WINDOW
    return longest, sorted(followers), BEFORE_WINDOW if max(ends) >= others_end else OTHER_FILES


@pytest.mark.parametrize("seed", range(4))
def test_the_coded_search_finds_what_walking_every_place_finds(seed: int):
    """Small vocabularies make long, many and overlapping matches, with and without generated tokens."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        vocab = int(rng.integers(2, 6))
        context = rng.integers(0, vocab, int(rng.integers(0, 150))).tolist()
        generated = rng.integers(0, vocab, int(rng.integers(0, 80))).tolist()
        window_start = int(rng.integers(0, len(context) + 1))
        others_end = int(rng.integers(0, window_start + 1))
        longest, followers, where = DocumentRepeats(context, vocab, window_start, others_end).longest_match(generated)
        expected = brute_force_match(context, generated, window_start, others_end)
        assert (longest, sorted(followers.tolist()), where) == expected


@pytest.mark.parametrize("seed", range(4))
def test_beams_asked_token_by_token_get_the_answers_of_a_fresh_search(seed):
    """The beam search asks about each beam's tokens one step longer each time; the answers extended from
    the step before must be those a search from scratch gives, branch by branch."""
    rng = np.random.default_rng(100 + seed)
    for _ in range(60):
        vocab = int(rng.integers(2, 5))
        context = rng.integers(0, vocab, int(rng.integers(0, 120))).tolist()
        window_start = int(rng.integers(0, len(context) + 1))
        repeats = DocumentRepeats(context, vocab, window_start)
        beams: list[list[int]] = [[]]
        for _step in range(int(rng.integers(1, 70))):  # past MAX_MATCH at times, with a small vocabulary
            for generated in beams:
                longest, followers, where = repeats.longest_match(generated)
                assert (longest, sorted(followers.tolist()), where) == brute_force_match(
                    context, generated, window_start, 0)
            beams = [b + [int(rng.integers(0, vocab))] for b in beams for _ in range(2)][:4]
    periodic = [0, 1, 2] * 60  # every match runs past MAX_MATCH: the answers are capped, not extended
    repeats = DocumentRepeats(periodic, 3)
    generated: list[int] = []
    for step in range(90):
        longest, followers, where = repeats.longest_match(generated)
        assert (longest, sorted(followers.tolist()), where) == brute_force_match(periodic, generated, 0, 0)
        generated.append(step % 3 if step != 70 else 1)  # one token off the pattern, then back on it


def test_a_match_before_the_window_takes_the_larger_share():
    document = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3]  # "1 2 3" came once, at places 0 to 2
    seen = DocumentRepeats(document, VOCAB, window_start=0)
    unseen = DocumentRepeats(document, VOCAB, window_start=5)  # the model's window starts after it
    assert seen.longest_match()[2] == IN_WINDOW and unseen.longest_match()[2] == BEFORE_WINDOW
    assert seen.mixture([[]]).model_share[0] == pytest.approx(1 - share_for(3, IN_WINDOW))
    assert unseen.mixture([[]]).model_share[0] == pytest.approx(1 - share_for(3, BEFORE_WINDOW))
    assert share_for(3, BEFORE_WINDOW) > share_for(3, IN_WINDOW)


def test_a_match_only_in_another_file_takes_that_files_share():
    """Ids of another open file come first; a match that lies only there is told apart from the document's."""
    other = [1, 2, 3, 4, 0]
    document = [9, 8, 7, 6, 1, 2, 3]
    repeats = DocumentRepeats(other + document, VOCAB, window_start=len(other), others_end=len(other))
    longest, followers, where = repeats.longest_match()
    assert (longest, followers.tolist(), where) == (3, [4], OTHER_FILES)
    assert repeats.mixture([[]]).model_share[0] == pytest.approx(1 - share_for(3, OTHER_FILES))
    both = DocumentRepeats(other + [1, 2, 3, 5] + document, VOCAB, window_start=len(other) + 4,
                           others_end=len(other))
    assert both.longest_match()[2] == BEFORE_WINDOW  # the document's own earlier match decides where


def test_mixture_rows_hold_the_share_and_the_neutral_row_changes_nothing():
    repeats = DocumentRepeats([1, 2, 3, 4, 5, 1, 2, 3, 9, 7, 1, 2, 3], VOCAB)
    mix = repeats.mixture([[], [4], [4, 5, 30]])
    assert mix.tokens.shape == mix.probs.shape == (3, 2) and mix.model_share.shape == (3,)  # sparse: [B, M]
    assert mix.tokens[0].tolist() == [4, 9] and mix.probs[0] == pytest.approx([share_for(3) / 2] * 2)
    assert mix.tokens[1].tolist() == [5, 5] and mix.probs[1] == pytest.approx([share_for(4)] * 2)  # padded
    assert mix.model_share[1] == pytest.approx(1 - share_for(4))
    assert not mix.probs[2].any() and mix.model_share[2] == 1.0  # no match: the model alone
    probs = mix.dense(VOCAB)  # [B, V]
    assert probs[0, 4] == pytest.approx(share_for(3) / 2) and probs[0, 9] == pytest.approx(share_for(3) / 2)
    assert probs[1, 5] == pytest.approx(share_for(4)) and not probs[2].any()
    assert np.allclose(probs.sum(axis=1) + mix.model_share, 1.0)  # each row stays a distribution
    mix = DocumentRepeats([5, 6, 7], VOCAB).mixture([[], [8]])
    assert mix.tokens.shape == (1, 1) and not mix.probs.any() and mix.model_share.tolist() == [1.0]
    mix = DocumentRepeats([], VOCAB).mixture([[], [3, 4]])  # an empty document: neutral
    assert not mix.dense(VOCAB).any() and mix.model_share.tolist() == [1.0]


@pytest.mark.parametrize("where", [IN_WINDOW, BEFORE_WINDOW, OTHER_FILES])
def test_shares_grow_with_the_match(where: int):
    shares = [share_for(n, where) for n in range(0, MAX_MATCH + 2)]
    assert shares[0] == 0.0 and all(a <= b for a, b in zip(shares[1:], shares[2:]))
    assert shares[-1] == SHARE_BY_MATCH[-1][1 + where] < 1.0  # the model always keeps some weight
