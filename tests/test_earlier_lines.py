"""Lines further up the file, or in the workspace's snippets, that begin with the typed text: the nearest one;
at a line start only the line that followed a copy of the line above."""
from __future__ import annotations

from completer.answer import LineOffer, offer_earlier_line
from completer.earlier_lines import anchor_above, earlier_line, following_line
from completer.filters import line_context
from completer.types import SOURCE_EARLIER_LINE, SOURCE_WORKSPACE_LINE
from lsp_support import counting

HEAD = "x = load(path)\ny = save(path)\n    x = load(other)  \n\nx\n"


def test_the_nearest_line_that_begins_with_the_typed_text():
    assert earlier_line(HEAD, "    x = ") == "    x = load(other)"  # trailing whitespace dropped
    assert earlier_line(HEAD, "x = ") == "x = load(path)"  # the indented line does not begin with it
    assert earlier_line(HEAD + "x = load(again)\n", "x = ") == "x = load(again)"  # nearer wins


def test_a_line_must_go_on_past_the_typed_text():
    assert earlier_line(HEAD, "y = save(path)") is None  # typed in full already
    assert earlier_line(HEAD + "z = 1   \n", "z = 1") is None  # only whitespace after it
    assert earlier_line(HEAD, "x") == "x = load(path)"  # the bare `x` line is passed over


def test_nothing_at_a_line_start_without_a_copy_of_the_line_above_or_in_an_empty_file():
    assert earlier_line(HEAD, "") is None and earlier_line(HEAD, "    ") is None  # no code typed yet
    assert earlier_line("", "x = ") is None
    assert earlier_line("x = 1", "x") == "x = 1"  # a head without a final newline still counts its last line


SNIPPETS = ["def other():\n    total = add(a, b)\n    return total\n",
            "@register(kind='x')\ndef handler(event):\n    total = add(event.a, event.b)\n    log(total)\n"]


def test_a_line_of_the_workspace_snippets_when_the_file_has_none():
    head = "def main(event):\n"
    assert earlier_line(head, "    total = add(", SNIPPETS) == "    total = add(a, b)"  # the best snippet's
    assert earlier_line(head + "    total = add(mine)\n", "    total = add(", SNIPPETS) == "    total = add(mine)"
    assert earlier_line(head, "    nowhere(", SNIPPETS) is None


def test_among_snippet_lines_the_one_after_a_copy_of_the_line_above_comes_first():
    head = "class Handlers:\n    def handler(event):\n"
    assert earlier_line(head, "    total = add(", SNIPPETS) == "    total = add(event.a, event.b)"


def test_at_a_line_start_the_line_that_followed_a_copy_of_the_line_above():
    head = "import os\n@register(kind='x')\n"
    assert earlier_line(head, "", SNIPPETS) == "def handler(event):"
    assert earlier_line(head, "    ", SNIPPETS) is None  # that line is not at this indentation
    assert earlier_line("x = 1\n", "", SNIPPETS) is None  # too short a line above to say what follows
    repeated = "    self.check(values)\n    self.save()\n    other = 2\n    self.check(values)\n"
    assert earlier_line(repeated, "    ") == "    self.save()"  # within the file too


def test_a_blank_line_above_is_the_line_above():
    """An editor that trims a blank line's indentation leaves it empty: it is still the line above, as one
    holding only spaces is, so nothing has followed a copy of it."""
    repeated = "    self.check(values)\n    self.save()\n    other = 2\n    self.check(values)\n"
    assert earlier_line(repeated + "    \n", "    ") is None
    assert earlier_line(repeated + "\n", "    ") is None
    snippets = ["def a():\n    first = 1\n    total = add(a)\n\n    total = add(b)\n"]
    assert earlier_line("def b():\n    first = 1\n\n", "    total = add(", snippets) == "    total = add(b)"


def test_snippets_read_from_disk_are_searched_as_the_documents_text_is():
    """A workspace file may end its lines with CRLF or a lone CR, or indent with tabs; the document's text
    reaches the engine with LF line ends and spaces, so the snippets are searched that way, and a line offered
    from them never holds a line break."""
    crlf = ["import os\r\n@register(kind='x')\r\ndef handler(event):\r\n    pass\r\n"]
    assert earlier_line("import os\n@register(kind='x')\n", "", crlf) == "def handler(event):"
    assert earlier_line("import os\n", "x = ", ["x = 1\rdef handler(event):\r    pass\r"]) == "x = 1"
    tabs = ["def other():\n\ttotal = add(a,\tb)\n"]
    assert earlier_line("def main():\n", "    total = add(", tabs) == "    total = add(a,    b)"


