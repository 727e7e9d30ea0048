"""The builtin functions, in one table.

Each builtin is `impl(rt, args, span)`, registered with its arity and a docstring whose `Example:`
runs as a test (code lines, then the expected output as `# ` lines). Builtins take their subject
first: `contains(haystack, needle)`, `split(s, sep)`. They raise DAL errors without a location;
the call site adds it.
"""

from __future__ import annotations

import functools
import json as _json
import math
import operator
import re
from collections.abc import Callable
from itertools import islice
from typing import Any

from dal.core.errors import DalRuntimeError, DalTypeError
from dal.core.jsontext import surrogate_at
from dal.eval.runtime import FailSignal, FinishSignal, Runtime, SkipSignal, StopSignal
from dal.eval.values import (
    LONG_TEXT,
    MAX_INT_DIGITS,
    Builtin,
    Function,
    Meter,
    a_type_name,
    check_int,
    dal_eq,
    describe,
    display,
    int_overflow,
    int_text_work,
    json_text,
    quote,
    type_name,
    with_article,
)
from dal.syntax.template import TemplateError, count_mismatch, parse_template

BUILTINS: dict[str, Builtin] = {}


def _cleandoc(doc: str) -> str:
    """`inspect.cleandoc(doc)`: the docstring without its common indentation and its blank first and last
    lines. Spelled out because importing inspect (ast, dis, tokenize) costs ~10 ms at every start."""
    lines = doc.expandtabs().split("\n")
    indents = [len(line) - len(line.lstrip()) for line in lines[1:] if line.lstrip()]
    margin = min(indents, default=None)
    if lines:
        lines[0] = lines[0].lstrip()
    if margin is not None:
        lines[1:] = [line[margin:] for line in lines[1:]]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def builtin(signature: str, min_args: int, max_args: int | None = -1, *, calls: bool = False) -> Callable[[Any], Any]:
    """Register `impl` under the name in `signature`; max_args -1 means exactly min_args. `calls`: impl
    calls functions it is given, and takes the compiler's `call` as a fourth argument."""

    def deco(impl: Callable[..., Any]) -> Callable[..., Any]:
        name = signature.split("(", 1)[0]
        hi = min_args if max_args == -1 else max_args
        BUILTINS[name] = Builtin(name, impl, min_args, hi, signature, _cleandoc(impl.__doc__ or ""), calls)
        return impl

    return deco


def arities() -> dict[str, tuple[int, int | None]]:
    return {name: (b.min_args, b.max_args) for name, b in BUILTINS.items()}


def _want(v: Any, t: type | tuple[type, ...], what: str, fn: str, pos: str = "") -> None:
    ok = type(v) in (t if isinstance(t, tuple) else (t,))
    if not ok:
        where = f" {pos}" if pos else ""
        raise DalTypeError(f"`{fn}` needs {with_article(what)}{where}, got {type_name(v)}")


def _want_unicode(s: str, what: str) -> None:
    """Text that leaves DAL as itself (a command, an operation key, a variable name) must be valid
    Unicode: a lone surrogate, which a string may hold as data, cannot be encoded as UTF-8."""
    i = surrogate_at(s)
    if i is not None:
        raise DalRuntimeError(
            f"{what} holds a lone surrogate (\\u{ord(s[i]):04x} at character {i}), which is not valid Unicode text",
            help="it probably came from JSON that cut a character in two; remove it first, e.g. "
            f'replace(s, "\\u{ord(s[i]):04x}", "")',
        )


def _poll(rt: Runtime, span: Any) -> Meter:
    """What a builtin's long work calls now and then (Ctrl-C, the time budget), and charges as it goes."""
    return rt.meter(span)


# --- output and conversion ------------------------------------------------------------------


@builtin("print(value, ...)", 0, None)
def _print(rt: Runtime, args: list[Any], span: Any) -> None:
    """Write the values separated by one space, then a newline. Strings print raw, run results as
    their summary, everything else as compact JSON.

    Example:
        print("attempt", 2, [true, null], {"a": 1})
        # attempt 2 [true, null] {"a": 1}
    """
    limits = rt.limits
    poll = _poll(rt, span)
    texts = [display(a, limits, "`print`", poll) for a in args]
    total = sum(map(len, texts)) + len(texts)
    if total > limits.max_string:
        raise limits.refuse("`print`", "string", total)
    rt.host.write(" ".join(texts) + "\n")


@builtin("str(value)", 1)
def _str(rt: Runtime, args: list[Any], span: Any) -> str:
    """Convert a value to the string `print` would show.

    Example:
        print(str(3) + "/" + str(4.5) + " " + str([1, "a"]))
        # 3/4.5 [1, "a"]
    """
    return display(args[0], rt.limits, "`str`", _poll(rt, span))


