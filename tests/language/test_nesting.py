"""How deeply source may nest: one limit, applied by the parser, so `dal check` and `dal run` agree.

Every kind of nesting runs at the limit in both commands, and one level more is refused by both
(exit 2, a located syntax error, nothing run), at the token that opened the level past the limit:
the same place however much deeper the source goes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark import Lark, Token, Tree

from dal.core.errors import DalSyntaxError
from dal.core.paths import grammar_path
from dal.syntax import lalr
from dal.syntax.parser import MAX_NESTING, NESTING_RULES, parse

N = MAX_NESTING


class Kind:
    """A way to nest: `source(d)` nests exactly d levels and prints `output` when run; one level past
    the limit is refused at `where(N)` (line, column of the token that opens level N + 1)."""

    def __init__(self, source: Callable[[int], str], output: Callable[[int], str],
                 where: Callable[[int], tuple[int, int]]) -> None:
        self.source, self.output, self.where = source, output, where


KINDS = {
    "parentheses": Kind(lambda d: "let x = " + "(" * d + "1" + ")" * d + "\nprint(x)\n",
                        lambda d: "1\n", lambda n: (1, 9 + n)),
    "lists": Kind(lambda d: "let x = " + "[" * d + "]" * d + "\nprint(len(x))\n",
                  lambda d: "1\n" if d > 1 else "0\n", lambda n: (1, 9 + n)),
    "maps": Kind(lambda d: "let x = " + '{"a": ' * d + "1" + "}" * d + "\nprint(len(keys(x)))\n",
                 lambda d: "1\n", lambda n: (1, 9 + 6 * n)),
    "unary minus": Kind(lambda d: "let x = " + "-" * d + "1\nprint(x)\n",
                        lambda d: "-1\n" if d % 2 else "1\n", lambda n: (1, 9 + n)),
    "not": Kind(lambda d: "let x = " + "not " * d + "true\nprint(x)\n",
                lambda d: "false\n" if d % 2 else "true\n", lambda n: (1, 9 + 4 * n)),
    "if blocks": Kind(lambda d: "if true {\n" * d + 'let y = "in"\n' + "}\n" * d + 'print("out")\n',
                      lambda d: "out\n", lambda n: (n + 1, 9)),
    "while blocks": Kind(lambda d: "let i = 0\n" + "while i < 1 {\n" * d + "i = 1\n" + "}\n" * d + "print(i)\n",
                         lambda d: "1\n", lambda n: (n + 2, 9)),  # `i < 1` is a level inside the blocks
    "for blocks": Kind(lambda d: "let xs = [1]\n" + "for x in xs {\n" * d + "let y = x\n" + "}\n" * d
                       + 'print("out")\n', lambda d: "out\n", lambda n: (n + 2, 13)),
    "fn blocks": Kind(lambda d: "fn f() {\n" * d + "let y = 1\n" + "}\n" * d + 'print("out")\n',
                      lambda d: "out\n", lambda n: (n + 1, 8)),
    "fn expressions": Kind(lambda d: "let f = " + "fn() { return " * d + "1" + " }" * d + '\nprint("out")\n',
                           lambda d: "out\n", lambda n: (1, 14 + 14 * n)),
    "calls": Kind(lambda d: "fn f(x) { return x }\nlet y = " + "f(" * d + "1" + ")" * d + "\nprint(y)\n",
                  lambda d: "1\n", lambda n: (2, 10 + 2 * n)),
    "call chains": Kind(lambda d: "fn g() { return g }\nlet y = g" + "()" * d + '\nprint("out")\n',
                        lambda d: "out\n", lambda n: (2, 10 + 2 * n)),
    "indexes": Kind(lambda d: "let x = [0]\nlet y = " + "x[" * d + "0" + "]" * d + "\nprint(y)\n",
                    lambda d: "0\n", lambda n: (2, 10 + 2 * n)),
    "index chains": Kind(lambda d: f"let m = 0\nfor i in range({d}) {{ m = [m] }}\nlet y = m" + "[0]" * d
                         + "\nprint(y)\n", lambda d: "0\n", lambda n: (3, 10 + 3 * n)),
    "slice chains": Kind(lambda d: "let x = [0]\nlet y = x" + "[0:]" * d + "\nprint(y)\n",
                         lambda d: "[0]\n", lambda n: (2, 10 + 4 * n)),
    "field chains": Kind(lambda d: f'let m = 0\nfor i in range({d}) {{ m = {{"a": m}} }}\nlet y = m' + ".a" * d
                         + "\nprint(y)\n", lambda d: "0\n", lambda n: (3, 10 + 2 * n)),
    "+ chains": Kind(lambda d: "let x = 1" + " + 1" * d + "\nprint(x)\n",
                     lambda d: f"{d + 1}\n", lambda n: (1, 11 + 4 * n)),
    "and chains": Kind(lambda d: "let x = true" + " and true" * d + "\nprint(x)\n",
                       lambda d: "true\n", lambda n: (1, 14 + 9 * n)),
    "list, parenthesis, map": Kind(lambda d: "let x = " + '[({"a": ' * (d // 3) + "1" + "})]" * (d // 3)
                                   + '\nprint("out")\n', lambda d: "out\n",
                                   lambda n: (1, 9 + 8 * (n // 3) + n % 3)),
}
DEEPER = (N + 1, N + 2, 2 * N, 100_000)


@pytest.mark.parametrize("name", KINDS)
def test_every_depth_up_to_the_limit_checks_and_runs(dal, name: str) -> None:
    kind = KINDS[name]
    for d in (1, 2, 3, 10, 100, N - 1, N):
        ran = dal.run(kind.source(d))
        assert ran.status == "completed", (name, d, ran.rendered)
        assert ran.stdout == kind.output(d), (name, d)


@pytest.mark.parametrize("name", KINDS)
def test_every_depth_past_the_limit_is_refused_where_it_passes_it(dal, name: str) -> None:
    kind = KINDS[name]
    for d in DEEPER:
        if name == "list, parenthesis, map":
            d += 3 - d % 3  # whole units of three levels
        ran = dal.run(kind.source(d))
        assert ran.status == "rejected", (name, d)
        assert len(ran.errors) == 1
        e = ran.error
        assert isinstance(e, DalSyntaxError)
        assert e.message == f"nested too deeply: this is level {N + 1:,} of nesting, and DAL allows {N:,}"
        assert (e.span.line, e.span.column) == kind.where(N), (name, d)


@pytest.mark.parametrize("name", ["parentheses", "maps", "if blocks", "fn expressions", "calls", "index chains",
                                  "+ chains"])
def test_check_and_run_agree_at_the_limit_and_one_past_it(dal, tmp_path: Path, name: str) -> None:
    kind = KINDS[name]
    ok = tmp_path / "ok.dal"
    ok.write_text(kind.source(N), encoding="utf-8")
    assert dal.cli("check", "ok.dal", cwd=tmp_path).returncode == 0
    ran = dal.cli("run", "ok.dal", cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, kind.output(N)), ran.stderr[-2000:]

    deep = tmp_path / "deep.dal"
    deep.write_text('print("ran")\n' + kind.source(N + 1), encoding="utf-8")  # one line down
    line, column = kind.where(N)
    for command in ("check", "run"):
        p = dal.cli(command, "deep.dal", cwd=tmp_path)
        assert p.returncode == 2, (command, p.stderr[-2000:])
        assert "error[syntax]: nested too deeply" in p.stderr
        assert f" --> deep.dal:{line + 1}:{column}\n" in p.stderr, p.stderr[-2000:]
        assert "Traceback" not in p.stderr
        assert p.stdout == ""  # nothing ran


def test_the_caret_is_under_the_token_that_opens_the_level_past_the_limit(dal) -> None:
    ran = dal.run("if true {\n" * (N + 1) + "}\n" * (N + 1))
    lines = ran.rendered.split("\n")
    assert lines[1] == f" --> test.dal:{N + 1}:9"
    assert lines[3].endswith("| if true {")
    assert lines[4].index("^") == lines[3].index("{")


def test_a_syntax_error_before_the_deep_part_is_reported_first(dal) -> None:
    ran = dal.run("let = 1\n" + "let x = " + "(" * (2 * N) + "1" + ")" * (2 * N) + "\n")
    assert ran.error.span.line == 1 and "nested" not in ran.error.message


# --- the rule, against Lark's own tree -------------------------------------------------------


@pytest.fixture(scope="module")
def lark_parser() -> Lark:
    return Lark(grammar_path().read_text(encoding="utf-8"), parser="lalr", lexer="basic", strict=True,
                keep_all_tokens=True, maybe_placeholders=False, start="start")


def _lark_depth(tree: Tree | Token) -> int:
    """The most nesting rules any token of the tree is inside (Lark names a node by its alias)."""
    deepest, todo = 0, [(tree, 0)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, Tree):
            depth += node.data in NESTING_RULES
            deepest = max(deepest, depth)
            todo.extend((child, depth) for child in node.children)
    return deepest


ATOMS = ["x", "1", '"s"', "f(x)", "[]", "{}"]


def _nested(draw: st.DrawFn, budget: int) -> str:
    if budget <= 0:
        return draw(st.sampled_from(ATOMS))
    form = draw(st.integers(0, 10))
    inner = _nested(draw, budget - draw(st.integers(1, 3)))
    other = _nested(draw, draw(st.integers(0, budget - 1)))
    minus = f"-({inner})" if inner.startswith("not") else f"-{inner}"  # `-not x` is not DAL
    return [
        f"({inner})", f"[{inner}, {other}]", f'{{"k": {inner}}}', minus, f"not {inner}",
        f"f({inner}, {other})", f"({inner}).k", f"({inner})[{other}]", f"({inner}) + ({other}) * ({other}).k",
        f"({inner}) and ({other}) or x == ({inner})", f"x.k.k[1](2).k + 1 - 2 * 3 - -({inner})",
    ][form]


@st.composite
def scripts(draw: st.DrawFn) -> str:
    body = _nested(draw, draw(st.integers(0, 12)))
    wrap = draw(st.integers(0, 3))
    return "if x {\n" * wrap + f"let y = {body}\n" + "}\n" * wrap


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts(), st.integers(1, 12))
def test_source_is_refused_exactly_when_lark_s_tree_nests_past_the_limit(lark_parser, text: str, limit: int) -> None:
    from dal.syntax.parser import _Builder, _tables

    depth = _lark_depth(lark_parser.parse(text))
    ours = lalr.Parser(_tables(), _Builder(), nesting=NESTING_RULES, max_depth=limit)
    try:
        ours.parse(text)
        refused = False
    except lalr.NestedTooDeeply as e:
        refused = True
        assert text[e.pos_in_stream:].startswith(e.token.value)
    assert refused == (depth > limit), (text, depth, limit)


def test_the_shipped_parser_applies_the_limit() -> None:
    parse("let x = " + "(" * N + "1" + ")" * N + "\n")
    with pytest.raises(DalSyntaxError, match="nested too deeply"):
        parse("let x = " + "(" * (N + 1) + "1" + ")" * (N + 1) + "\n")


def test_the_language_reference_shows_the_error_as_it_is(dal) -> None:
    from tests.test_docs_examples import fenced_blocks

    doc = (Path(__file__).resolve().parents[2] / "docs" / "language.md").read_text(encoding="utf-8")
    section = doc[doc.index("## How deeply code may nest"):]
    shown = next(code for lang, code, _, _ in fenced_blocks(section) if lang == "text")
    ran = dal.run("if true {\n" * (N + 1) + "}\n" * (N + 1), "deep.dal")
    assert ran.rendered + "\n" == shown
