"""Operators and element access with DAL's strict types: the slow paths behind the compiler's fast ones.

Every function takes the span of the expression and the compiler (to build located errors).
"""

from __future__ import annotations

import math
from itertools import islice
from typing import Any

from dal.core.errors import DalRuntimeError, DalTypeError
from dal.eval.values import INT_LIMIT, a_type_name, dal_eq, int_overflow, quote, type_name

__all__ = ["BINARY", "dal_eq", "get_field", "get_item", "get_slice", "iter_items", "neg", "set_item"]


def _num(v: Any) -> bool:
    t = type(v)
    return t is int or t is float


def _finite(r: Any, span: Any, comp: Any) -> Any:
    if type(r) is float and not math.isfinite(r):
        raise comp._err(DalRuntimeError, "float overflow: the result is too large", span)
    return r


def _int(r: Any, span: Any, comp: Any) -> Any:
    """An integer result within DAL's size (MAX_INT_DIGITS digits), else a located overflow error."""
    if type(r) is int and not -INT_LIMIT < r < INT_LIMIT:
        raise _sized(int_overflow(), span, comp)
    return r


def _sized(err: Any, span: Any, comp: Any) -> Any:
    """A size error (built without a place) located at `span`."""
    err.located(span, comp.filename)
    err.source = comp.source
    return err


def add(a: Any, b: Any, span: Any, comp: Any) -> Any:
    ta, tb = type(a), type(b)
    if _num(a) and _num(b):
        try:
            return _int(_finite(a + b, span, comp), span, comp)
        except OverflowError:  # an integer too large to meet a float
            raise comp._err(DalRuntimeError, "number too large for this operation", span) from None
    if ta is str and tb is str:
        n = len(a) + len(b)
        if n > comp.rt.limits.max_string:
            raise _sized(comp.rt.limits.refuse("`+`", "string", n), span, comp)
        return a + b
    if ta is list and tb is list:
        n = len(a) + len(b)
        if n > comp.rt.limits.max_items:
            raise _sized(comp.rt.limits.refuse("`+`", "list", n), span, comp)
        return a + b
    if ta is str or tb is str:
        other = b if ta is str else a
        hint = "str(...)" if other is not None else "str(...) or a default"
        raise comp._err(
            DalTypeError,
            f"cannot add {type_name(a)} and {type_name(b)}: `+` joins two strings, two lists or two numbers",
            span,
            help=f"convert with {hint}, e.g. \"attempt \" + str(n)",
        )
    raise comp._err(
        DalTypeError,
        f"cannot add {type_name(a)} and {type_name(b)}: `+` joins two strings, two lists or two numbers",
        span,
        help="convert one side with str(...), int(...) or float(...)",
    )


def _arith(symbol: str, fn: Any) -> Any:
    def op(a: Any, b: Any, span: Any, comp: Any) -> Any:
        if _num(a) and _num(b):
            try:
                return _int(_finite(fn(a, b), span, comp), span, comp)
            except ZeroDivisionError:
                raise comp._err(DalRuntimeError, "division by zero", span) from None
            except OverflowError:
                raise comp._err(DalRuntimeError, "number too large for this operation", span) from None
        raise comp._err(
            DalTypeError,
            f"`{symbol}` needs two numbers, got {type_name(a)} and {type_name(b)}",
            span,
            help="convert with int(...) or float(...)" if type(a) is str or type(b) is str else None,
        )

    return op


def _compare(symbol: str, fn: Any) -> Any:
    def op(a: Any, b: Any, span: Any, comp: Any) -> Any:
        if (_num(a) and _num(b)) or (type(a) is str and type(b) is str):
            return fn(a, b)
        raise comp._err(
            DalTypeError,
            f"`{symbol}` compares two numbers or two strings, got {type_name(a)} and {type_name(b)}",
            span,
        )

    return op


def poller(comp: Any, span: Any) -> Any:
    """What a long walk over a value calls now and then (stop there if the script was asked to stop), and
    charges for the long strings it compares."""
    return comp.rt.meter(span)


def _eq(a: Any, b: Any, span: Any, comp: Any) -> bool:
    if type(a) is list or type(a) is dict:
        return dal_eq(a, b, poller(comp, span))
    return dal_eq(a, b)


def _ne(a: Any, b: Any, span: Any, comp: Any) -> bool:
    return not _eq(a, b, span, comp)


