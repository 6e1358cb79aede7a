"""Lines further up the file that begin with the typed text: the nearest one, never a line start's guess."""
from __future__ import annotations

from completer.earlier_lines import earlier_line

HEAD = "x = load(path)\ny = save(path)\n    x = load(other)  \n\nx\n"


def test_the_nearest_line_that_begins_with_the_typed_text():
    assert earlier_line(HEAD, "    x = ") == "    x = load(other)"  # trailing whitespace dropped
    assert earlier_line(HEAD, "x = ") == "x = load(path)"  # the indented line does not begin with it
    assert earlier_line(HEAD + "x = load(again)\n", "x = ") == "x = load(again)"  # nearer wins


def test_a_line_must_go_on_past_the_typed_text():
    assert earlier_line(HEAD, "y = save(path)") is None  # typed in full already
    assert earlier_line(HEAD + "z = 1   \n", "z = 1") is None  # only whitespace after it
    assert earlier_line(HEAD, "x") == "x = load(path)"  # the bare `x` line is passed over


def test_nothing_at_a_line_start_or_in_an_empty_file():
    assert earlier_line(HEAD, "") is None and earlier_line(HEAD, "    ") is None  # no code typed yet
    assert earlier_line("", "x = ") is None
    assert earlier_line("x = 1", "x") == "x = 1"  # a head without a final newline still counts its last line
