"""Property tests of the language (hypothesis).

1. Differential: random expression trees over integers, strings, booleans, null, lists and maps give
   the same value in DAL as in a small Python oracle of DAL's semantics, or fail with the same kind
   of error (`type` where the operand types do not fit, `runtime` for division by zero, an index out
   of range or a missing key).
2. Round trip: random syntax trees survive `unparse` then `parse` unchanged, and `format_source` is
   idempotent (comments included) and keeps the program.
3. No input (random text, token soup, random bytes decoded, random valid programs) makes parsing,
   checking, formatting or running raise anything but a DAL error, or an internal error.
4. Step counts are deterministic: the same script gives the same count every run, in-process and in
   processes with different hash seeds.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dal.core.errors import DalError, DalSyntaxError, InternalError
from dal.eval.host import NullHost
from dal.eval.interpreter import Engine, check_source
from dal.eval.runtime import Runtime
from dal.syntax import ast
from dal.syntax.format import format_source, unparse
from dal.syntax.keywords import KEYWORDS
from dal.syntax.parser import parse

# Running a script raises the recursion limit (deep DAL recursion runs in a big-stack thread); hypothesis
# notices and says it will not reset it, which is what we want.
pytestmark = [
    pytest.mark.filterwarnings("ignore:The recursion limit will not be reset"),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),  # the nested strategies' own repr
    # hypothesis cannot read the source of the `extend` functions defined inside expressions; they do
    # recurse (generated programs nest blocks thirty deep)
    pytest.mark.filterwarnings("ignore:.*can't actually recurse"),
]

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# =================================================================================================
# 1. Differential testing against a Python oracle
# =================================================================================================


class Oops(Exception):
    """The oracle's error: `kind` is the DAL error kind it predicts."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def is_num(v: Any) -> bool:
    return type(v) in (int, float)


def dal_equal(a: Any, b: Any) -> bool:
    """Structural equality as the brief defines it: booleans are not numbers, 1 == 1.0."""
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if is_num(a) and is_num(b):
        return a == b
    if type(a) is not type(b):
        return False
    if type(a) is list:
        return len(a) == len(b) and all(dal_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return a.keys() == b.keys() and all(dal_equal(a[k], b[k]) for k in a)
    return a == b


def oracle(t: tuple) -> Any:
    """Evaluate a tree with DAL's semantics, written independently of the implementation."""
    tag = t[0]
    if tag == "lit":
        return t[1]
    if tag == "list":
        return [oracle(x) for x in t[1]]
    if tag == "map":
        return {k: oracle(v) for k, v in t[1]}
    if tag == "neg":
        v = oracle(t[1])
        if not is_num(v):
            raise Oops("type")
        return -v
    if tag == "not":
        v = oracle(t[1])
        if type(v) is not bool:
            raise Oops("type")
        return not v
    if tag in ("and", "or"):
        a = oracle(t[1])
        if type(a) is not bool:
            raise Oops("type")
        if (tag == "and" and not a) or (tag == "or" and a):
            return a  # short-circuit: the right side is never evaluated
        b = oracle(t[2])
        if type(b) is not bool:
            raise Oops("type")
        return b
    if tag == "bin":
        op, a, b = t[1], oracle(t[2]), oracle(t[3])
        if op == "==":
            return dal_equal(a, b)
        if op == "!=":
            return not dal_equal(a, b)
        if op in ("<", "<=", ">", ">="):
            if not ((is_num(a) and is_num(b)) or (type(a) is str and type(b) is str)):
                raise Oops("type")
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        if op == "+" and ((type(a) is str and type(b) is str) or (type(a) is list and type(b) is list)):
            return a + b
        if not (is_num(a) and is_num(b)):
            raise Oops("type")
        if op in ("/", "%") and b == 0:
            raise Oops("runtime")
        try:
            r = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                 "%": lambda: a % b}[op]()
        except OverflowError:  # an integer too large to meet a float
            raise Oops("runtime") from None
        if type(r) is float and not math.isfinite(r):
            raise Oops("runtime")
        return r
    if tag == "index":
        o, i = oracle(t[1]), oracle(t[2])
        if type(o) in (list, str):
            if type(i) is not int:
                raise Oops("type")
            if not 0 <= i < len(o):
                raise Oops("runtime")
            return o[i]
        if type(o) is dict:
            if type(i) is not str:
                raise Oops("type")
            if i not in o:
                raise Oops("runtime")
            return o[i]
        raise Oops("type")
    if tag == "field":
        o = oracle(t[1])
        if type(o) is not dict:
            raise Oops("type")
        if t[2] not in o:
            raise Oops("runtime")
        return o[t[2]]
    if tag == "len":
        v = oracle(t[1])
        if type(v) not in (str, list, dict):
            raise Oops("type")
        return len(v)
    if tag == "contains":
        h, n = oracle(t[1]), oracle(t[2])
        if type(h) is list:
            return any(dal_equal(x, n) for x in h)
        if type(h) in (str, dict):
            if type(n) is not str:
                raise Oops("type")
            return n in h
        raise Oops("type")
    raise AssertionError(tag)


