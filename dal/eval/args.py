"""Script arguments: the `param` declarations at the top of a program, and binding the values a run is given.

A run is given its arguments as a map of name to value: text (the command line's `name=value`, a job's
stored words) is read as the declared type reads it (`int` and `float` as the builtins of those names read
text, `bool` only as `true` or `false`); a typed value (the Python API's `args={...}`) must already be of
the declared type (an int is a float too). Binding happens before anything runs, and every problem is an
error located at the declaration (or at the top of the script for a name it does not declare), so a run
with a bad argument is rejected with nothing done.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from dal.core.errors import DalError, DalNameError, DalTypeError
from dal.core.shellword import sh_quote
from dal.core.spans import Span
from dal.eval.values import MAX_INT_DIGITS, describe, quote
from dal.syntax import ast

__all__ = ["bind", "declared", "describe_params", "from_text", "missing", "to_text"]

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)
_WORD = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false"}


def declared(program: ast.Program) -> list[ast.Param]:
    """The program's `param` declarations, in order (the grammar keeps them at its top)."""
    out = []
    for st in program.body:
        if type(st) is not ast.Param:
            break
        out.append(st)
    return out


def describe_params(params: list[ast.Param]) -> str:
    """`name (str), count (int, default 3)`: what a script takes, for messages and `dal check`."""
    def shown(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False) if type(v) is str else to_text(v)

    return ", ".join(f"{p.name} ({p.type}" + (f", default {shown(p.default)}" if p.has_default else "") + ")"
                     for p in params) or "none"


def from_text(kind: str, text: str) -> Any:
    """The value `text` means for an argument of type `kind`; ValueError saying what was expected."""
    if kind == "str":
        return text
    if kind == "bool":
        if text in ("true", "false"):
            return text == "true"
        raise ValueError("expected true or false")
    t = text.strip()
    if kind == "int":
        if not _INT.fullmatch(t):
            raise ValueError("expected an integer")
        if len(t.lstrip("+-").lstrip("0")) > MAX_INT_DIGITS:
            raise ValueError(f"expected an integer of at most {MAX_INT_DIGITS} digits")
        return int(t, 10)
    if not _FLOAT.fullmatch(t):  # no nan or inf: a receipt (JSON) could not hold them
        raise ValueError("expected a finite number")
    value = float(t)
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def to_text(value: Any) -> str:
    """The text `from_text` reads back as `value` (for a command line that runs the same arguments again)."""
    if type(value) is bool:
        return "true" if value else "false"
    return value if type(value) is str else repr(value)


def _typed(kind: str, value: Any) -> Any:
    """A typed value for an argument of type `kind`; ValueError when it is not one."""
    t = type(value)
    if kind == "str" and t is str:
        return value
    if kind == "bool" and t is bool:
        return value
    if kind == "int" and t is int:
        return value
    if kind == "float" and t in (int, float):
        if not math.isfinite(value):
            raise ValueError("expected a finite number")
        return float(value)
    raise ValueError(f"expected {_WORD[kind]}")


def bind(program: ast.Program, given: Mapping[str, Any] | None, *, filename: str,
         source: str, command: str = "dal run") -> tuple[dict[str, Any], list[DalError]]:
    """Every declared argument's value (given, else its default), in declaration order, and the errors:
    a name the script does not declare, a value that is not of its type, an argument with no default that
    was not given. `command`: the command the person gave the arguments to (`dal submit`), which the help
    of a missing one repeats; "" for a host that gives them as a map (the API, an MCP tool's `args`)."""
    params = declared(program)
    given = dict(given or {})
    errors: list[DalError] = []
    values: dict[str, Any] = {}
    by_name = {p.name: p for p in params}

    def err(cls: type[DalError], message: str, span: Span, help: str | None = None) -> None:
        errors.append(cls(message, span, filename=filename, source=source, help=help))

    for name in given:
        if name not in by_name:
            import difflib

            close = difflib.get_close_matches(str(name), list(by_name), n=1)
            top = params[0].span if params else Span(1, 1, 1, 1, 0, 0)
            err(DalNameError,
                f"this script takes no argument `{describe(name, 60) if type(name) is not str else name}`; "
                f"its arguments: {describe_params(params)}", top,
                help=f"did you mean `{close[0]}`?" if close else
                "declare it at the top of the script: `param NAME: str` (or int, float, bool)")
    for p in params:
        if p.name in given:
            v = given[p.name]
            try:
                # Text is how a command line and a stored job give every value; typed values come from a host.
                values[p.name] = from_text(p.type, v) if type(v) is str else _typed(p.type, v)
            except ValueError as e:
                got = quote(v, 60) if type(v) is str else repr(v)
                err(DalTypeError, f"argument `{p.name}` is {p.type}: {e}, got {got}", p.span,
                    help=f"give it as {p.name}=VALUE; its type is declared here")
        elif p.has_default:
            values[p.name] = p.default
        else:
            errors.append(missing(p, filename, source, command))
    return values, errors


def missing(p: ast.Param, filename: str, source: str, command: str = "dal run") -> DalError:
    """The error of an argument with no default that the run was not given."""
    give = (f"`{command} {sh_quote(filename)} {p.name}=VALUE` (or args={{\"{p.name}\": ...}} in the API)" if command
            else f"args: {{\"{p.name}\": ...}}")
    return DalNameError(
        f"argument `{p.name}` was not given, and it has no default", p.span, filename=filename, source=source,
        help=f"give it: {give}, or declare a default: `param {p.name}: {p.type} = ...`")