def test_a_line_of_the_snippets_is_offered_as_one_of_another_file():
    """The item's detail says where a line without a score came from: a line of another file is not one
    further up this file."""
    offered = []
    for head in ("def main(event):\n", "def main(event):\n    total = add(mine)\n    log(total)\n"):
        suggestions = []
        offer = LineOffer(None, b"", "    total = add(", "", line_context(head[:-1].split("\n")))
        offer_earlier_line(suggestions, head, offer, 3, SNIPPETS)
        offered += [(s.line, s.source) for s in suggestions]
    assert offered == [("    total = add(a, b)", SOURCE_WORKSPACE_LINE), ("    total = add(mine)", SOURCE_EARLIER_LINE)]


FOLLOWED_HEAD = ("def a():\n    conn = open_database(url)\n    conn.migrate(schema)\n\n"
                 "def b():\n    conn = open_database(url)\n")
COPY = "    conn = open_database(url)"


def test_the_one_line_that_follows_a_copy_of_the_line_above_wherever_it_stands():
    assert following_line(FOLLOWED_HEAD, "    ") == ("    conn.migrate(schema)", False)  # the file's own
    assert following_line(FOLLOWED_HEAD, "    conn.m") == ("    conn.migrate(schema)", False)
    assert following_line(FOLLOWED_HEAD, "    conn.x") is None  # it must begin with the typed text
    # the repository's followers: the same line agrees, another one that fits makes it no longer the one
    assert following_line(FOLLOWED_HEAD, "    ", [(COPY, "    conn.migrate(schema)")]) \
        == ("    conn.migrate(schema)", False)
    assert following_line(FOLLOWED_HEAD, "    ", [(COPY, "    conn.close()")]) is None
    assert following_line(FOLLOWED_HEAD, "    conn.m", [(COPY, "    conn.close()")]) \
        == ("    conn.migrate(schema)", False)
    head = "def b():\n    conn = open_database(url)\n"
    assert following_line(head, "    ", [(COPY, "    conn.close()")]) == ("    conn.close()", True)
    assert following_line(head, "    ", [(COPY, "    conn.close()"), (COPY, "    conn.open()")]) is None


def test_a_following_line_keeps_its_depth_relative_to_the_line_above():
    head = "def b():\n    conn = open_database(url)\n"
    deeper = ("        conn = open_database(url)", "        conn.migrate(schema)")  # inside a method there
    assert following_line(head, "    ", [deeper]) == ("    conn.migrate(schema)", True)
    opened = [("conn = open_database(url)", "    conn.close()")]  # a line indented deeper there
    assert following_line(head, "        ", opened) == ("        conn.close()", True)  # ... is deeper here too
    assert following_line(head, "    ", opened) is None  # though never deeper than the typed indentation
    assert following_line(head, "    ", [("        conn = open_database(url)", "conn.close()")]) is None  # left of 0
    own = "class A:\n    def a(self):\n        conn = open_database(url)\n        conn.migrate(schema)\n\n" + head
    assert following_line(own, "    ") == ("    conn.migrate(schema)", False)


def test_no_following_line_where_it_is_the_line_below_or_the_filters_refuse_it():
    head = "def b():\n    conn = open_database(url)\n"
    followers = [(COPY, "    conn.migrate(schema)")]
    assert following_line(head, "    ", followers, next_line="    conn.migrate(schema)") is None  # a line opened
    assert following_line(head, "    ", followers, next_line="    other()") == ("    conn.migrate(schema)", True)
    assert following_line(head, "    ", [(COPY, "    ")]) is None  # nothing to insert
    assert following_line(head, "    ", [(COPY, "    conn = open_database(url)")]) is None  # repeats the line above


