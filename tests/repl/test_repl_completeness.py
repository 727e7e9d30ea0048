"""When Enter runs the input and when it opens a continuation line: the grammar decides."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dal.repl.completeness import is_complete


@pytest.mark.parametrize(
    "source",
    [
        "fn add(a, b) {",
        "fn add(a, b) {\n    return a + b",
        "let xs = [1,",
        'let m = {"a":',
        "f(1",
        "[1,",  # a lone expression still open
        "(1 +",
        "if x {\n} else",
        "while i < 3 {\n  i = i + 1\n",
        'print("x", [1,',  # an open call holding a closed string is still open
    ],
)
def test_open_inputs_continue(source: str) -> None:
    assert not is_complete(source)


@pytest.mark.parametrize(
    "source",
    [
        "",
        "   \n",
        "# only a comment",
        "let x = 1",
        "1 + 2",
        "fn f() {\n  return 1\n}",
        "let x = ]",  # a real syntax error runs at once, so its caret shows
        'let s = "a\nb"',  # a string cannot span lines: an error, not an open string
        'let s = "abc',  # ... so an unterminated one is an error at once, not a continuation (issue 15)
        "}",
        "let let",
    ],
)
def test_complete_inputs_and_real_errors_run(source: str) -> None:
    assert is_complete(source)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('{}[]()",:;.=+-*/ \n#abfnlt0123456789\\')), max_size=40))
def test_it_never_raises(source: str) -> None:
    assert is_complete(source) in (True, False)