BINARY = {
    "+": add,
    "-": _arith("-", lambda a, b: a - b),
    "*": _arith("*", lambda a, b: a * b),
    "/": _arith("/", lambda a, b: a / b),
    "%": _arith("%", lambda a, b: a % b),
    "<": _compare("<", lambda a, b: a < b),
    "<=": _compare("<=", lambda a, b: a <= b),
    ">": _compare(">", lambda a, b: a > b),
    ">=": _compare(">=", lambda a, b: a >= b),
    "==": _eq,
    "!=": _ne,
}


def neg(v: Any, span: Any, comp: Any) -> Any:
    if _num(v):
        return -v
    raise comp._err(DalTypeError, f"unary `-` needs a number, got {type_name(v)}", span)


def _missing_key(m: dict[str, Any], key: str, span: Any, comp: Any) -> Exception:
    names = ", ".join(quote(k, 40) for k in islice(m, 12)) + (", ..." if len(m) > 12 else "")
    return comp._err(
        DalRuntimeError,
        f"map has no key {quote(key)}",
        span,
        help=f"its keys are: {names}" if m else "the map is empty",
    )


def get_field(o: Any, key: str, span: Any, comp: Any) -> Any:
    if type(o) is dict:
        raise _missing_key(o, key, span, comp)
    getter = getattr(o, "dal_field", None)
    if getter is not None:
        try:
            return getter(key)
        except KeyError:
            raise comp._err(
                DalRuntimeError,
                f"a run result has no field `{key}`",
                span,
                help="its fields are: ok, code, stdout, stderr, status, summary",
            ) from None
    raise comp._err(DalTypeError, f"cannot read field `{key}` of {a_type_name(o)}", span)


def _list_index(xs: Any, i: Any, span: Any, comp: Any) -> int:
    if type(i) is not int:
        raise comp._err(DalTypeError, f"a list index must be an integer, got {type_name(i)}", span)
    if i < 0 or i >= len(xs):
        raise comp._err(
            DalRuntimeError,
            f"index {i} is out of range for a {'list' if type(xs) is list else 'string'} of length {len(xs)}",
            span,
        )
    return i


def get_item(o: Any, i: Any, span: Any, comp: Any) -> Any:
    t = type(o)
    if t is list or t is str:
        return o[_list_index(o, i, span, comp)]
    if t is dict:
        if type(i) is not str:
            raise comp._err(DalTypeError, f"a map key must be a string, got {type_name(i)}", span)
        try:
            return o[i]
        except KeyError:
            raise _missing_key(o, i, span, comp) from None
    raise comp._err(DalTypeError, f"cannot index {a_type_name(o)}", span)


def get_slice(o: Any, start: Any, stop: Any, span: Any, comp: Any) -> Any:
    """`o[start:stop]` of a list (a new list, the items shared) or a string. A bound left out is the
    start or the end; a bound past the end is the end, and a start after the stop gives an empty slice;
    a negative bound is an error, as a negative index is."""
    t = type(o)
    if t is not list and t is not str:
        raise comp._err(DalTypeError, f"cannot slice {a_type_name(o)}", span, help="slice a list or a string")
    for bound in (start, stop):
        if bound is None:
            continue
        if type(bound) is not int:
            raise comp._err(DalTypeError, f"a slice bound must be an integer, got {type_name(bound)}", span)
        if bound < 0:
            raise comp._err(
                DalRuntimeError,
                f"slice bound {bound} is negative: DAL has no negative indexes",
                span,
                help="count from the end with len(...), e.g. xs[len(xs) - 3:]",
            )
    return o[start:stop]


def set_item(o: Any, i: Any, v: Any, span: Any, comp: Any, field: bool = False) -> None:
    t = type(o)
    if t is dict:
        if type(i) is not str:
            raise comp._err(DalTypeError, f"a map key must be a string, got {type_name(i)}", span)
        o[i] = v
        return
    if t is list and not field:
        o[_list_index(o, i, span, comp)] = v
        return
    what = f"field `{i}`" if field else "an element"
    raise comp._err(DalTypeError, f"cannot set {what} of {a_type_name(o)}", span)


def iter_items(v: Any, span: Any, comp: Any) -> list[Any]:
    """What `for` walks: a copy of a list, the keys of a map, the characters of a string (each one a
    new value, so their number is bounded by the memory budget)."""
    t = type(v)
    if t is str and len(v) > comp.rt.limits.max_new:
        raise _sized(comp.rt.limits.refuse("`for` over a string", "new", len(v)), span, comp)
    if t is list or t is dict or t is str:
        return list(v)
    raise comp._err(DalTypeError, f"cannot loop over {a_type_name(v)}", span, help="loop over a list, map or string")