def test_a_short_line_above_is_read_with_the_lines_before_it():
    closing = "    session.close(\n        force)\n"
    head = f"def a():\n{closing}    log_closed(session)\n\ndef b():\n{closing}"
    assert anchor_above(head, "    ") == ("session.close(", "force)")  # `force)` alone says too little
    assert following_line(head, "    ") == ("    log_closed(session)", False)
    assert following_line("def b():\n" + closing, "    ", [("    session.close(", "    log_closed(session)")]) \
        == ("    log_closed(session)", True)  # the copy's first line with code places what follows
    # a blank line above: the line before it, and the blank line, say what comes after both
    blank = "import payments_core\n\nCURRENCY = 'EUR'\n\n\ndef pay():\n    pass\nimport payments_core\n\n"
    assert anchor_above(blank, "") == ("import payments_core", "")
    assert following_line(blank, "") == ("CURRENCY = 'EUR'", False)
    assert anchor_above("x\n\n\n", "") is None  # three lines that hold too little


def test_where_the_statement_starts_places_what_follows_not_how_its_bracket_is_closed():
    black = "def a():\n    session.close(\n        force,\n    )\n    log_closed(session)\n"
    pep8 = "def b():\n    session.close(\n        force,\n        )\n"  # the bracket closed under the arguments
    assert following_line(black + pep8, "") == ("    log_closed(session)", False)
    aligned = "def a():\n    x = foo_bar(a,\n                b)\n    next_call()\n"
    assert following_line(aligned + "def b():\n    x = foo_bar(a,\n        b)\n", "") == ("    next_call()", False)


def test_copies_of_several_lines_are_found_as_a_pass_over_the_lines_would():
    import random

    from completer.earlier_lines import _copies_followed, statement_start

    def plain(text: str, anchor: tuple[str, ...]):
        lines, count = text.split("\n"), len(anchor)
        for first in range(len(lines) - count - 2, -1, -1):  # a copy with a whole line after it
            if all(lines[first + k].strip() == anchor[k] for k in range(count)):
                yield statement_start(lines[first:first + count], anchor), lines[first + count].rstrip()

    rng = random.Random(3)
    words = ["x = 1", "foo(a,", "    b)", "", "  ", "return x", ")", "else:", "y = compute(z)"]
    for _ in range(2000):
        text = "".join(rng.choice(("", "    ")) + rng.choice(words) + "\n" for _ in range(rng.randint(0, 30)))
        anchor = tuple(rng.choice(words).strip() for _ in range(rng.randint(1, 3)))
        if any(anchor):
            assert list(_copies_followed(text, anchor)) == list(plain(text, anchor)), (text, anchor)


def test_no_following_line_under_a_short_line_or_a_line_spanning_lines():
    assert following_line("x = 1\nx = 1\ny = 2\nx = 1\n", "") is None  # no other copy of `y = 2`, `x = 1`
    assert following_line(FOLLOWED_HEAD, "    conn\n") is None
    assert following_line("", "", [("anything = 1", "anything()")]) is None


def test_a_follower_that_would_lie_left_of_the_margin_makes_the_line_not_the_one():
    head = ("def f():\n    result = compute_result(config)\n    return result\n\n\ndef g():\n"
            "    result = compute_result(config)\ndef h():\n    pass\n\n\nresult = compute_result(config)\n")
    # after g's copy the code goes back 4 columns, which here would be left of the margin: not the same code
    assert following_line(head, "") is None
    # a blank line after a copy says nothing, wherever it would lie
    assert following_line(head.replace("def h():\n    pass\n", ""), "") == ("return result", False)
    assert following_line("import logging\n\n\nresult = compute_result(config)\n", "", [
        ("    result = compute_result(config)", "    return result"),
        ("    result = compute_result(config)", "def teardown():")]) is None


def test_a_long_line_holding_the_line_above_many_times_is_read_once():
    """Each place the line above stood inside a longer line was a hit, and each hit read back to its line's start
    and on to its end: thirty thousand `a` above the line `aaaaaaaa` cost 50 ms of the server's loop at every
    keystroke, quadratic in the line. A line holds one copy at most (its whole text), so the search goes on above
    each hit's line; the copies found are the same."""
    counted = counting(str, "rfind")
    head = counted("a" * 30_000 + "\naaaaaaaa\nbbbbbbbbbb\naaaaaaaa\n")
    assert following_line(head, "") == ("bbbbbbbbbb", False)
    assert counted.calls < 20
