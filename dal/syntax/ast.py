"""The DAL abstract syntax tree.

Every node is a frozen attrs class. Each carries a `span` that equality ignores, so a tree built by
hand compares equal to one the parser built. The module reads like the language's spec.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class Span:
    """A source region: 1-based lines and columns, 0-based character offsets (end exclusive)."""

    line: int
    column: int
    end_line: int
    end_column: int
    start: int
    end: int


NO_SPAN = Span(0, 0, 0, 0, 0, 0)


def _span() -> Any:
    return attrs.field(default=NO_SPAN, eq=False, repr=False, kw_only=True)


# --- expressions -----------------------------------------------------------------------------


@attrs.frozen
class Literal:
    """`null`, `true`, `false`, an integer, a float or a string."""

    value: None | bool | int | float | str
    span: Span = _span()


@attrs.frozen
class Name:
    id: str
    span: Span = _span()


@attrs.frozen
class ListLit:
    items: tuple[Expr, ...]
    span: Span = _span()


@attrs.frozen
class MapLit:
    """`{"k": v, ...}`: keys are string literals, order is kept."""

    entries: tuple[tuple[str, Expr], ...]
    span: Span = _span()


@attrs.frozen
class Unary:
    """`-x` or `not x`."""

    op: str
    operand: Expr
    span: Span = _span()


@attrs.frozen
class Binary:
    """Arithmetic (`+ - * / %`) and comparison (`== != < <= > >=`)."""

    op: str
    left: Expr
    right: Expr
    span: Span = _span()


@attrs.frozen
class Logical:
    """`and` / `or`: short-circuit, both operands must be booleans."""

    op: str
    left: Expr
    right: Expr
    span: Span = _span()


@attrs.frozen
class Call:
    callee: Expr
    args: tuple[Expr, ...]
    span: Span = _span()


@attrs.frozen
class Field:
    """`obj.name`: a map key read (or a field of a run result)."""

    obj: Expr
    name: str
    span: Span = _span()


@attrs.frozen
class Index:
    obj: Expr
    index: Expr
    span: Span = _span()


@attrs.frozen
class FnExpr:
    """An anonymous function: `fn(a, b) { ... }`."""

    params: tuple[str, ...]
    body: Block
    span: Span = _span()


Expr = Literal | Name | ListLit | MapLit | Unary | Binary | Logical | Call | Field | Index | FnExpr


# --- statements ------------------------------------------------------------------------------


@attrs.frozen
class Block:
    body: tuple[Stmt, ...]
    span: Span = _span()


@attrs.frozen
class Let:
    name: str
    value: Expr
    span: Span = _span()


@attrs.frozen
class Assign:
    """`x = e`, `m.k = e`, `m["k"] = e`, `xs[0] = e`: the target is a Name, Field or Index."""

    target: Name | Field | Index
    value: Expr
    span: Span = _span()


@attrs.frozen
class ExprStmt:
    """A call used as a statement (the grammar allows no other expression here)."""

    expr: Call
    span: Span = _span()


@attrs.frozen
class If:
    """`if c { } else if c { } else { }`: `branches` holds each (condition, block) in order."""

    branches: tuple[tuple[Expr, Block], ...]
    orelse: Block | None
    span: Span = _span()


@attrs.frozen
class While:
    cond: Expr
    body: Block
    span: Span = _span()


@attrs.frozen
class For:
    var: str
    iterable: Expr
    body: Block
    span: Span = _span()


@attrs.frozen
class FnDef:
    name: str
    params: tuple[str, ...]
    body: Block
    span: Span = _span()


@attrs.frozen
class Break:
    span: Span = _span()


@attrs.frozen
class Continue:
    span: Span = _span()


@attrs.frozen
class Return:
    """Always the last statement of its block; `value` is None for a bare `return`."""

    value: Expr | None
    span: Span = _span()


Stmt = Let | Assign | ExprStmt | If | While | For | FnDef | Break | Continue | Return


@attrs.frozen
class Program:
    body: tuple[Stmt, ...]
    span: Span = _span()
