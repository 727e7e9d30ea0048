"""DAL values and the operations every part of the runtime shares: display, equality, type names.

DAL values are plain Python objects: None, bool, int, float, str, list, dict (string keys,
insertion order), plus `Function` and `Builtin` below and the run result of `run()`. Lists and maps
are shared by reference, as in JavaScript: `let b = a` makes `b` the same list as `a`.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from typing import Any

from dal.errors import DalRuntimeError
from dal.records import Record
from dal.syntax.ast import Span

# DAL integers have arbitrary precision: they convert to and from text at any length.
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)


class Cell:
    """A variable captured by a closure. Each entry of its block makes a new one."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()


class Function(Record):
    """A user function: compiled body, captured cells and where it was defined."""

    __slots__ = ("name", "params", "nslots", "body", "cells", "span", "filename", "param_slots", "param_cells")

    def __init__(
        self,
        name: str,
        params: tuple[str, ...],
        nslots: int,
        body: Callable[[list[Any]], Any],
        cells: tuple[Cell, ...],
        span: Span,
        filename: str,
        param_slots: tuple[int, ...] = (),
        param_cells: tuple[bool, ...] = (),
    ) -> None:
        self.name = name
        self.params = params
        self.nslots = nslots
        self.body = body
        self.cells = cells
        self.span = span
        self.filename = filename
        self.param_slots = param_slots
        self.param_cells = param_cells

    def dal_repr(self) -> str:
        return f"<fn {self.name}>"


class Builtin(Record):
    """A builtin function: `impl(rt, args, span)` with its arity and documentation."""

    __slots__ = ("name", "impl", "min_args", "max_args", "signature", "doc")

    def __init__(
        self, name: str, impl: Callable[..., Any], min_args: int, max_args: int | None, signature: str, doc: str
    ) -> None:
        self.name = name
        self.impl = impl
        self.min_args = min_args
        self.max_args = max_args
        self.signature = signature
        self.doc = doc

    def dal_repr(self) -> str:
        return f"<builtin {self.name}>"


def type_name(v: Any) -> str:
    t = type(v)
    if v is None:
        return "null"
    if t is bool:
        return "boolean"
    if t is int:
        return "integer"
    if t is float:
        return "float"
    if t is str:
        return "string"
    if t is list:
        return "list"
    if t is dict:
        return "map"
    if t is Function or t is Builtin:
        return "function"
    if hasattr(v, "summary"):
        return "run result"
    return t.__name__


def a_type_name(v: Any) -> str:
    """The type name with its article, for messages: `an integer`, `a list`, `null`."""
    return with_article(type_name(v))


def with_article(name: str) -> str:
    if name == "null":
        return name
    return ("an " if name[0] in "aeiou" else "a ") + name


def is_number(v: Any) -> bool:
    t = type(v)
    return t is int or t is float


def _float_text(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return "null"
    return repr(x)


CYCLE = "<cycle>"  # what a list or map that contains itself becomes in a JSON copy


def to_json_value(v: Any, _open: set[int] | None = None) -> Any:
    """A JSON-serialisable copy: run results become their summary, functions their name, and a list or
    map met again inside itself the string `<cycle>`."""
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if math.isfinite(v) else None
    if t is list or t is dict:
        if _open is None:
            _open = set()
        if id(v) in _open:
            return CYCLE
        _open.add(id(v))
        try:
            if t is list:
                return [to_json_value(x, _open) for x in v]
            return {k: to_json_value(x, _open) for k, x in v.items()}
        finally:
            _open.discard(id(v))
    if hasattr(v, "summary"):
        return v.summary
    if hasattr(v, "dal_repr"):
        return v.dal_repr()
    return str(v)


def _json_text(v: Any, out: list[str], open_: set[int]) -> None:
    t = type(v)
    if v is None:
        out.append("null")
    elif t is bool:
        out.append("true" if v else "false")
    elif t is int:
        out.append(str(v))
    elif t is float:
        out.append(_float_text(v))
    elif t is str:
        out.append(json.dumps(v, ensure_ascii=False))
    elif t is list or t is dict:
        if id(v) in open_:
            raise DalRuntimeError(
                f"cannot show {a_type_name(v)} that contains itself",
                help="a list or map was appended or assigned into itself",
            )
        open_.add(id(v))
        if t is list:
            out.append("[")
            for i, x in enumerate(v):
                if i:
                    out.append(", ")
                _json_text(x, out, open_)
            out.append("]")
        else:
            out.append("{")
            for i, (k, x) in enumerate(v.items()):
                if i:
                    out.append(", ")
                out.append(json.dumps(k, ensure_ascii=False))
                out.append(": ")
                _json_text(x, out, open_)
            out.append("}")
        open_.discard(id(v))
    elif hasattr(v, "summary"):
        out.append(json.dumps(v.summary, ensure_ascii=False))
    elif hasattr(v, "dal_repr"):
        out.append(v.dal_repr())
    else:  # pragma: no cover - every DAL value is handled above
        out.append(json.dumps(str(v)))


def json_text(v: Any) -> str:
    """Compact JSON as `print` shows it: `{"a": 1, "b": [true, null]}`."""
    out: list[str] = []
    try:
        _json_text(v, out, set())
    except RecursionError:
        raise DalRuntimeError(f"{a_type_name(v)} nested this deeply cannot be shown") from None
    return "".join(out)


def display(v: Any) -> str:
    """How `print` and `str` show a value: strings raw, run results as their summary, else JSON."""
    if type(v) is str:
        return v
    if hasattr(v, "summary") and type(v) not in (list, dict):
        return v.summary
    if type(v) in (list, dict) or v is None or type(v) in (bool, int, float):
        return json_text(v)
    if hasattr(v, "dal_repr"):
        return v.dal_repr()
    return json_text(v)


def dal_repr(v: Any) -> str:
    """DAL literal form, as the REPL echoes an expression: strings quoted."""
    if type(v) is str:
        return json.dumps(v, ensure_ascii=False)
    if hasattr(v, "summary") and type(v) not in (list, dict):
        return f"<run result: {v.summary}>"
    return json_text(v)


def dal_eq(a: Any, b: Any, _open: set[tuple[int, int]] | None = None) -> bool:
    """Structural equality. Booleans are not numbers; a run result equals its summary. Lists and maps
    that contain themselves compare without end-less recursion: a pair already being compared further
    up counts as equal."""
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if (ta is int or ta is float) and (tb is int or tb is float):
        return a == b
    if ta is str and tb is str:
        return a == b
    if (ta is list and tb is list) or (ta is dict and tb is dict):
        if len(a) != len(b):
            return False
        pair = (id(a), id(b))
        if _open is None:
            _open = set()
        elif pair in _open:
            return True
        _open.add(pair)
        try:
            if ta is list:
                return all(dal_eq(x, y, _open) for x, y in zip(a, b, strict=True))
            for k, x in a.items():
                if k not in b or not dal_eq(x, b[k], _open):
                    return False
            return True
        finally:
            _open.discard(pair)
    sa = getattr(a, "summary", None) if ta not in (list, dict) else None
    sb = getattr(b, "summary", None) if tb not in (list, dict) else None
    if sa is not None or sb is not None:
        return (sa if sa is not None else a) == (sb if sb is not None else b)
    return False
