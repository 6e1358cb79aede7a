"""The scan's reading of each language's strings and comments (completer/syntax.py, completer/filters.py) against
Pygments' (tests/syntax_oracle.py), at every position of a realistic sample of each language in
tests/syntax_samples/ (named after the LSP language id, `-` written `_`), and the brackets left open after each
line. Where the two differ, either the scan is wrong, and is fixed, or its reading is the language's and
Pygments' is not, or the difference cannot change what the filters keep: each such line is listed in EXCEPTIONS
or BRACKET_EXCEPTIONS with why, and an exception no longer met fails the test too."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from completer.syntax import _BY_LANGUAGE, PYTHON_NAME, syntax_for
from syntax_oracle import CODE, LEXERS, STRING, bracket_differences, differences

SAMPLES = Path(__file__).parent / "syntax_samples"
EXCEPTIONS = {
    ("csharp", 12): "C# 11's raw string literal \"\"\"...\"\"\": Pygments reads its quotes as an empty string and one",
    ("csharp", 13): "its closing quotes, which Pygments reads as a string opened there",
    ("dart", 14): "a position inside a string inside an interpolation (\"${'nested (' ...): the oracle mends the "
                  "prefix with a quote, which closes the inner string but not the expression and the outer string",
    ("swift", 11): "a position inside a string inside an interpolation (\\(dict[\"key (\"]!)), as dart's above",
    ("elm", 8): "Elm's \"\"\"...\"\"\" string: Pygments ends it at a quote inside it",
    ("less", 3): "an unquoted url(//cdn...), one token that Pygments calls a string: the scan reads it as code and "
                 "knows its // opens no comment, so its brackets balance as the URL's",
    ("perl", 6): "s/\\(/[/g's flags, which Pygments counts in the string: they are letters either way",
    ("ruby", 25): "%q(it's), read as code like %w[...]: its quote, after a letter, opens no string",
    ("ruby", 19): "Ruby's %w[a b c], which the scan reads as code (not read: `%` is also Ruby's modulo); its "
                  "brackets balance, as in most such literals",
    ("scss", 5): "Pygments' SCSS lexer loses its place after url(http://...) and reads the comments after it as "
                 "code (the scan's reading, a comment, is the language's)",
    ("scss", 6): "the same",
    ("shellscript", 12): "Pygments calls the parameter expansion ${#array[@]} an interpolation, which the oracle "
                         "reads as a string's text; it is code, as the scan reads it",
    ("shellscript", 19): "the parameter expansion ${name#prefix}, the same as ${#array[@]}",
    ("shellscript", 20): "a position inside $'it\\'s (': the scan reads ANSI-C quoting whole once its closing quote "
                         "is there, and a prefix that ends after its escaped quote as '...' closed there",
    ("sql", 3): "a quoted identifier \"quoted [id]\": Pygments' is a name, the scan's a string; the brackets in it "
                "are no brackets either way",
}
"""(language, line) of each difference that is not the scan's mistake, and why."""
BRACKET_EXCEPTIONS = {
    ("csharp", 12): "C# 11's raw string, as above: Pygments counts the `(` in it",
    ("elm", 5): "Pygments reads Elm's character literal '(' as a quote, a bracket and a quote",
    ("scss", 5): "Pygments' SCSS lexer lost after url(http://...), as above",
    ("scss", 6): "the same",
    ("shellscript", 14): "a `case` pattern's `a)`, which closes nothing (Syntax.stray_closers)",
    ("sql", 8): "E'it\\'s [', PostgreSQL's string with escapes, which Pygments ends at the escaped quote",
    ("typescript", 3): "Pygments reads `/ 2 + (b! /` after TypeScript's non-null `a!` as a regular expression",
}
"""(language, line) of each line after which the scan and Pygments count different brackets open, and why."""


def _samples() -> dict[str, Path]:
    return {path.stem.replace("_", "-"): path for path in sorted(SAMPLES.iterdir())}


def test_every_language_the_scan_reads_has_a_sample_and_a_lexer():
    assert set(_samples()) == {*_BY_LANGUAGE, PYTHON_NAME} == set(LEXERS)


@pytest.mark.parametrize("language", sorted({*_BY_LANGUAGE, PYTHON_NAME}))
def test_the_scan_reads_strings_and_comments_as_pygments_does(language):
    text = _samples()[language].read_text()
    found = differences(text, language, syntax_for(language))
    unexplained = [str(d) for d in found if (language, d.line) not in EXCEPTIONS]
    stale = [line for lang, line in EXCEPTIONS if lang == language and not any(d.line == line for d in found)]
    assert not unexplained and not stale, (unexplained, stale)


@pytest.mark.parametrize("language", sorted({*_BY_LANGUAGE, PYTHON_NAME}))
def test_the_scan_leaves_as_many_brackets_open_as_pygments_does(language):
    text = _samples()[language].read_text()
    found = bracket_differences(text, language, syntax_for(language))
    unexplained = [d for d in found if (language, d[0]) not in BRACKET_EXCEPTIONS]
    stale = [line for lang, line in BRACKET_EXCEPTIONS if lang == language and not any(d[0] == line for d in found)]
    assert not unexplained and not stale, (unexplained, stale)


def test_the_oracle_finds_a_string_read_as_code():
    """Without its multi-line quotes, Rust's second line of a string is code to the scan and a string to Pygments."""
    rust = dataclasses.replace(syntax_for("rust"), multiline_quotes="")
    text = 'fn f() {\n    let s = "first )\nsecond ( line";\n}\n'
    assert [(d.line, d.ours, d.theirs) for d in differences(text, "rust", rust)][:1] == [(3, CODE, STRING)]
    assert differences(text, "rust", syntax_for("rust")) == []
    assert bracket_differences(text, "rust", rust)[:1] == [(3, 2, 1)]  # its `(` stays open to the scan
    assert bracket_differences(text, "rust", syntax_for("rust")) == []