def to_source(t: tuple) -> str:
    """DAL source for a tree, every compound parenthesised (precedence is the round trip's job)."""
    tag = t[0]
    if tag == "lit":
        v = t[1]
        if v is None:
            return "null"
        if type(v) is bool:
            return "true" if v else "false"
        if type(v) is str:
            return json.dumps(v)
        return f"({v})" if v < 0 else str(v)
    if tag == "list":
        return "[" + ", ".join(to_source(x) for x in t[1]) + "]"
    if tag == "map":
        return "{" + ", ".join(f"{json.dumps(k)}: {to_source(v)}" for k, v in t[1]) + "}"
    if tag == "neg":
        return f"(-{to_source(t[1])})"
    if tag == "not":
        return f"(not {to_source(t[1])})"
    if tag in ("and", "or"):
        return f"({to_source(t[1])} {tag} {to_source(t[2])})"
    if tag == "bin":
        return f"({to_source(t[2])} {t[1]} {to_source(t[3])})"
    if tag == "index":
        return f"{to_source(t[1])}[{to_source(t[2])}]"
    if tag == "field":
        return f"{to_source(t[1])}.{t[2]}"
    if tag in ("len", "contains"):
        return f"{tag}(" + ", ".join(to_source(x) for x in t[1:]) + ")"
    raise AssertionError(tag)


KEYS = ["a", "b", "k"]
ARITH = ["+", "-", "*", "/", "%"]
COMPARE = ["<", "<=", ">", ">="]
ALL_OPS = [*ARITH, *COMPARE, "==", "!="]


