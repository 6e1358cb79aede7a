"""The checks every suggestion passes, with the lines above the cursor as context."""
from __future__ import annotations

import pytest

from completer.filters import CONTEXT_LINES, keep_suggestion, line_context

TOP = line_context([])


@pytest.mark.parametrize("line,above,kept", [
    ("    return x", [], True),
    ("    x = ", [], False),  # dangling operator
    ("    self.", [], False),
    ("    x = y and", [], False),  # dangling keyword
    ("    if x", [], False),  # block header without its colon
    ("    if x:", [], True),
    ("    if x: return y", [], True),
    ("def f(x) -> int:", [], True),
    ("    x = a if b else c", [], True),
    ("    foo(a,", [], True),  # opens a multi-line call
    ("    total = (a +", [], True),
    ("    x = foo(a", [], False),  # forgot to close
    ('    print("a"', [], False),
    ('    print("a', [], False),  # unterminated string
    ("    print('#')", [], True),  # a '#' inside a string is no comment
    ("    foo(]", [], False),  # mismatched pair
    ("    # explain", [], True),
    ("    #", [], False),  # an empty comment says nothing
    ('    """Docstring', [], True),
    ("    ...", [], True),
    (":", [], False),  # no statement starts with an operator or separator
    ("    = x", [], False),
    ("    .append(x)", [], False),
    ("    .append(x)", ["items = (foo"], True),  # a method chain inside brackets
    ("    *rest, last = items", [], True),
    ("    -x", [], True),
    ("@property", [], True),
    ("    )", ["foo(", "    a=1,", "    b=2"], True),  # closes a call opened above
    ("    b=2)", ["x = foo(a,"], True),
    ("    b=2)", ["x = 1"], False),  # closes nothing
    ("    c + d", ["x = (a +"], True),  # inside brackets anything goes
    ("    any prose at all", ['"""Docstring', "more"], True),  # inside a docstring
    ("    y = 2", ["x = 1 \\"], True),
])
def test_well_formed_lines(line: str, above: list[str], kept: bool):
    above = above or ["def f(x):"]  # not the top of the file, where no line is indented
    assert keep_suggestion(line, line.strip(), "", line_context(above)) is kept


def test_the_first_statement_of_a_file_is_not_indented():
    for above in ([], ["", "   "]):
        assert not keep_suggestion("    import os", "    import os", "", line_context(above))
        assert keep_suggestion("import os", "import os", "", line_context(above))
    assert keep_suggestion("    return x", "    return x", "", line_context(["def f(x):"]))
    assert keep_suggestion("    return x", "return x", "", line_context([""] * CONTEXT_LINES + ["def f(x):", ""]))
    assert not line_context([""] * CONTEXT_LINES + ["x = 1"] + [""] * CONTEXT_LINES).top_of_file  # code far above


def test_repeats_and_whitespace_are_dropped():
    context = line_context(["    total = compute(a, b)"])
    assert not keep_suggestion("    total = compute(a, b)", "total = compute(a, b)", "", context)
    assert not keep_suggestion("    ", "   ", "", TOP)
    assert not keep_suggestion("    foo(x)", "x)", "x)", TOP)  # only repeats what is after the cursor


def test_docstring_far_above_does_not_flip_string_state():
    """Context scanning starts at a top-level anchor, so closing quotes are never read as opening."""
    body = ["class A:", "    def f(self):", '        """Say hi.', "", "        More words.", '        """']
    body += [f"        x{i} = {i}" for i in range(60)]
    context = line_context(body)
    assert not context.start.triple and not context.start.stack
    assert not keep_suggestion("    def close_handlers)", "def close_handlers)", "", context)
    assert keep_suggestion("    def close_handlers(self):", "def close_handlers(self):", "", context)


def test_deep_in_a_long_class_a_docstring_is_still_known():
    """More than CONTEXT_LINES lines of methods: no top-level anchor is left in the window, so scanning
    starts at the last method. A numpy-style underline in its docstring is prose, not a dangling
    operator; after the docstring closes, code is checked again."""
    method = ["    def f(self):", '        """Say hi.', "", "        Notes", "        -----", "        Words.",
              '        """', "        return 1", ""]
    body = ["class A:"] + method * (CONTEXT_LINES // len(method) + 2)
    docstring = body[:-5]  # up to and including "        Notes"
    assert len(docstring) > CONTEXT_LINES and docstring[-1] == "        Notes"
    assert line_context(docstring).start.triple == '"""'
    assert keep_suggestion("        -----", "-----", "", line_context(docstring))
    after = line_context(body[:-1])  # the method's last line, after its docstring closed
    assert not after.start.triple
    assert not keep_suggestion("        x = foo(a", "x = foo(a", "", after)


def test_typed_indentation_is_not_deepened():
    below_a_def = line_context(["def f(x):"])
    assert not keep_suggestion("        return x", "    return x", "", below_a_def)  # typed 4 spaces, would add 4 more
    assert not keep_suggestion("\t\treturn x", "\treturn x", "", below_a_def)
    assert keep_suggestion("    return x", "return x", "", below_a_def)
    assert keep_suggestion("        return x", "        return x", "", below_a_def)  # nothing typed: indent freely
    assert keep_suggestion("    x = 1", " 1", "", below_a_def)  # mid-line, a leading space is just a space


def test_the_filters_source_compiles_without_a_warning():
    """An invalid escape in a docstring (`\\$(`) is a DeprecationWarning, a SyntaxWarning from Python 3.12 on, and
    meant to become an error."""
    import warnings
    from pathlib import Path

    import completer.filters

    source = Path(completer.filters.__file__).read_text(encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile(source, completer.filters.__file__, "exec")
