"""DAL values and the operations every part of the runtime shares: display, equality, type names.

DAL values are plain Python objects: None, bool, int, float, str, list, dict (string keys,
insertion order), plus `Function` and `Builtin` below and the run result of `run()`. Lists and maps
are shared by reference, as in JavaScript: `let b = a` makes `b` the same list as `a`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring as _encode_str
from typing import Any

from dal.core.defaults import MAX_MEMORY as DEFAULT_MAX_MEMORY
from dal.core.errors import BudgetExhausted, DalRuntimeError, DalTypeError
from dal.core.jsontext import escape_surrogates
from dal.core.records import Record
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
    """A builtin function: `impl(rt, args, span)` with its arity and documentation. A builtin that `calls`
    functions it is given (`sort`'s key) is `impl(rt, args, span, call)`, where `call(fn, args, span)`
    calls a DAL function as a call in the script would."""

    __slots__ = ("name", "impl", "min_args", "max_args", "signature", "doc", "calls")

    def __init__(
        self, name: str, impl: Callable[..., Any], min_args: int, max_args: int | None, signature: str, doc: str,
        calls: bool = False,
    ) -> None:
        self.name = name
        self.impl = impl
        self.min_args = min_args
        self.max_args = max_args
        self.signature = signature
        self.doc = doc
        self.calls = calls

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


# --- sizes ---------------------------------------------------------------------------------------
# A DAL integer has at most MAX_INT_DIGITS decimal digits: CPython multiplies, divides and converts
# integers to text in time that grows faster than their size (printing a 300,000-digit number takes a
# second), so one step on a larger one could take unbounded time. The limit is the language's, like
# the float range; it is not a budget.
MAX_INT_DIGITS = 10_000
INT_LIMIT = 10**MAX_INT_DIGITS  # |v| < INT_LIMIT: at most MAX_INT_DIGITS digits


def int_overflow() -> DalRuntimeError:
    return DalRuntimeError(
        f"integer overflow: the result would have more than {MAX_INT_DIGITS:,} digits",
        help=f"DAL integers have at most {MAX_INT_DIGITS:,} digits",
    )


def check_int(v: int) -> int:
    if -INT_LIMIT < v < INT_LIMIT:
        return v
    raise int_overflow()


def size_text(n: int) -> str:
    """A byte count as `--max-memory` takes it: `1G`, `512M`, `64K`, else bytes."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n:,} bytes"


class Limits(Record):
    """The sizes one step may build, derived from the run's memory budget (`--max-memory`) so that no
    single step allocates more than about half of it: a string of at most budget/8 characters (up to 4
    bytes each), a list of at most budget/16 items (8 bytes a reference), and at most budget/128 new
    values made at once by one builtin (range, split, parse_json, a `for` over a string: some 64 bytes
    each). All values together are watched by the runtime's watchdog (dal.eval.runtime)."""

    __slots__ = ("max_memory", "max_string", "max_items", "max_new")

    def __init__(self, max_memory: int = DEFAULT_MAX_MEMORY) -> None:
        self.max_memory = max_memory
        self.max_string = max(1, max_memory // 8)
        self.max_items = max(1, max_memory // 16)
        self.max_new = max(1, max_memory // 128)

    def refuse(self, what: str, kind: str, n: int | None = None) -> BudgetExhausted:
        """The error for `what` (e.g. "`+`", "`join`") building `n` units of `kind` (string, list, new)."""
        if kind == "string":
            detail = (f"{what} would make a string of {n:,} characters; one string may hold {self.max_string:,}"
                      if n is not None else f"{what} would make a string of more than {self.max_string:,} characters")
        elif kind == "list":
            detail = f"{what} would make a list of {n:,} items; one list may hold {self.max_items:,}"
        else:
            detail = f"{what} would make {n:,} new values at once; one step may make {self.max_new:,}"
        return BudgetExhausted(
            f"memory budget exhausted: {detail} (--max-memory {size_text(self.max_memory)})",
            budget="memory",
            help="raise --max-memory if the work is legitimate",
        )

    def string(self, n: int, what: str) -> None:
        if n > self.max_string:
            raise self.refuse(what, "string", n)

    def items(self, n: int, what: str) -> None:
        if n > self.max_items:
            raise self.refuse(what, "list", n)

    def new(self, n: int, what: str) -> None:
        if n > self.max_new:
            raise self.refuse(what, "new", n)


DEFAULT_LIMITS = Limits()


# --- text ------------------------------------------------------------------------------------------

CYCLE = "<cycle>"  # what a list or map that contains itself becomes in a JSON copy


def _quote(s: str) -> str:
    """A string as a JSON literal, a lone surrogate written as its escape: text that is valid Unicode,
    so that it can be printed, stored and passed to run()."""
    text = _encode_str(s)
    return text if text.isascii() else escape_surrogates(text)


def quote(s: str, max_chars: int = 60) -> str:
    """A string quoted for an error message: JSON-escaped, cut after `max_chars` characters."""
    if len(s) <= max_chars:
        return _quote(s)
    return _quote(s[:max_chars])[:-1] + f'…" ({len(s):,} characters)'


def to_json_value(v: Any) -> Any:
    """A JSON-serialisable copy: run results become their summary, functions their name, and a list or
    map met again inside itself the string `<cycle>`. For host data (store rows): a script's values go
    to receipts through `dal.receipts.compact`, whose work is bounded whatever their size."""
    try:
        return _to_json_value(v, set())
    except RecursionError:
        raise DalRuntimeError(f"{a_type_name(v)} nested this deeply cannot be copied") from None


def _to_json_value(v: Any, open_: set[int]) -> Any:
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if math.isfinite(v) else None
    if t is list or t is dict:
        if id(v) in open_:
            return CYCLE
        open_.add(id(v))
        try:
            if t is list:
                return [_to_json_value(x, open_) for x in v]
            return {k: _to_json_value(x, open_) for k, x in v.items()}
        finally:
            open_.discard(id(v))
    if hasattr(v, "summary"):
        return v.summary
    if hasattr(v, "dal_repr"):
        return v.dal_repr()
    return str(v)


_END = object()
_POLL_EVERY = 1 << 14  # items between two calls of `poll` in a long walk (Ctrl-C, the time budget)
_CHUNK = 1 << 10

# Work inside one builtin call that items do not measure, charged as steps (docs/language.md, "Step
# accounting"): comparing two strings of more than LONG_TEXT characters costs their shorter length in
# units, writing or reading an integer of more than LONG_INT digits costs digits² / 8 (CPython converts
# in quadratic time), and every WORK_UNIT units of one call are one step. Below those sizes a piece of
# work is cheap enough that the item count bounds it, and the counts of ordinary scripts do not change.
WORK_UNIT = 4096
LONG_TEXT = 256
LONG_INT = 1000


def int_text_work(digits: int) -> int:
    """The units of converting an integer of `digits` digits to or from text."""
    return digits * digits // 8 if digits > LONG_INT else 0


class Meter:
    """The work of one builtin call: `add(units)` charges a step for every WORK_UNIT units (through
    `charge`, which may raise: a budget, an interrupt) and polls the clock and Ctrl-C as it goes; calling
    the meter only polls. Deterministic: the charge depends on the values, never on the machine."""

    __slots__ = ("poll", "charge", "work", "charged")

    def __init__(self, poll: Callable[[], None], charge: Callable[[int], None]) -> None:
        self.poll = poll
        self.charge = charge
        self.work = 0
        self.charged = 0

    def __call__(self) -> None:
        self.poll()

    def add(self, units: int) -> None:
        self.work += units
        due = self.work // WORK_UNIT - self.charged
        if due > 0:
            self.charged += due
            self.charge(due)
        else:
            self.poll()


def _add_work(poll: Callable[[], None] | None, units: int) -> None:
    add = getattr(poll, "add", None)
    if add is not None:
        add(units)
    elif poll is not None:
        poll()


class _TooLong(Exception):
    pass


def _scalar_text(v: Any, strict: bool) -> str:
    t = type(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float:
        return _float_text(v)
    if t is str:
        return _quote(v)
    summary = getattr(v, "summary", None)
    if isinstance(summary, str):
        return _quote(summary)
    if strict:
        raise DalTypeError(
            f"json() cannot write {a_type_name(v)} (`{display(v)}`): JSON has no such value",
            help="leave functions out of what you serialise",
        )
    if hasattr(v, "dal_repr"):
        return str(v.dal_repr())
    return _quote(str(v))  # pragma: no cover - every DAL value is handled above


def json_text(
    v: Any,
    *,
    limits: Limits | None = None,
    strict: bool = False,
    cut: int | None = None,
    poll: Callable[[], None] | None = None,
    what: str = "showing this value",
) -> str:
    """Compact JSON as `print` shows it: `{"a": 1, "b": [true, null]}`.

    Iterative, so any depth works, and its work is bounded by the length of the text: past the longest
    string `limits` allow, a BudgetExhausted. With `cut`: instead, the first `cut` characters and `…`,
    and a list or map met again inside itself shows as `"<cycle>"` (for receipts and messages); without,
    such a value is an error. `strict` (json()): a function is an error instead of `<fn name>`. `poll`
    is called now and then during a long walk (Ctrl-C, the time budget)."""
    lim = limits or DEFAULT_LIMITS
    budget = cut if cut is not None else lim.max_string
    t = type(v)
    if t is not list and t is not dict:
        text = _scalar_text(v, strict)
        if len(text) > budget:
            if cut is not None:
                return text[:cut] + "…"
            raise lim.refuse(what, "string")
        return text
    chunks: list[str] = []  # the text so far, joined every _CHUNK pieces: a piece costs ~50 bytes, a char 1-4
    out: list[str] = []
    append = out.append
    size = 0
    open_: set[int] = set()
    stack: list[list[Any]] = []  # the open containers: [id, iterator of items, is a map, no item yet]
    cur = v
    try:
        while True:
            tc = type(cur)
            if tc is list or tc is dict:
                i = id(cur)
                if not cur:
                    append("[]" if tc is list else "{}")
                    size += 2
                elif i in open_:
                    if cut is None:
                        raise DalRuntimeError(
                            f"cannot show {a_type_name(cur)} that contains itself",
                            help="a list or map was appended or assigned into itself",
                        )
                    append(f'"{CYCLE}"')
                    size += len(CYCLE) + 2
                else:
                    open_.add(i)
                    if tc is list:
                        append("[")
                        stack.append([i, iter(cur), False, True])
                    else:
                        append("{")
                        stack.append([i, iter(cur.items()), True, True])
                    size += 1
            else:
                piece = _scalar_text(cur, strict)
                append(piece)
                size += len(piece)
                if tc is int and len(piece) > LONG_INT:
                    _add_work(poll, int_text_work(len(piece) - (piece[0] == "-")))
            if size > budget:
                raise _TooLong
            if len(out) >= _CHUNK:
                chunks.append("".join(out))
                out.clear()
                if poll is not None and len(chunks) % (_POLL_EVERY // _CHUNK) == 0:
                    poll()
            # the next value to write: the next item of the innermost open container
            while stack:
                frame = stack[-1]
                nxt = next(frame[1], _END)
                if nxt is _END:
                    append("}" if frame[2] else "]")
                    size += 1
                    open_.discard(frame[0])
                    stack.pop()
                    continue
                if frame[3]:
                    frame[3] = False
                else:
                    append(", ")
                    size += 2
                if frame[2]:
                    k, cur = nxt
                    piece = _quote(k) + ": "
                    append(piece)
                    size += len(piece)
                else:
                    cur = nxt
                break
            else:
                break
        if size > budget:  # the closing brackets
            raise _TooLong
    except _TooLong:
        if cut is not None:
            return ("".join(chunks) + "".join(out))[:cut] + "…"
        raise lim.refuse(what, "string") from None
    chunks.append("".join(out))
    return "".join(chunks)


def display(v: Any, limits: Limits | None = None, what: str = "showing this value",
            poll: Callable[[], None] | None = None) -> str:
    """How `print` and `str` show a value: strings raw, run results as their summary, else JSON."""
    t = type(v)
    if t is str:
        return v
    if t is int:
        text = str(v)
        if len(text) > LONG_INT:
            _add_work(poll, int_text_work(len(text) - (text[0] == "-")))
        return text
    if t is not list and t is not dict:
        summary = getattr(v, "summary", None)
        if summary is not None:
            return summary  # type: ignore[no-any-return]
        if hasattr(v, "dal_repr"):
            return str(v.dal_repr())
    return json_text(v, limits=limits, what=what, poll=poll)


def describe(v: Any, max_chars: int = 400) -> str:
    """`display(v)` cut after `max_chars` characters (`…` at the cut), for receipts and messages: its cost
    is bounded whatever the size or depth of `v`, and a value that contains itself shows `"<cycle>"`."""
    if type(v) is list or type(v) is dict:
        return json_text(v, cut=max_chars)
    text = display(v)
    return text if len(text) <= max_chars else text[:max_chars] + "…"


def dal_repr(v: Any) -> str:
    """DAL literal form, as the REPL echoes an expression: strings quoted."""
    if type(v) is str:
        return _quote(v)
    if hasattr(v, "summary") and type(v) not in (list, dict):
        return f"<run result: {v.summary}>"
    return json_text(v)


# --- equality --------------------------------------------------------------------------------------

_MISSING = object()


def _scalar_eq(a: Any, b: Any) -> bool:
    """Equality of two values that are not both lists or both maps."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if (ta is int or ta is float) and (tb is int or tb is float):
        return a == b  # type: ignore[no-any-return]
    if ta is str and tb is str:
        return a == b  # type: ignore[no-any-return]
    if ta is list or ta is dict or tb is list or tb is dict or a is _MISSING or b is _MISSING:
        return False
    sa = getattr(a, "summary", None)
    sb = getattr(b, "summary", None)
    if sa is not None or sb is not None:
        return (sa if sa is not None else a) == (sb if sb is not None else b)  # type: ignore[no-any-return]
    return a is b


def _map_pairs(x: dict[str, Any], y: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    get = y.get
    for k, xv in x.items():
        yield xv, get(k, _MISSING)


def _text_eq_work(a: str, b: str, poll: Callable[[], None]) -> None:
    """Two strings of one length are compared character by character (others at once, by length)."""
    n = len(a)
    if n > LONG_TEXT and n == len(b) and a is not b:
        _add_work(poll, n)


def dal_eq(a: Any, b: Any, poll: Callable[[], None] | None = None) -> bool:
    """Structural equality. Booleans are not numbers; a run result equals its summary.

    Iterative, so any depth works, and each pair of lists (or of maps) is compared once: a pair met
    again is either being compared further up (a value that contains itself: counted as equal) or was
    found equal already (an unequal pair ends the whole comparison). So values that share parts cost
    what their distinct parts cost, however many paths lead to them. `poll` is called now and then
    during a long walk (Ctrl-C, the time budget); a Meter is also charged for long strings compared."""
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if not ((ta is list and tb is list) or (ta is dict and tb is dict)):
        if poll is not None and ta is str and tb is str:
            _text_eq_work(a, b, poll)
        return _scalar_eq(a, b)
    seen: set[tuple[int, int]] = set()
    stack: list[Any] = [iter(((a, b),))]
    count = 0
    while stack:
        for x, y in stack[-1]:
            count += 1
            if poll is not None and count % _POLL_EVERY == 0:
                poll()
            if x is y:
                continue
            tx, ty = type(x), type(y)
            if (tx is list and ty is list) or (tx is dict and ty is dict):
                if len(x) != len(y):
                    return False
                if not x:
                    continue
            else:
                if poll is not None and tx is str and ty is str:
                    _text_eq_work(x, y, poll)
                if not _scalar_eq(x, y):
                    return False
                continue
            pair = (id(x), id(y))
            if pair in seen:
                continue
            seen.add(pair)
            if tx is list:
                stack.append(zip(x, y, strict=True))
            else:
                stack.append(_map_pairs(x, y))
            break
        else:
            stack.pop()
    return True
