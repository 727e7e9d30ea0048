"""The Pygments lexer: every token kind of the grammar, never an exception, the entry point."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Lark
from lark.lexer import PatternStr, TerminalDef
from pygments.token import (
    Comment,
    Error,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Token,
    Whitespace,
)

from dal.core.paths import grammar_path
from dal.repl.lexer import BUILTIN_NAMES, KEYWORDS, DalLexer


def lex(text: str) -> list[tuple[object, str]]:
    """Tokens without whitespace, from the exact input (no newline added)."""
    return [(tok, val) for _, tok, val in DalLexer().get_tokens_unprocessed(text) if val.strip()]


@functools.cache
def grammar_terminals() -> list[TerminalDef]:
    """Every terminal of the grammar as Lark compiles it (literals and regexes alike)."""
    return Lark(grammar_path().read_text(), parser="lalr").terminals


EXPECTED_LITERAL = {
    "let": Keyword.Declaration,
    "fn": Keyword.Declaration,
    "param": Keyword.Declaration,
    "true": Keyword.Constant,
    "false": Keyword.Constant,
    "null": Keyword.Constant,
    "and": Operator.Word,
    "or": Operator.Word,
    "not": Operator.Word,
    **{kw: Keyword for kw in ("if", "else", "while", "for", "in", "break", "continue", "return")},
    **{p: Punctuation for p in "{}()[],:;."},
    **{op: Operator for op in ("=", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%")},
}

# Samples of each regex terminal (each must match the grammar's own pattern) and their token type.
REGEX_SAMPLES: dict[str, list[tuple[str, object]]] = {
    "NAME": [("x", Name), ("attempt_2", Name), ("_", Name)],
    "INT": [("0", Number.Integer), ("12345678901234567890", Number.Integer)],
    "FLOAT": [("3.25", Number.Float), ("1.5e-3", Number.Float), ("2E10", Number.Float)],
    "STRING": [('"plain"', String.Double), ('"\\n\\u00e9"', String.Escape)],
    "COMMENT": [("# note", Comment.Single)],
    "COMP_OP": [(op, Operator) for op in ("==", "!=", "<=", ">=", "<", ">")],
    "ADD_OP": [("+", Operator), ("-", Operator)],
    "MUL_OP": [(op, Operator) for op in "*/%"],
}


def test_every_grammar_terminal_is_known_to_the_lexer() -> None:
    for term in grammar_terminals():
        if term.name.startswith("__IGNORE"):
            continue  # whitespace
        if isinstance(term.pattern, PatternStr):
            assert term.pattern.value in EXPECTED_LITERAL, f"new literal {term.pattern.value!r}: add it here"
        else:
            assert term.name in REGEX_SAMPLES, f"new terminal {term.name}: teach dal/repl/lexer.py and this test"


@pytest.mark.parametrize("literal", sorted(EXPECTED_LITERAL))
def test_each_literal_gets_its_token_type(literal: str) -> None:
    assert lex(literal) == [(EXPECTED_LITERAL[literal], literal)]


@pytest.mark.parametrize(
    ("terminal", "sample", "expected"),
    [(name, text, tok) for name, samples in REGEX_SAMPLES.items() for text, tok in samples],
)
def test_each_regex_terminal_gets_its_token_type(terminal: str, sample: str, expected: object) -> None:
    patterns = {t.name: t.pattern for t in grammar_terminals()}
    if terminal in patterns:  # the sample is a real instance of the grammar's terminal
        assert re.fullmatch(patterns[terminal].to_regexp(), sample)
    tokens = lex(sample)
    assert "".join(v for _, v in tokens) == sample
    assert all(tok not in Error for tok, _ in tokens)
    assert expected in {tok for tok, _ in tokens}
    if terminal != "STRING":
        assert len(tokens) == 1


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # NAME
        ("attempt_2", [(Name, "attempt_2")]),
        ("_x", [(Name, "_x")]),
        ("letter", [(Name, "letter")]),  # a keyword prefix is still a name
        ("fnord", [(Name, "fnord")]),
        ("lengths", [(Name, "lengths")]),  # a builtin prefix too
        # INT and FLOAT
        ("42", [(Number.Integer, "42")]),
        ("3.25", [(Number.Float, "3.25")]),
        ("1.5e-3", [(Number.Float, "1.5e-3")]),
        ("2E10", [(Number.Float, "2E10")]),
        # STRING with every JSON escape
        ('"a"', [(String.Double, '"'), (String.Double, "a"), (String.Double, '"')]),
        (
            r'"\"x\\x\/x\bx\fx\nx\rx\tx\u00e9"',
            [(String.Double, '"')]
            + [
                tok
                for esc in [r"\"", r"\\", r"\/", r"\b", r"\f", r"\n", r"\r", r"\t", r"\u00e9"]
                for tok in ((String.Escape, esc), (String.Double, "x"))
            ][:-1]
            + [(String.Double, '"')],
        ),
        # COMMENT
        ("# a comment", [(Comment.Single, "# a comment")]),
        ("x # tail", [(Name, "x"), (Comment.Single, "# tail")]),
        # COMP_OP, ADD_OP, MUL_OP
        *[(op, [(Operator, op)]) for op in ("==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%")],
        # builtins, function names, fields
        ("append", [(Name.Builtin, "append")]),
        (
            "fn retry(n)",
            [
                (Keyword.Declaration, "fn"),
                (Name.Function, "retry"),
                (Punctuation, "("),
                (Name, "n"),
                (Punctuation, ")"),
            ],
        ),
        ("fn(n)", [(Keyword.Declaration, "fn"), (Punctuation, "("), (Name, "n"), (Punctuation, ")")]),
        ("state.keys", [(Name, "state"), (Punctuation, "."), (Name.Attribute, "keys")]),
    ],
)
def test_named_terminals(source: str, expected: list[tuple[object, str]]) -> None:
    assert lex(source) == expected


def test_every_builtin_is_highlighted() -> None:
    for name in BUILTIN_NAMES:
        assert lex(name) == [(Name.Builtin, name)]


def test_lists_match_the_interpreter_when_it_is_there() -> None:
    if importlib.util.find_spec("dal.syntax.keywords") is not None:
        from dal.syntax.keywords import KEYWORDS as INTERPRETER_KEYWORDS

        assert set(KEYWORDS) == set(INTERPRETER_KEYWORDS)
    from dal.repl.completer import builtins_table

    table = builtins_table()
    if table is not None:
        assert set(table) <= set(BUILTIN_NAMES), "add the new builtins to dal/repl/lexer.py"


ARTICLE_LOOP = """\
let state = { "attempt": 0, "max_attempts": 3, "status": "pending", "evidence": [] }
fn record(state, operation, outcome) {
  state.evidence = append(state.evidence, { "attempt": state.attempt, "operation": operation })
  return state
}
while state.status == "pending" and state.attempt < state.max_attempts {
  state.attempt = state.attempt + 1
  let listing = run("test -e '" + state.path + "' && echo present || echo missing")
  state = record(state, "check_destination", listing)
  if contains(listing, "present") { state.status = "verified" } else { break }
}
"""


def test_a_valid_script_has_no_error_token() -> None:
    tokens = list(DalLexer().get_tokens(ARTICLE_LOOP))
    assert not [t for t in tokens if t[0] in Error]
    assert "".join(v for _, v in tokens) == ARTICLE_LOOP


def test_half_typed_input_is_highlighted_not_rejected() -> None:
    # An unterminated string ends at the line's end; the next line lexes normally.
    tokens = lex('let s = "abc\nlet t = 1')
    assert (String.Double, "abc") in tokens
    assert tokens[-4:] == [(Keyword.Declaration, "let"), (Name, "t"), (Operator, "="), (Number.Integer, "1")]
    assert lex("@") == [(Error, "@")]
    assert lex(r'"\q"')[1] == (Error, "\\")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_no_input_makes_it_raise_and_nothing_is_lost(text: str) -> None:
    tokens = list(DalLexer().get_tokens_unprocessed(text))
    assert "".join(v for _, _, v in tokens) == text
    assert all(tok in Token for _, tok, _ in tokens)


SOUP = [*KEYWORDS, *BUILTIN_NAMES, *'x 1 2.5 "s\\n" { } ( ) [ ] , : ; . = == + #c'.split(), "\n", " ", '"']


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SOUP)))
def test_token_soup_never_raises(parts: list[str]) -> None:
    text = "".join(parts)
    assert "".join(v for _, _, v in DalLexer().get_tokens_unprocessed(text)) == text


def test_whitespace_is_whitespace() -> None:
    assert list(DalLexer().get_tokens_unprocessed(" \t\n")) == [(0, Whitespace, " \t\n")]


def _entry_point_installed() -> bool:
    return any(ep.name == "dal" for ep in importlib.metadata.entry_points(group="pygments.lexers"))


@pytest.mark.skipif(not _entry_point_installed(), reason="dal-lang is not installed (pip install -e .)")
def test_pygments_finds_the_lexer_through_its_entry_point() -> None:
    from pygments.lexers import get_lexer_by_name, get_lexer_for_filename

    assert isinstance(get_lexer_by_name("dal"), DalLexer)
    assert isinstance(get_lexer_for_filename("loop.dal"), DalLexer)


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.dal"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_highlights_without_an_error_token(script: Path) -> None:
    text = script.read_text(encoding="utf-8")
    tokens = list(DalLexer().get_tokens_unprocessed(text))
    assert [(pos, val) for pos, tok, val in tokens if tok in Error] == []
    assert "".join(v for _, _, v in tokens) == text