# The texts int() and float() accept, compiled at their first use (compiling both costs ~0.6 ms at start).
_TEXT_PATTERNS = {
    "int": (r"[+-]?[0-9]+", re.ASCII),
    "float": (r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(nan|inf|infinity)", re.ASCII | re.I),
}


@functools.cache
def _text_pattern(kind: str) -> re.Pattern[str]:
    return re.compile(*_TEXT_PATTERNS[kind])


@builtin("int(value) or int(text, default)", 1, 2)
def _int(rt: Runtime, args: list[Any], span: Any) -> Any:
    """Convert a number (truncating toward zero) or a decimal string to an integer. With a `default`, a
    string that is not an integer gives the default instead of an error.

    Example:
        print(int("42") + 1, int(3.9), int(-3.9), int("4x", null), int(" 7 ", 0))
        # 43 3 -3 null 7
    """
    v = args[0]
    t = type(v)
    if t is int:
        return v
    if t is float:
        if not math.isfinite(v):
            raise DalRuntimeError("cannot convert an infinite float to an integer")
        return int(v)
    if t is str:
        text = v.strip()
        if not _text_pattern("int").fullmatch(text):  # Python would also take "1_000" and non-ASCII digits
            if len(args) == 2:
                return args[1]
            raise DalRuntimeError(f"cannot convert {quote(v)} to an integer",
                                  help="to turn bad text into a value you can test, give a default: int(text, null)")
        digits = len(text.lstrip("+-").lstrip("0"))
        if digits > MAX_INT_DIGITS:  # before converting: that is quadratic
            if len(args) == 2:
                return args[1]
            raise int_overflow()
        work = int_text_work(digits)
        if work:
            _poll(rt, span).add(work)
        return int(text, 10)
    raise DalTypeError(f"`int` needs a number or a string, got {type_name(v)}")


@builtin("float(value) or float(text, default)", 1, 2)
def _float(rt: Runtime, args: list[Any], span: Any) -> Any:
    """Convert a number or a decimal string to a float. With a `default`, a string that is not a finite
    number gives the default instead of an error.

    Example:
        print(float("2.5") * 2, float(3), float("", null), float("nan", -1.0))
        # 5.0 3.0 null -1.0
    """
    v = args[0]
    t = type(v)
    if t is int:
        try:
            return float(v)
        except OverflowError:
            raise DalRuntimeError("integer too large to convert to a float") from None
    if t is float:
        return v
    if t is str:
        if not _text_pattern("float").fullmatch(v.strip()):
            if len(args) == 2:
                return args[1]
            raise DalRuntimeError(f"cannot convert {quote(v)} to a float",
                                  help="to turn bad text into a value you can test, give a default: "
                                  "float(text, null)")
        r = float(v.strip())
        if not math.isfinite(r):
            if len(args) == 2:
                return args[1]
            raise DalRuntimeError(f"cannot convert {quote(v)} to a finite float")
        return r
    raise DalTypeError(f"`float` needs a number or a string, got {type_name(v)}")


@builtin("type(value)", 1)
def _type(rt: Runtime, args: list[Any], span: Any) -> str:
    """The name of a value's type: null, boolean, integer, float, string, list, map, function, run result.

    Example:
        print(type(1), type(1.5), type("a"), type([]), type({}), type(null))
        # integer float string list map null
    """
    return type_name(args[0])


@builtin("json(value)", 1)
def _json_fn(rt: Runtime, args: list[Any], span: Any) -> str:
    """Serialise a value as compact JSON text (a function is an error: JSON has none).

    Example:
        print(json({"ok": true, "n": [1, 2]}))
        # {"ok": true, "n": [1, 2]}
    """
    return json_text(args[0], limits=rt.limits, strict=True, poll=_poll(rt, span), what="`json`")


@builtin("parse_json(text) or parse_json(text, default)", 1, 2)
def _parse_json(rt: Runtime, args: list[Any], span: Any) -> Any:
    """Parse JSON text into DAL values. With a `default`, text that is not JSON (a truncated reply, an
    error page) gives the default instead of an error.

    Example:
        let v = parse_json("{\\"a\\": [1, 2.5, null]}")
        print(v.a[1], parse_json("{\\"a\\": [1, 2", {"bad": true}))
        # 2.5 {"bad": true}
    """
    text = args[0]
    _want(text, str, "string", "parse_json")
    # Every character may become a new value ("[[[[..." or "[1,1,1,..."): the text's length is what the
    # memory budget bounds. JSON nested deeper than MAX_JSON_DEPTH is refused before Python's (recursive)
    # parser sees it.
    rt.limits.new(len(text), "`parse_json`")
    try:
        return _read_json(text, _poll(rt, span))
    except DalRuntimeError as e:
        if len(args) == 2:
            return args[1]
        if e.help is None:
            e.help = "to turn text that is not JSON into a value you can test, give a default: parse_json(text, null)"
        raise


def _read_json(text: str, meter: Meter) -> Any:
    depth = _json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise DalRuntimeError(f"cannot parse JSON nested {depth:,} levels deep: DAL reads at most {MAX_JSON_DEPTH:,}")

    def bad_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    numbers = [0]

    def count() -> None:  # C reads the text: its number hooks are where a long parse polls
        numbers[0] += 1
        if not numbers[0] & 0xFFF:
            meter()

    def finite(number: str) -> float:
        count()
        r = float(number)
        if not math.isfinite(r):
            shown = number if len(number) <= 40 else f"{number[:20]}…{number[-10:]} ({len(number):,} characters)"
            raise ValueError(f"the number {shown} is out of range")
        return r

    def integer(number: str) -> int:
        count()
        digits = len(number.lstrip("-").lstrip("0"))
        if digits > MAX_INT_DIGITS:
            raise _IntTooLong
        work = int_text_work(digits)
        if work:
            meter.add(work)  # reading it is quadratic: many long numbers are many steps, and polled
        return int(number)

    try:
        return _json.loads(text, parse_constant=bad_constant, parse_float=finite, parse_int=integer)
    except _IntTooLong:
        raise int_overflow() from None
    except (ValueError, RecursionError) as e:
        raise DalRuntimeError(f"invalid JSON: {e}") from None


MAX_JSON_DEPTH = 100_000
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class _IntTooLong(Exception):
    pass


def _json_depth(text: str) -> int:
    """How deeply `text` nests arrays and objects (exactly, for JSON; at most the number of brackets for
    anything else), in C-speed passes unless it has many brackets."""
    opens = text.count("[") + text.count("{")
    if opens <= MAX_JSON_DEPTH:
        return opens
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = deepest = 0
    for ch in brackets:
        if ch == "[" or ch == "{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


# --- collections ------------------------------------------------------------------------------


@builtin("len(value)", 1)
def _len(rt: Runtime, args: list[Any], span: Any) -> int:
    """Count the characters of a string, the items of a list or the keys of a map.

    Example:
        print(len("héllo"), len([1, 2]), len({"a": 1}))
        # 5 2 1
    """
    v = args[0]
    if type(v) in (str, list, dict):
        return len(v)
    raise DalTypeError(f"`len` needs a string, list or map, got {type_name(v)}")


@builtin("append(list, item)", 2)
def _append(rt: Runtime, args: list[Any], span: Any) -> list[Any]:
    """Add `item` to the end of `list` and return the same list (it is changed in place, not
    copied, so appending is amortised O(1)).

    Example:
        let xs = [1]
        let ys = append(xs, 2)
        print(xs, ys)
        # [1, 2] [1, 2]
    """
    xs, item = args
    _want(xs, list, "list", "append", "as its first argument")
    if len(xs) >= rt.limits.max_items:
        raise rt.limits.refuse("`append`", "list", len(xs) + 1)
    xs.append(item)
    return xs


@builtin("contains(haystack, needle)", 2)
def _contains(rt: Runtime, args: list[Any], span: Any) -> bool:
    """Whether a string contains a substring, a list an equal item, a map a key, or the stdout of a
    run result a substring.

    Example:
        print(contains("present\\n", "present"), contains([1, [2]], [2]), contains({"a": 1}, "b"))
        # true true false
    """
    h, n = args
    t = type(h)
    if t is str:
        _want(n, str, "string", "contains", "to search a string for")
        return n in h
    if t is list:
        if type(n) is not list and type(n) is not dict:
            if type(n) is not str or len(n) <= LONG_TEXT:
                return any(dal_eq(x, n) for x in h)
            meter = _poll(rt, span)
            return any(dal_eq(x, n, meter) for x in h)
        poll = _poll(rt, span)
        unequal: set[int] = set()  # lists and maps already compared: a list holding one many times
        for x in h:
            if (type(x) is list or type(x) is dict) and id(x) in unequal:
                continue
            if dal_eq(x, n, poll):
                return True
            unequal.add(id(x))
        return False
    if t is dict:
        _want(n, str, "string key", "contains", "to look up in a map")
        return n in h
    stdout = getattr(h, "stdout", None)
    if isinstance(stdout, str):
        _want(n, str, "string", "contains", "to search a run result for")
        return n in stdout
    raise DalTypeError(f"`contains` needs a string, list, map or run result, got {type_name(h)}")


@builtin("keys(map)", 1)
def _keys(rt: Runtime, args: list[Any], span: Any) -> list[str]:
    """The keys of a map, in insertion order.

    Example:
        print(keys({"b": 1, "a": 2}))
        # ["b", "a"]
    """
    m = args[0]
    _want(m, dict, "map", "keys")
    return list(m)


@builtin("values(map)", 1)
def _values(rt: Runtime, args: list[Any], span: Any) -> list[Any]:
    """The values of a map, in insertion order.

    Example:
        print(values({"b": 1, "a": 2}))
        # [1, 2]
    """
    m = args[0]
    _want(m, dict, "map", "values")
    return list(m.values())


@builtin("range(n) or range(start, stop)", 1, 2)
def _range(rt: Runtime, args: list[Any], span: Any) -> list[int]:
    """The list of integers `0 … n-1` (or `start … stop-1`).

    Example:
        print(range(3), range(2, 5))
        # [0, 1, 2] [2, 3, 4]
    """
    for a in args:
        _want(a, int, "integer", "range")
    start, stop = (0, args[0]) if len(args) == 1 else (args[0], args[1])
    if stop - start > rt.max_steps:
        raise DalRuntimeError(
            f"range of {stop - start:,} items is larger than the step budget ({rt.max_steps:,})"
        )
    rt.limits.new(stop - start, "`range`")
    return list(range(start, stop))


# --- strings --------------------------------------------------------------------------------------


@builtin("split(s, sep)", 2)
def _split(rt: Runtime, args: list[Any], span: Any) -> list[str]:
    """Split a string on every occurrence of a non-empty separator.

    Example:
        print(split("a,b,,c", ","))
        # ["a", "b", "", "c"]
    """
    s, sep = args
    _want(s, str, "string", "split", "as its first argument")
    _want(sep, str, "string", "split", "as its separator")
    if sep == "":
        raise DalRuntimeError("`split` needs a non-empty separator")
    rt.limits.new(s.count(sep) + 1, "`split`")
    return s.split(sep)


@builtin("join(list, sep)", 2)
def _join(rt: Runtime, args: list[Any], span: Any) -> str:
    """Join a list of strings with a separator.

    Example:
        print(join(["a", "b", "c"], "-"))
        # a-b-c
    """
    xs, sep = args
    _want(xs, list, "list", "join", "as its first argument")
    _want(sep, str, "string", "join", "as its separator")
    try:
        size = sum(map(len, xs)) + len(sep) * max(0, len(xs) - 1)  # before joining; a list or map has a len too
    except TypeError:
        size = 0  # an item that is not a string: found below
    rt.limits.string(size, "`join`")
    for i, x in enumerate(xs):
        if type(x) is not str:
            raise DalTypeError(
                f"`join` needs a list of strings, but item {i} is {a_type_name(x)}",
                help="convert items first with str(...)",
            )
    return sep.join(xs)


@builtin("trim(s)", 1)
def _trim(rt: Runtime, args: list[Any], span: Any) -> str:
    """Remove leading and trailing whitespace.

    Example:
        print("[" + trim("  hi \\n") + "]")
        # [hi]
    """
    _want(args[0], str, "string", "trim")
    return args[0].strip()


@builtin("replace(s, old, new)", 3)
def _replace(rt: Runtime, args: list[Any], span: Any) -> str:
    """Replace every occurrence of `old` in `s` with `new`.

    Example:
        print(replace("a-b-c", "-", "+"))
        # a+b+c
    """
    for a in args:
        _want(a, str, "string", "replace")
    s, old, new = args
    if old == "":
        raise DalRuntimeError("`replace` needs a non-empty string to replace")
    if len(new) > len(old):
        rt.limits.string(len(s) + s.count(old) * (len(new) - len(old)), "`replace`")
    return s.replace(old, new)


@builtin("startswith(s, prefix)", 2)
def _startswith(rt: Runtime, args: list[Any], span: Any) -> bool:
    """Whether `s` begins with `prefix`.

    Example:
        print(startswith("draft.md", "draft"), startswith("x", "draft"))
        # true false
    """
    for a in args:
        _want(a, str, "string", "startswith")
    return args[0].startswith(args[1])


@builtin("endswith(s, suffix)", 2)
def _endswith(rt: Runtime, args: list[Any], span: Any) -> bool:
    """Whether `s` ends with `suffix`.

    Example:
        print(endswith("draft.md", ".md"))
        # true
    """
    for a in args:
        _want(a, str, "string", "endswith")
    return args[0].endswith(args[1])


@builtin("lower(s)", 1)
def _lower(rt: Runtime, args: list[Any], span: Any) -> str:
    """The string in lower case (every Unicode letter that has one).

    Example:
        print(lower("Draft: ÉTÉ"))
        # draft: été
    """
    return _case(rt, args[0], "lower")


@builtin("upper(s)", 1)
def _upper(rt: Runtime, args: list[Any], span: Any) -> str:
    """The string in upper case (every Unicode letter that has one).

    Example:
        print(upper("status: ok"))
        # STATUS: OK
    """
    return _case(rt, args[0], "upper")


def _case(rt: Runtime, s: Any, how: str) -> str:
    _want(s, str, "string", how)
    if not s.isascii():  # a character may become up to three ("ß" -> "SS"): check before building
        rt.limits.string(3 * len(s), f"`{how}`")
    return s.lower() if how == "lower" else s.upper()


@builtin("lines(s)", 1)
def _lines(rt: Runtime, args: list[Any], span: Any) -> list[str]:
    """The lines of a text, without their line endings (`\\n`, or `\\r\\n`); a last line ending adds no
    empty line, so the output of a command splits into its lines.

    Example:
        print(lines("a\\nb\\r\\n\\nc\\n"), lines(""))
        # ["a", "b", "", "c"] []
    """
    s = args[0]
    _want(s, str, "string", "lines")
    rt.limits.new(s.count("\n") + 1, "`lines`")
    out = s.split("\n")
    if out[-1] == "":
        out.pop()
    return [x[:-1] if x.endswith("\r") else x for x in out]


@builtin("find(haystack, needle) or find(haystack, needle, start)", 2, 3)
def _find(rt: Runtime, args: list[Any], span: Any) -> int:
    """Where `needle` first occurs in a string (a substring) or a list (an equal item), at `start` or
    after it: its index, or -1 when it does not occur.

    Example:
        print(find("a-b-c", "-"), find("a-b-c", "-", 2), find("abc", "x"), find([1, [2], 3], [2]))
        # 1 3 -1 1
    """
    h, needle = args[0], args[1]
    start = args[2] if len(args) == 3 else 0
    _want(start, int, "integer", "find", "as its start")
    if start < 0:
        raise DalRuntimeError(f"`find` needs a start of 0 or more, got {start}")
    if type(h) is str:
        _want(needle, str, "string", "find", "to search a string for")
        return h.find(needle, start)
    if type(h) is list:
        if type(needle) is not list and type(needle) is not dict:
            meter = _poll(rt, span) if type(needle) is str and len(needle) > LONG_TEXT else None
            return next((i for i in range(start, len(h)) if dal_eq(h[i], needle, meter)), -1)
        poll = _poll(rt, span)
        unequal: set[int] = set()  # as in `contains`: a list holding one value many times compares it once
        for i in range(start, len(h)):
            x = h[i]
            if (type(x) is list or type(x) is dict) and id(x) in unequal:
                continue
            if dal_eq(x, needle, poll):
                return i
            unequal.add(id(x))
        return -1
    raise DalTypeError(f"`find` needs a string or a list, got {type_name(h)}")


@builtin("format(template, value, ...)", 1, None)
def _format(rt: Runtime, args: list[Any], span: Any) -> str:
    """The template with each `{}` replaced by the next value, shown as `str` shows it (`{0}`, `{1}`...
    pick a value by position; `{{` and `}}` are braces). The template must use every value given.

    Example:
        print(format("attempt {} of {}: {}", 2, 5, ["a", 1]))
        print(format("{0}/{1}, again {0} {{ok}}", "x", 1.5))
        # attempt 2 of 5: ["a", 1]
        # x/1.5, again x {ok}
    """
    template, values = args[0], args[1:]
    _want(template, str, "string", "format", "as its template")
    try:
        pieces, count = parse_template(template, _poll(rt, span))
    except TemplateError as e:
        raise DalRuntimeError(e.message, help=e.help) from None
    if count != len(values):
        raise DalTypeError(count_mismatch(count, len(values)), help="give format one value per placeholder")
    limits = rt.limits
    poll = _poll(rt, span)
    shown = [display(v, limits, "`format`", poll) for v in values]
    size = sum(len(p) if type(p) is str else len(shown[p]) for p in pieces)  # before building
    limits.string(size, "`format`")
    return "".join(p if type(p) is str else shown[p] for p in pieces)


# --- numbers ----------------------------------------------------------------------------------------


def _number(v: Any, fn: str, what: str = "a number") -> None:
    if type(v) is not int and type(v) is not float:
        raise DalTypeError(f"`{fn}` needs {what}, got {type_name(v)}")


@builtin("abs(x)", 1)
def _abs(rt: Runtime, args: list[Any], span: Any) -> Any:
    """The absolute value of a number.

    Example:
        print(abs(-5), abs(2.5), abs(0))
        # 5 2.5 0
    """
    _number(args[0], "abs")
    return abs(args[0])


@builtin("round(x) or round(x, digits)", 1, 2)
def _round(rt: Runtime, args: list[Any], span: Any) -> Any:
    """A number rounded to the nearest integer, or to `digits` decimal places (a float stays a float);
    a value halfway between goes to the even neighbour, as in Python.

    Example:
        print(round(2.7), round(-2.7), round(2.5), round(3.5), round(3.14159, 2), round(1234, -2))
        # 3 -3 2 4 3.14 1200
    """
    x = args[0]
    _number(x, "round")
    if len(args) == 1:
        return round(x)
    digits = args[1]
    _want(digits, int, "integer", "round", "for its digits")
    if type(x) is int:
        if digits >= 0:
            return x
        if -digits > MAX_INT_DIGITS + 1:  # a unit larger than any DAL integer (and no huge power to build)
            return 0
        return check_int(round(x, digits))  # rounding up may add a digit
    return round(x, max(-400, min(digits, 400)))  # beyond that nothing changes for a float (at most 1.8e308)


@builtin("sum(list)", 1)
def _sum(rt: Runtime, args: list[Any], span: Any) -> Any:
    """The sum of a list of numbers, added left to right as `+` adds them (0 for an empty list).

    Example:
        print(sum([1, 2, 3]), sum([1, 2.5]), sum([]))
        # 6 3.5 0
    """
    xs = args[0]
    _want(xs, list, "list", "sum")
    for i, x in enumerate(xs):
        if type(x) is not int and type(x) is not float:
            raise DalTypeError(f"`sum` needs a list of numbers, but item {i} is {a_type_name(x)}")
    try:
        total = functools.reduce(operator.add, xs, 0)  # left to right, whatever Python's sum() does
    except OverflowError:
        raise DalRuntimeError("number too large for this operation") from None
    if type(total) is float and not math.isfinite(total):
        raise DalRuntimeError("float overflow: the sum is too large")
    return check_int(total) if type(total) is int else total


def _order_kind(v: Any) -> str | None:
    t = type(v)
    return "number" if t is int or t is float else "string" if t is str else None


def _ordered(values: list[Any], fn: str, what: str, poll: Callable[[], None]) -> bool:
    """Values that `<` can order: all numbers, or all strings (DAL orders nothing else). True when two
    or more are strings longer than LONG_TEXT: comparing them is work the Meter charges."""
    if not values:
        return False
    first = _order_kind(values[0])
    for i, v in enumerate(values):
        if not i & 0x3FFF:
            poll()  # a long list: Ctrl-C and the time budget still stop the step
        kind = _order_kind(v)
        if kind is None:
            raise DalTypeError(f"`{fn}` orders numbers or strings, but {what} {i} is {a_type_name(v)}",
                               help="give a key function that returns a number or a string" if fn == "sort" else None)
        if kind != first:
            raise DalTypeError(f"`{fn}` orders numbers with numbers and strings with strings, but {what} 0 is "
                               f"{a_type_name(values[0])} and {what} {i} is {a_type_name(v)}")
    if first != "string":
        return False
    long_ones = 0
    for v in values:
        if len(v) > LONG_TEXT:
            long_ones += 1
            if long_ones == 2:
                return True
    return False


class _Metered:
    """A string in a sort (or min, max) whose comparisons are charged: each costs the shorter length,
    which bounds the characters it reads (only long pairs count, as in dal_eq)."""

    __slots__ = ("v", "meter")

    def __init__(self, v: str, meter: Meter) -> None:
        self.v = v
        self.meter = meter

    def _work(self, other: _Metered) -> None:
        n = min(len(self.v), len(other.v))
        if n > LONG_TEXT:
            self.meter.add(n)

    def __lt__(self, other: _Metered) -> bool:
        self._work(other)
        return self.v < other.v

    def __gt__(self, other: _Metered) -> bool:
        self._work(other)
        return self.v > other.v


def _extreme(rt: Runtime, args: list[Any], span: Any, fn: str, pick: Callable[..., Any]) -> Any:
    if len(args) == 1:
        xs = args[0]
        _want(xs, list, "list (or two or more values)", fn)
        if not xs:
            raise DalRuntimeError(f"`{fn}` of an empty list", help="check len(xs) > 0 first")
        what = "item"
    else:
        xs, what = args, "argument"
    meter = _poll(rt, span)
    if _ordered(xs, fn, what, meter):
        return pick(xs, key=lambda v: _Metered(v, meter))
    return pick(xs)


@builtin("min(list) or min(a, b, ...)", 1, None)
def _min(rt: Runtime, args: list[Any], span: Any) -> Any:
    """The smallest of a list's items, or of two or more values: numbers, or strings (by code point);
    the first of equal ones.

    Example:
        print(min([3, 1, 2]), min(4, 2.5), min(["pear", "apple"]))
        # 1 2.5 apple
    """
    return _extreme(rt, args, span, "min", min)


@builtin("max(list) or max(a, b, ...)", 1, None)
def _max(rt: Runtime, args: list[Any], span: Any) -> Any:
    """The largest of a list's items, or of two or more values: numbers, or strings (by code point);
    the first of equal ones.

    Example:
        print(max([3, 1, 2]), max(4, 2.5), max(["pear", "apple"]))
        # 3 4 pear
    """
    return _extreme(rt, args, span, "max", max)


# --- lists and maps -------------------------------------------------------------------------------


@builtin("sort(list) or sort(list, key)", 1, 2, calls=True)
def _sort(rt: Runtime, args: list[Any], span: Any, call: Callable[[Any, list[Any], Any], Any]) -> list[Any]:
    """A new list of the items in order, smallest first: numbers, or strings (by code point). With a
    `key` function, items are ordered by what it returns for each (called once per item, in order).
    Equal items keep their order (the sort is stable).

    Example:
        print(sort([3, 1, 2]), sort(["b", "A", "a"]))
        let files = [{"name": "b.md", "size": 20}, {"name": "a.md", "size": 5}, {"name": "c.md", "size": 20}]
        let big_first = sort(files, fn(f) { return -f.size })
        print(big_first[0].name, big_first[1].name, sort(["pear", "fig"], len))
        # [1, 2, 3] ["A", "a", "b"]
        # b.md c.md ["fig", "pear"]
    """
    xs = args[0]
    _want(xs, list, "list", "sort", "as its first argument")
    rt.limits.new(len(xs), "`sort`")
    meter = _poll(rt, span)
    if len(args) == 1:
        if _ordered(xs, "sort", "item", meter):
            return sorted(xs, key=lambda v: _Metered(v, meter))
        return sorted(xs)
    key = args[1]
    if type(key) is not Function and type(key) is not Builtin:
        raise DalTypeError(f"`sort` needs a function as its key, got {type_name(key)}")
    items = list(xs)  # the key may change the list: sort what it held when sort was called
    keys = [call(key, [x], span) for x in items]
    if _ordered(keys, "sort", "key of item", meter):
        order = sorted(range(len(items)), key=lambda i: _Metered(keys[i], meter))
    else:
        order = sorted(range(len(items)), key=keys.__getitem__)
    return [items[i] for i in order]


@builtin("items(map)", 1)
def _items(rt: Runtime, args: list[Any], span: Any) -> list[list[Any]]:
    """The key and value of each entry of a map, as `[key, value]` lists in insertion order.

    Example:
        for kv in items({"b": 1, "a": 2}) { print(kv[0], kv[1]) }
        # b 1
        # a 2
    """
    m = args[0]
    _want(m, dict, "map", "items")
    rt.limits.new(len(m), "`items`")
    return [[k, v] for k, v in m.items()]


@builtin("get(map, key) or get(map, key, default)", 2, 3)
def _get(rt: Runtime, args: list[Any], span: Any) -> Any:
    """The value of `key` in a map, or `default` (null if not given) when the map has no such key: for
    replies that may lack a field.

    Example:
        let reply = {"status": "ok"}
        print(get(reply, "status"), get(reply, "error"), get(reply, "retries", 0))
        # ok null 0
    """
    m, key = args[0], args[1]
    _want(m, dict, "map", "get", "as its first argument")
    _want(key, str, "string key", "get", "to look up in a map")
    return m.get(key, args[2] if len(args) == 3 else None)


# --- the world and the run ----------------------------------------------------------------------


@builtin("now()", 0)
def _now(rt: Runtime, args: list[Any], span: Any) -> float:
    """The current time as seconds since the Unix epoch (a float).

    Example:
        print(now() > 1700000000)
        # true
    """
    host = rt.host
    return host.observe("now()", host.now)


@builtin("env(name)", 1)
def _env(rt: Runtime, args: list[Any], span: Any) -> str | None:
    """The value of an environment variable of the `dal` process when the policy lets the script read it
    (`[env] allow`, `--allow-env`, or a harmless locale or terminal variable such as LANG or TZ), else null,
    as for a variable that is not set.

    Example:
        print(env("DAL_SURELY_NOT_SET_ANYWHERE"))
        # null
    """
    name = args[0]
    _want(name, str, "string", "env")
    _want_unicode(name, "the variable name")
    host = rt.host
    return host.observe(f"env({name})", lambda: host.getenv(name))


@builtin("sleep(seconds)", 1)
def _sleep(rt: Runtime, args: list[Any], span: Any) -> None:
    """Wait `seconds` (a number, 0 or more) without running anything: not an effect. Ctrl-C and the time
    budget end it; a wait that would outlast `--timeout` is refused at once. A resumed run does not wait
    again for the sleeps the journal holds.

    Example:
        sleep(0.01)
        print("waited")
        # waited
    """
    seconds = args[0]
    _number(seconds, "sleep", "a number of seconds")
    if seconds < 0:
        raise DalRuntimeError(f"`sleep` needs 0 seconds or more, got {seconds}")
    try:
        seconds = float(seconds)
    except OverflowError:  # an integer beyond any float
        seconds = math.inf
    if not math.isfinite(seconds):
        raise DalRuntimeError("`sleep` needs a finite number of seconds", help="no run waits that long: sleep less")
    rt.host.observe(f"sleep({seconds:g})", lambda: rt.sleep(seconds, span))


@builtin("record(state, operation, outcome)", 3)
def _record(rt: Runtime, args: list[Any], span: Any) -> Any:
    """Append `{"attempt": state.attempt, "operation": operation, "outcome": outcome}` to
    `state.evidence` and return `state` — exactly the article's own `fn record` — and add the entry to
    the evidence of the loop that is running.

    Example:
        let state = {"attempt": 1, "evidence": []}
        state = record(state, "check", "missing")
        print(state.evidence)
        # [{"attempt": 1, "operation": "check", "outcome": "missing"}]
    """
    state, operation, outcome = args
    _want(state, dict, "map", "record", "as its state")
    for key in ("attempt", "evidence"):
        if key not in state:
            raise DalRuntimeError(
                f'`record` needs a state map with "{key}"; this one has: '
                + (", ".join(quote(k, 40) for k in islice(state, 12)) + (", ..." if len(state) > 12 else "")
                   or "no keys")
            )
    ev = state["evidence"]
    _want(ev, list, "list", "record", "in state.evidence")
    entry = {"attempt": state["attempt"], "operation": operation, "outcome": outcome}
    ev.append(entry)
    state["evidence"] = ev
    if rt.loops:
        attempt = state["attempt"]
        if type(attempt) not in (bool, int, float, type(None)) and not (type(attempt) is str and len(attempt) <= 400):
            attempt = describe(attempt)  # receipts hold a bounded text of anything larger
        # a run() result: its summary naming its command
        said = getattr(outcome, "evidence", None) if type(getattr(outcome, "summary", None)) is str else None
        said = describe(said if type(said) is str else outcome)
        rt.add_evidence({"kind": "record", "operation": describe(operation), "outcome": said, "attempt": attempt})
    return state


def _words(cmd: list[Any], fn: str) -> tuple[str, ...]:
    for i, w in enumerate(cmd):
        if type(w) is not str:
            raise DalTypeError(
                f"`{fn}` needs a list of strings (one per word); element {i} is {a_type_name(w)}",
                help=f"convert it first: str({describe(w, 40)})" if type(w) in (int, float, bool) else None,
            )
        _want_unicode(w, f"element {i} of the command")
    if not cmd:
        raise DalRuntimeError(f"`{fn}` got an empty list: the first element is the program to run")
    return tuple(cmd)


def _text_to_feed(text: Any, fn: str, what: str) -> str:
    if type(text) is not str:
        raise DalTypeError(f"`{fn}` needs a string as {what}, got {a_type_name(text)}",
                           help=f"convert it first: str({describe(text, 40)}) or json(...)"
                           if type(text) in (int, float, bool, list, dict) else None)
    _want_unicode(text, what)
    if "\x00" in text:
        raise DalRuntimeError(f"`{fn}`: {what} holds a NUL byte; a program's input here is text")
    return text


def _options(given: Any, fn: str, known: dict[str, type]) -> dict[str, Any]:
    """The options map of `run(words, {...})` and `write_file(path, text, {...})`: known keys only, each of
    its type."""
    _want(given, dict, "map", fn, "of options")
    for k, v in given.items():
        if k not in known:
            raise DalRuntimeError(f"`{fn}` has no option {quote(k, 40)}; it takes: {', '.join(known)}")
        if type(v) is not known[k]:
            raise DalTypeError(f"`{fn}`'s option {quote(k, 40)} needs {with_article(type_name(known[k]()))}, "
                               f"got {a_type_name(v)}")
    return dict(given)


@builtin("run(command)", 1, 2)
def _run(rt: Runtime, args: list[Any], span: Any) -> Any:
    """Run a command after the policy checks it, and return its result: a shell command string, or a
    list of words (the program, then one element per argument, used as they are: no quoting, no globs,
    no `$`). With the list, `{"input": text}` feeds the text to the program as its standard input. The
    result prints as its summary; `.ok`, `.code`, `.stdout`, `.stderr` and `.status` give the details,
    and `contains(result, text)` searches its stdout.

    Example:
        let r = run("echo hello")
        print(r, r.ok, r.code)
        let name = "it's $HOME; *"
        print(run(["echo", name]))
        print(run(["wc", "-l"], {"input": "one\\ntwo\\n"}))
        # hello true 0
        # it's $HOME; *
        # 2
    """
    from dal.core.shellword import fed_command

    cmd = args[0]
    given = _options(args[1], "run", {"input": str}) if len(args) > 1 else {}
    if type(cmd) is list:
        words = _words(cmd, "run")
        stdin = _text_to_feed(given["input"], "run", "the input") if "input" in given else None
        if stdin is None:
            return rt.host.run_effect(fed_command(words), span, words)
        return rt.host.run_effect(fed_command(words, stdin), span, words, stdin=stdin)
    if type(cmd) is not str:
        raise DalTypeError(
            f"`run` needs a string (the shell command) or a list of strings (one per word), got {a_type_name(cmd)}"
        )
    if given:
        raise DalRuntimeError("`run` feeds input only to a list of words: `run([\"sort\"], {\"input\": text})`",
                              help="write the command as a list: the program, then one element per argument")
    _want_unicode(cmd, "the command")
    return rt.host.run_effect(cmd, span)


@builtin("write_file(path, text)", 2, 3)
def _write_file(rt: Runtime, args: list[Any], span: Any) -> Any:
    """Write `text` to the file at `path` (replacing it; with `{"append": true}`, adding to its end), as
    an effect like any `run()`: the policy checks the path as it checks `cat > path`, the journal
    keeps it, and it returns the run result. No quoting: the text and the path are used as they are.

    Example:
        let name = "it's $HOME; *.md"
        print(write_file(name, "# Title\\n").ok)
        write_file(name, "more\\n", {"append": true})
        print(run(["cat", name]).stdout)
        # true
        # # Title
        # more
        #
    """
    from dal.core.shellword import fed_command

    path, text = args[0], args[1]
    if type(path) is not str:
        raise DalTypeError(f"`write_file` needs a string as the path, got {a_type_name(path)}")
    _want_unicode(path, "the path")
    if not path:
        raise DalRuntimeError("`write_file` got an empty path")
    text = _text_to_feed(text, "write_file", "the text")
    append = _options(args[2], "write_file", {"append": bool}).get("append", False) if len(args) > 2 else False
    words = ("cat",)
    return rt.host.run_effect(fed_command(words, text, path, append), span, words, stdin=text, write_to=path,
                              append=append)


@builtin("operation(key)", 1)
def _operation(rt: Runtime, args: list[Any], span: Any) -> None:
    """Name this run's operation key (before its first effect). A later invocation with the key of a
    completed run is skipped instead of repeating its effects.

    Example:
        operation("article-draft:2026-09-02:tool-loop")
        print("keyed")
        # keyed
    """
    key = args[0]
    _want(key, str, "string", "operation")
    if not key.strip():
        raise DalRuntimeError("an operation key must not be empty")
    _want_unicode(key, "the operation key")
    verdict = rt.host.set_operation(key, span)
    if verdict.skip_of is not None:
        raise SkipSignal(verdict.skip_of)
    if verdict.stop is not None:
        raise StopSignal(verdict.stop, span)


@builtin("finish(value)", 0, 1)
def _finish(rt: Runtime, args: list[Any], span: Any) -> None:
    """End the run now as completed; the value becomes the receipt's `result`.

    Example:
        print("done")
        finish({"verified": true})
        print("never printed")
        # done
    """
    raise FinishSignal(args[0] if args else None, span)


@builtin("fail(value)", 0, 1)
def _fail(rt: Runtime, args: list[Any], span: Any) -> None:
    """End the run now as failed. A map may set `blocker` (a string) and `retry` (one of none,
    inspect, resume, repair, replay, escalate) for the receipt.

    Example:
        fail({"status": "verification_failed", "blocker": "framing paragraph missing", "retry": "inspect"})
    """
    value = args[0] if args else None
    if type(value) is dict:
        retry = value.get("retry")
        allowed = ("none", "inspect", "resume", "repair", "replay", "escalate")
        if retry is not None and retry not in allowed:
            raise DalRuntimeError(
                f"fail(): retry must be one of {', '.join(allowed)}; got {describe(retry, 60)}"
            )
        blocker = value.get("blocker")
        if blocker is not None and type(blocker) is not str:
            raise DalTypeError(f"fail(): blocker must be a string, got {type_name(blocker)}")
    raise FailSignal(value, span)
