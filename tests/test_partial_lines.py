"""The start of a line too long for the search: cut at a word's end, without a loop, and only where the
engine finds no whole line (tests on the committed bundle)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from completer.engine import Engine
from completer.partial_lines import LOOP_TOKENS, partial_line
from completer.syntax import syntax_for
from completer.types import SOURCE_MODEL, SOURCE_PARTIAL_LINE
from lsp_support import NAMES_LIST


def ids(engine: Engine, text: str) -> list[int]:
    return engine.tokens.encode(text)


@pytest.mark.parametrize("generated, expected", [
    ("table = build(alpha, beta", "table = build(alpha,"),  # never ends inside a name
    ("table = build(alpha, beta, ", "table = build(alpha, beta,"),
    ("limit = 4096", "limit ="),  # nor inside a number
    ("check(r'a|b' + r'", "check(r'a|b' + r'"),  # inside a string is fine: the line goes on
    ("value", None),  # nothing left
    ("   ", None),
])
def test_a_cut_off_beam_is_offered_up_to_its_last_whole_word(engine: Engine, generated: str, expected: str | None):
    assert partial_line(engine.tokens, ids(engine, generated), b"", "    ") == expected


@pytest.mark.parametrize("generated, language, expected", [
    ("echo $HOME_DI", "shellscript", "echo"),  # not `echo $`: the shell's $ begins the name
    ("my @sorted = sort { $a <=> $b } @item", "perl", "my @sorted = sort { $a <=> $b }"),  # Perl's sigils too
    ("while (my ($k, $v) = each %opti", "perl", "while (my ($k, $v) = each"),
    ("const el = $contai", "javascript", "const el ="),
    ("  background: var(--main-bg-col", "css", "  background: var("),  # CSS's names hold hyphens
    ("total = count-dif", "python", "total = count-"),  # in Python, a minus
])
def test_a_cut_off_beam_ends_where_its_languages_last_whole_name_does(engine: Engine, generated: str, language: str,
                                                                       expected: str):
    assert partial_line(engine.tokens, ids(engine, generated), b"", "", syntax_for(language)) == expected


def test_a_beam_that_loops_is_cut_before_the_loop(engine: Engine):
    head = ids(engine, "pattern = r'(a|b)")
    loop = ids(engine, "|")
    assert partial_line(engine.tokens, head + loop * LOOP_TOKENS, b"", "") == "pattern = r'(a|b)"
    assert partial_line(engine.tokens, head + loop * (LOOP_TOKENS - 1), b"", "") == "pattern = r'(a|b)||"


def test_the_typed_bytes_are_respelled_and_the_indentation_is_kept(engine: Engine):
    generated = ids(engine, "self.connection.execute(query,")
    assert partial_line(engine.tokens, generated, b"se", "    se") == "lf.connection.execute(query,"
    assert partial_line(engine.tokens, generated, b"xy", "    xy") is None  # the healing was not spelled
    deeper = ids(engine, "    return compute(a,")
    assert partial_line(engine.tokens, deeper, b"", "    ") is None  # deeper than the typed indentation
    assert partial_line(engine.tokens, deeper, b"", "") == "    return compute(a,"


LONG = NAMES_LIST


def test_the_engine_offers_a_partial_line_only_when_no_whole_line_fits(engine: Engine):
    """With max_tokens 6 no line of four more names can end: the likeliest one is offered cut off, marked as
    such, and typing on through it keeps it; with the setting off, or text after the cursor, nothing is."""
    short = Engine(replace(engine.settings, max_tokens=6))
    got = short.complete_text("file:///partial.py", LONG, "")
    assert [s.source for s in got.suggestions] == [SOURCE_PARTIAL_LINE]
    first = got.suggestions[0]
    assert first.line == "    " + first.text and first.text.startswith('"') and first.score < 0
    assert first.text.count('"') >= 2 and not first.text[-1:].isalnum()  # a name or more, to a word's end
    typed = first.text[:1]
    through = short.complete_text("file:///partial.py", LONG + typed, "")
    assert through.model_runs == 0 and through.suggestions[0].text == first.text[1:]
    assert not short.complete_text("file:///after.py", LONG, ")").suggestions  # would replace the ")"
    off = Engine(replace(engine.settings, max_tokens=3, partial_lines=False))
    assert not off.complete_text("file:///off.py", LONG, "").suggestions
    whole = engine.complete_text("file:///whole.py", LONG, "")  # 24 tokens: whole lines, none partial
    assert whole.suggestions and all(s.source == SOURCE_MODEL for s in whole.suggestions)
