"""The line that finishes the word at the cursor as a known name comes first (completer/known_names.py)."""
from __future__ import annotations

from completer.known_names import known_word_first, used_in
from lsp_support import counting

KNOWN = {"compute_total", "payload"}


def is_known(name: str) -> bool:
    return name in KNOWN


def test_a_known_name_goes_before_an_invented_one_each_group_in_its_order():
    lines = ["x = compute_tot(items)", "x = compute_totals(items)", "x = compute_total(items)",
             "x = compute_total(items, 2)"]
    assert known_word_first(lines, "x = compute_to", is_known) == [
        "x = compute_total(items)", "x = compute_total(items, 2)", "x = compute_tot(items)",
        "x = compute_totals(items)"]


def test_python_names_are_known_without_being_written_anywhere():
    assert known_word_first(["except ValuationError:", "except ValueError:"], "except Valu", is_known) == [
        "except ValueError:", "except ValuationError:"]
    assert known_word_first(["retured = 1", "return x"], "retur", is_known) == ["return x", "retured = 1"]


def test_nothing_moves_unless_the_cursor_ends_a_word_the_first_line_invents_and_another_knows():
    lines = ["x = compute_tot(items)", "x = compute_total(items)"]
    assert known_word_first(lines, "x = ", is_known) == lines  # no word at the cursor
    assert known_word_first(lines, "x = compute_to(", is_known) == lines
    assert known_word_first(lines[::-1], "x = compute_to", is_known) == lines[::-1]  # the first is known
    assert known_word_first(["y = fooz", "y = foox"], "y = foo", is_known) == ["y = fooz", "y = foox"]  # none
    assert known_word_first(lines[:1], "x = compute_to", is_known) == lines[:1]


def test_the_whole_word_at_the_cursor_is_judged_not_what_follows_it():
    lines = ["p = payloads.get()", "p = payload.gett()"]
    assert known_word_first(lines, "p = pay", is_known) == ["p = payload.gett()", "p = payloads.get()"]


def test_used_in_finds_whole_words_only():
    text = "total_sum = 1\nsubtotal = 2\n"
    assert not used_in(text, "total")
    assert used_in(text, "total_sum") and used_in(text, "subtotal") and used_in("total", "total")
    assert used_in("a.total(", "total")


def test_a_name_held_inside_many_longer_words_is_looked_for_in_one_search():
    """Each place a name stood inside a longer word cost a step of Python: in a megabyte of `zabczabc...` a third
    of a second per name of the answer, on the server's loop, at every keystroke. The whole text is now searched in
    one go, with the same verdicts: a letter of any script, a digit or an underscore next to it makes another word."""
    counted = counting(str, "find")
    text = counted("zabc" * 250_000 + " zabc_1 abcé éabc 1abc")
    assert not used_in(text, "abc") and counted.calls < 10
    assert used_in(text + " (abc)", "abc") and used_in("abc", "abc") and used_in("é abc", "abc")


def test_the_index_knows_a_name_from_a_file_other_than_the_document():
    from completer.workspace import WorkspaceIndex

    index = WorkspaceIndex(1 << 20)
    index.add("a.py", "def tokenize_payload(data):\n    return data\n")
    index.add("b.py", "import os\n")
    assert index.uses("tokenize_payload", "b.py")
    assert not index.uses("tokenize_payload", "a.py"), "the document's own copy on disk does not count"
    assert not index.uses("tokenize_pay", "b.py")
    index.add("c.py", "tokenize_payload(x)\n")
    assert index.uses("tokenize_payload", "a.py")


def test_python_protocol_names_are_known():
    lines = ["    def __init__(self, name):", "    def __repr__(self):"]
    assert known_word_first(lines, "    def __", is_known) == lines
