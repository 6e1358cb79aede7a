"""The first suggestion by consensus (completer/consensus.py), on lines and scores written out here."""
from __future__ import annotations

import math

import pytest

from completer.consensus import consensus_index

LOG_THIRD = math.log(1 / 3)


def test_an_outlier_that_is_likeliest_by_a_little_gives_way_to_what_the_others_share():
    lines = ["    return None",
             "    return self._cache[key]",
             "    return self._cache[key][0]",
             "    return self._cache.get(key)"]
    scores = [-1.0, -1.2, -1.3, -1.4]  # the outlier is likeliest, but the three others hold more weight together
    assert consensus_index(lines, scores) == 1


def test_a_line_the_model_is_sure_of_stays_first():
    lines = ["    return None",
             "    return self._cache[key]",
             "    return self._cache[key][0]",
             "    return self._cache.get(key)"]
    scores = [-0.1, -3.0, -3.1, -3.2]
    assert consensus_index(lines, scores) == 0


def test_equal_weights_pick_the_line_nearest_all_the_others():
    lines = ["x = compute(a, b)", "x = compute(a)", "x = compute(a, b, c)"]
    assert consensus_index(lines, [LOG_THIRD] * 3) == 0  # three characters from each of the others
    assert consensus_index(["a = 1", "a = 1 ", "a = 1  "], [LOG_THIRD] * 3) == 1  # one space from each


def test_ties_go_to_the_likelier_line():
    assert consensus_index(["aaa()", "bbb()", "ccc()"], [-1.0, -1.0, -1.0]) == 0  # all alike
    assert consensus_index(["foo()", "bar()", "baz()"], [-1.0, -1.0, -1.0]) == 1  # bar and baz tie, bar first


@pytest.mark.parametrize("count", [0, 1, 2])
def test_with_fewer_than_three_lines_the_likeliest_stays_first(count: int):
    lines = ["print(value)", "print(value, end='')"][:count]
    assert consensus_index(lines, [-2.0, -0.5][:count]) == 0  # even when the second scores higher


def test_a_score_for_each_line_is_required():
    with pytest.raises(ValueError, match="one score per line"):
        consensus_index(["a", "b", "c"], [-1.0, -2.0])


def test_scores_far_below_zero_do_not_underflow():
    lines = ["y = f(x)", "y = f(x, 1)", "y = f(x, 2)"]
    assert consensus_index(lines, [-900.0, -900.5, -901.0]) == 0