def lit(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return strategy.map(lambda v: ("lit", v))


# Trees are built well-typed (so that most of them compute a value), a third of them with an
# ill-typed operation at the top (so that the type errors are exercised too).
BIG = [2**70, -(2**65) + 1, 10**20, 10**400]  # 10**400 cannot meet a float: an overflow error
int_leaf = lit(st.one_of(st.integers(-6, 6), st.integers(-6, 6), st.sampled_from(BIG)))
str_leaf = lit(st.one_of(st.text(alphabet='ab"\\é\n', max_size=3), st.sampled_from(KEYS)))
bool_leaf = lit(st.booleans())
small_index = lit(st.integers(0, 2))  # mostly in range: most trees should compute a value

nums: st.SearchStrategy = st.deferred(
    lambda: st.one_of(
        int_leaf, int_leaf,
        st.tuples(st.sampled_from(ARITH), nums, nums).map(lambda x: ("bin", *x)),
        st.tuples(st.sampled_from(ARITH), nums, nums).map(lambda x: ("bin", *x)),
        nums.map(lambda x: ("neg", x)),
        st.one_of(strs, lists, maps).map(lambda x: ("len", x)),
        st.tuples(st.lists(nums, min_size=1, max_size=3).map(lambda xs: ("list", tuple(xs))), small_index).map(
            lambda x: ("index", *x)
        ),
    )
)
strs: st.SearchStrategy = st.deferred(
    lambda: st.one_of(
        str_leaf, str_leaf, str_leaf,
        st.tuples(st.just("+"), strs, strs).map(lambda x: ("bin", *x)),
        st.tuples(strs, small_index).map(lambda x: ("index", *x)),
    )
)
bools: st.SearchStrategy = st.deferred(
    lambda: st.one_of(
        bool_leaf, bool_leaf,
        st.tuples(st.sampled_from(COMPARE), nums, nums).map(lambda x: ("bin", *x)),
        st.tuples(st.sampled_from(COMPARE), strs, strs).map(lambda x: ("bin", *x)),
        st.tuples(st.sampled_from(["==", "!="]), values, values).map(lambda x: ("bin", *x)),
        bools.map(lambda x: ("not", x)),
        st.tuples(st.sampled_from(["and", "or"]), bools, bools).map(lambda x: (x[0], x[1], x[2])),
        st.tuples(lists, values).map(lambda x: ("contains", *x)),
        st.tuples(st.one_of(strs, maps), strs).map(lambda x: ("contains", *x)),
    )
)
lists: st.SearchStrategy = st.deferred(
    lambda: st.one_of(
        st.lists(values, max_size=3).map(lambda xs: ("list", tuple(xs))),
        st.tuples(st.just("+"), lists, lists).map(lambda x: ("bin", *x)),
    )
)
maps: st.SearchStrategy = st.deferred(
    lambda: st.lists(st.tuples(st.sampled_from(KEYS), values), max_size=3, unique_by=lambda kv: kv[0]).map(
        lambda kvs: ("map", tuple(kvs))
    )
)
ill_typed: st.SearchStrategy = st.deferred(
    lambda: st.one_of(
        st.tuples(st.sampled_from(ALL_OPS), values, values).map(lambda x: ("bin", *x)),
        values.map(lambda x: ("neg", x)),
        values.map(lambda x: ("not", x)),
        st.tuples(st.sampled_from(["and", "or"]), values, values).map(lambda x: (x[0], x[1], x[2])),
        st.tuples(values, values).map(lambda x: ("index", *x)),
        st.tuples(values, st.sampled_from(KEYS)).map(lambda x: ("field", *x)),
        st.tuples(maps, st.sampled_from(KEYS)).map(lambda x: ("field", *x)),
        values.map(lambda x: ("len", x)),
        st.tuples(values, values).map(lambda x: ("contains", *x)),
    )
)
values: st.SearchStrategy = st.deferred(lambda: st.one_of(nums, strs, bools, lit(st.none()), lists, maps))
trees = st.one_of(values, values, ill_typed)  # an ill-typed node at the top, over well-typed operands


def same_value(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 is not 1.0, true is not 1)."""
    if type(a) is not type(b):
        return False
    if type(a) is list:
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    return a == b


def dal_eval(source: str, max_steps: int = 100_000) -> tuple[str, Any]:
    """("ok", value) via `finish(value)`, or ("error", kind)."""
    checked, errors = check_source(source, "prop.dal")
    if errors:
        return "error", errors[0].kind
    assert checked is not None
    out: list[str] = []
    outcome = Engine(Runtime(max_steps=max_steps, host=NullHost(out.append))).execute(checked)
    if outcome.error is not None:
        assert not isinstance(outcome.error, InternalError), outcome.error.message
        return "error", outcome.error.kind
    assert outcome.ended_by == "finish", outcome
    return "ok", outcome.result


@settings(SETTINGS, max_examples=400)
@given(trees)
def test_differential_expressions_agree_with_the_oracle(tree: tuple) -> None:
    source = f"finish({to_source(tree)})\n"
    try:
        expected: tuple[str, Any] = ("ok", oracle(tree))
    except Oops as e:
        expected = ("error", e.kind)
    got = dal_eval(source)
    if expected[0] == "ok" and got[0] == "ok":
        assert same_value(got[1], expected[1]), (source, got, expected)
    else:
        assert got == expected, source


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("1 + \"a\"", ("error", "type")),
        ("true + 1", ("error", "type")),
        ("7 / 2", ("ok", 3.5)),
        ("-7 % 3", ("ok", 2)),
        ("1 == 1.0", ("ok", True)),
        ("true == 1", ("ok", False)),
        ("false and (1 / 0 == 1)", ("ok", False)),
        ("[1, {\"a\": [2]}] == [1.0, {\"a\": [2.0]}]", ("ok", True)),
        ("\"b\" < \"a\"", ("ok", False)),
        ("1 < \"a\"", ("error", "type")),
        ("{\"a\": 1}.b", ("error", "runtime")),
        ("0.5 + 1" + "0" * 400, ("error", "runtime")),  # an integer too large to meet a float
        ("1" + "0" * 400 + " - 0.5", ("error", "runtime")),
        ("1" + "0" * 400 + " > 0.5", ("ok", True)),
    ],
)
def test_differential_fixed_points(expr: str, expected: tuple[str, Any]) -> None:
    """The oracle and DAL on hand-picked trees the brief is explicit about."""
    got = dal_eval(f"finish({expr})\n")
    assert got[0] == expected[0]
    assert same_value(got[1], expected[1]) if got[0] == "ok" else got == expected


# =================================================================================================
# 2. Round trip: unparse -> parse, and fmt idempotence
# =================================================================================================

NAMES = st.sampled_from(["a", "b", "xs", "state", "f", "_tmp", "len", "print"])
identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda s: s not in KEYWORDS)
literal_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(0, 10**30),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
expr_leaves = st.one_of(literal_values.map(ast.Literal), NAMES.map(ast.Name), identifiers.map(ast.Name))


def _chain(children: st.SearchStrategy) -> st.SearchStrategy:
    """Postfix chains rooted at a name: what a statement may start with."""
    return st.recursive(
        NAMES.map(ast.Name),
        lambda inner: st.one_of(
            st.tuples(inner, st.lists(children, max_size=2)).map(lambda x: ast.Call(x[0], tuple(x[1]))),
            st.tuples(inner, identifiers).map(lambda x: ast.Field(*x)),
            st.tuples(inner, children).map(lambda x: ast.Index(*x)),
            st.tuples(inner, st.none() | children, st.none() | children).map(lambda x: ast.Slice(*x)),
        ),
        max_leaves=3,
    )


def _expr_extend(children: st.SearchStrategy, functions: bool = True) -> st.SearchStrategy:
    fn_exprs = st.tuples(st.lists(identifiers, max_size=3, unique=True), children).map(
        lambda x: ast.FnExpr(tuple(x[0]), ast.Block((ast.Return(x[1]),)))
    )
    return st.one_of(
        st.lists(children, max_size=3).map(lambda xs: ast.ListLit(tuple(xs))),
        st.lists(st.tuples(st.text(max_size=4), children), max_size=3, unique_by=lambda kv: kv[0]).map(
            lambda kvs: ast.MapLit(tuple(kvs))
        ),
        st.tuples(st.sampled_from(["-", "not"]), children).map(lambda x: ast.Unary(*x)),
        st.tuples(st.sampled_from(sorted(["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">="])), children,
                  children).map(lambda x: ast.Binary(*x)),
        st.tuples(st.sampled_from(["and", "or"]), children, children).map(lambda x: ast.Logical(*x)),
        st.tuples(children, st.lists(children, max_size=3)).map(lambda x: ast.Call(x[0], tuple(x[1]))),
        st.tuples(children, identifiers).map(lambda x: ast.Field(*x)),
        st.tuples(children, children).map(lambda x: ast.Index(*x)),
        st.tuples(children, st.none() | children, st.none() | children).map(lambda x: ast.Slice(*x)),
        *([fn_exprs] if functions else []),
    )


exprs = st.recursive(expr_leaves, _expr_extend, max_leaves=8)


def _block(stmts: st.SearchStrategy, ret: bool = True) -> st.SearchStrategy:
    body = st.lists(stmts, max_size=3)
    end = st.one_of(st.none(), st.none(), st.builds(ast.Return, st.one_of(st.none(), exprs))) if ret else st.none()
    return st.tuples(body, end).map(lambda x: ast.Block(tuple(x[0]) + ((x[1],) if x[1] is not None else ())))


simple_stmts = st.one_of(
    st.builds(ast.Let, identifiers, exprs),
    st.builds(ast.Assign, NAMES.map(ast.Name), exprs),
    st.builds(ast.Assign, st.tuples(_chain(exprs), identifiers).map(lambda x: ast.Field(*x)), exprs),
    st.builds(ast.Assign, st.tuples(_chain(exprs), exprs).map(lambda x: ast.Index(*x)), exprs),
    st.tuples(_chain(exprs), st.lists(exprs, max_size=2)).map(lambda x: ast.ExprStmt(ast.Call(x[0], tuple(x[1])))),
    st.just(ast.Break()),
    st.just(ast.Continue()),
)


def _stmt_extend(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.lists(st.tuples(exprs, _block(children)), min_size=1, max_size=3),
                  st.one_of(st.none(), _block(children))).map(lambda x: ast.If(tuple(x[0]), x[1])),
        st.builds(ast.While, exprs, _block(children)),
        st.builds(ast.For, identifiers, exprs, _block(children)),
        st.builds(ast.FnDef, identifiers, st.lists(identifiers, max_size=3, unique=True).map(tuple), _block(children)),
    )


stmts = st.recursive(simple_stmts, _stmt_extend, max_leaves=6)
programs = st.lists(stmts, max_size=5).map(lambda xs: ast.Program(tuple(xs)))


@settings(SETTINGS, max_examples=80)
@given(programs)
def test_round_trip_unparse_then_parse(program: ast.Program) -> None:
    text = unparse(program)
    assert parse(text) == program, text


@SETTINGS
@given(exprs)
def test_round_trip_expressions(e: ast.Expr) -> None:
    program = ast.Program((ast.Let("x", e),))
    assert parse(unparse(program)) == program


@settings(SETTINGS, max_examples=60)
@given(programs, st.data())
def test_format_is_idempotent_and_keeps_the_program(program: ast.Program, data: st.DataObject) -> None:
    lines = unparse(program).split("\n")
    # sprinkle comments: at the end of lines and on lines of their own
    out = []
    for line in lines:
        if data.draw(st.booleans(), label="comment before"):
            out.append("# note " + data.draw(st.text(alphabet="ab #\"", max_size=5), label="text"))
        out.append(line + ("  # end" if line.strip() and data.draw(st.booleans(), label="trailing") else ""))
        if data.draw(st.integers(0, 4), label="blank") == 0:
            out.append("")
    source = "\n".join(out)
    once = format_source(source)
    assert parse(once) == program
    assert format_source(once) == once
    assert once.count("#") >= source.count("# note") + source.count("# end")


@pytest.mark.parametrize(
    "source",
    [
        "let a = -(-1)\nlet b = - -1\nlet c = not not true\n",
        "let x = (1 + 2) * 3 - -4 % 5\nlet y = not (a == b) or c and d\n",
        'let f = fn(x) { return fn() { return x } }\nprint(f(1)())\n',
        "if a { } else if b { } else { }\nwhile a and b < 3 { break }\nfor x in xs { continue }\n",
    ],
)
def test_format_fixed_points(source: str) -> None:
    once = format_source(source)
    assert parse(once) == parse(source)
    assert format_source(once) == once


# =================================================================================================
# 3. No input makes the host raise anything but a DAL error
# =================================================================================================

TOKENS = [
    "let", "fn", "if", "else", "while", "for", "in", "break", "continue", "return", "and", "or", "not",
    "true", "false", "null", "x", "y", "f", "print", "len", "append", "range", "run", "str", "int",
    "(", ")", "[", "]", "{", "}", ",", ".", ":", ";", "=", "==", "!=", "<", ">=", "+", "-", "*", "/", "%",
    "0", "1", "7", "2.5", '"s"', '"a\\n"', "#c\n", "\n", "'", "!", "&&", '"', "\\", "1e400", "\t",
]
token_soup = st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)
random_text = st.one_of(
    st.text(max_size=60),
    token_soup,
    st.binary(max_size=60).map(lambda b: b.decode("utf-8", "replace")),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
)


def exercise(source: str, max_steps: int = 2000) -> None:
    """Parse, check, format and run `source`: only DAL errors may come out, and never an internal one."""
    try:
        parse(source, "fuzz.dal")
    except DalSyntaxError as e:
        assert e.span.line >= 1 and e.message
    try:
        format_source(source, "fuzz.dal")
    except DalSyntaxError:
        pass
    checked, errors = check_source(source, "fuzz.dal")
    for e in errors:
        assert isinstance(e, DalError) and not isinstance(e, InternalError), e
        assert e.filename == "fuzz.dal"
    if checked is None:
        return
    out: list[str] = []
    outcome = Engine(Runtime(max_steps=max_steps, timeout=5, host=NullHost(out.append))).execute(checked)
    if outcome.error is not None:
        assert not isinstance(outcome.error, InternalError), outcome.error.message
        from dal.core.diagnostics import render

        render(outcome.error)  # rendering never fails either


@settings(SETTINGS, max_examples=300)
@given(random_text)
def test_no_text_crashes_the_host(source: str) -> None:
    exercise(source)


PRELUDE = 'let a = 1\nlet b = "s"\nlet xs = [1, 2]\nlet state = {"k": 1}\nfn f(x) { return x }\n'


# No loops and no functions: every statement runs at most once, so values stay small (a loop of
# `s = s + s` would be a test of the machine's memory, not of DAL).
plain_exprs = st.recursive(expr_leaves, lambda c: _expr_extend(c, functions=False), max_leaves=8)
straight_stmts = st.recursive(
    st.one_of(
        st.builds(ast.Let, NAMES, plain_exprs),
        st.builds(ast.Assign, NAMES.map(ast.Name), plain_exprs),
        st.builds(ast.Assign, st.tuples(NAMES.map(ast.Name), identifiers).map(lambda x: ast.Field(*x)), plain_exprs),
        st.builds(ast.Assign, st.tuples(NAMES.map(ast.Name), plain_exprs).map(lambda x: ast.Index(*x)), plain_exprs),
        st.tuples(NAMES.map(ast.Name), st.lists(plain_exprs, max_size=2)).map(
            lambda x: ast.ExprStmt(ast.Call(x[0], tuple(x[1])))
        ),
    ),
    lambda children: st.builds(
        ast.If,
        st.lists(st.tuples(plain_exprs, st.lists(children, max_size=3).map(lambda b: ast.Block(tuple(b)))),
                 min_size=1, max_size=2).map(tuple),
        st.one_of(st.none(), st.lists(children, max_size=3).map(lambda b: ast.Block(tuple(b)))),
    ),
    max_leaves=8,
)


@settings(SETTINGS, max_examples=50)
@given(st.lists(straight_stmts, max_size=6).map(lambda xs: ast.Program(tuple(xs))))
def test_no_valid_program_crashes_the_host(program: ast.Program) -> None:
    exercise(PRELUDE + unparse(program), max_steps=500)


# =================================================================================================
# 4. Step counts are deterministic
# =================================================================================================

loop_programs = st.lists(
    st.sampled_from([
        "for i in range(5) { total = total + i }",
        "let j = 0\nwhile j < 4 and total > -1 { j = j + 1 total = total + j }",
        "if total % 2 == 0 { append(items, total) } else { items = items + [total] }",
        'fn g(n) { if n < 1 { return 0 } return n + g(n - 1) }\ntotal = total + g(5)',
        'for k in {"x": 1, "y": 2} { items = append(items, k) }',
        'let words = split("a,b,c", ",")\nfor w in words { if w == "b" { continue } print(w) }',
        "while total < 1000 { total = total * 2 + 1 if total > 500 { break } }",
        "print(json(items), len(str(total)))",
    ]),
    min_size=1,
    max_size=6,
)


def steps_of(source: str) -> tuple[int, str, str]:
    checked, errors = check_source(source, "steps.dal")
    assert not errors, errors
    assert checked is not None
    out: list[str] = []
    rt = Runtime(max_steps=100_000, host=NullHost(out.append))
    outcome = Engine(rt).execute(checked)
    return rt.steps, "".join(out), outcome.status


@settings(SETTINGS, max_examples=40)
@given(loop_programs)
def test_same_script_same_step_count(parts: list[str]) -> None:
    source = "let total = 0\nlet items = []\n" + "\n".join(
        p.replace("fn g(", f"fn g{i}(").replace("g(n - 1)", f"g{i}(n - 1)").replace("+ g(5)", f"+ g{i}(5)")
        .replace("let j", f"let j{i}").replace("j ", f"j{i} ").replace("j + 1", f"j{i} + 1")
        .replace("let words", f"let words{i}").replace("in words", f"in words{i}")
        for i, p in enumerate(parts)
    )
    first = steps_of(source)
    assert first[0] > 0
    assert steps_of(source) == first
    assert steps_of(source) == first


def test_documented_step_counts() -> None:
    """The costs docs/language.md states: a statement is 1 plus its expression nodes."""
    assert steps_of("let x = 1\n")[0] == 2  # let + literal
    assert steps_of("let x = 1 + 2\n")[0] == 4  # let + binary + two literals
    assert steps_of('print("a")\n')[0] == 4  # statement + call + callee + argument
    # while: 1 for the statement, then 1 + condition nodes per check (4 checks), plus the bodies
    assert steps_of("let i = 0\nwhile i < 3 {\n    i = i + 1\n}\n")[0] == 2 + 1 + 4 * 4 + 3 * 4
    # for: 1 + iterable nodes, then 1 per item, plus the bodies
    assert steps_of("for x in [1, 2] {\n}\n")[0] == 1 + 3 + 2


def test_step_count_is_the_same_in_separate_processes(dal, tmp_path: Path) -> None:
    script = tmp_path / "s.dal"
    script.write_text(
        'let m = {}\nfor i in range(50) { m[str(i % 7)] = i }\nlet ks = keys(m)\n'
        'fn fib(n) { if n < 2 { return n } return fib(n - 1) + fib(n - 2) }\nprint(fib(12), ks)\n',
        encoding="utf-8",
    )
    counts = set()
    for seed in ("1", "2"):
        p = dal.cli("run", "s.dal", cwd=tmp_path, env={"PYTHONHASHSEED": seed})
        assert p.returncode == 0, p.stderr
        m = re.search(r"([\d,]+) steps", p.stderr)
        assert m, p.stderr
        counts.add(m.group(1))
    assert len(counts) == 1
