"""Tool arguments: one table per tool gives both the JSON Schema the client is shown and the check the
server applies, so they cannot disagree. A bad argument is refused with a message naming the tool, the
argument and what was expected (the SDK's own schema check would say only "'x' is not of type 'integer'")."""

from __future__ import annotations

import json
from typing import Any


class BadArguments(Exception):
    """A tool was called with arguments it does not take; the message names the tool and the argument."""


class Arg:
    """One argument: its JSON type (`string`, `integer` and `number` are positive, `size` is a memory size
    as bytes or "512M", `strings` a list of strings, `object` a JSON object), whether it is required, and
    what the client is told about it."""

    __slots__ = ("kind", "required", "help")

    def __init__(self, kind: str, help: str, required: bool = False) -> None:
        self.kind, self.help, self.required = kind, help, required

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any]
        if self.kind == "integer":
            out = {"type": "integer", "minimum": 1}
        elif self.kind == "number":
            out = {"type": "number", "exclusiveMinimum": 0}
        elif self.kind == "size":
            out = {"type": ["integer", "string"]}
        elif self.kind == "strings":
            out = {"type": "array", "items": {"type": "string"}}
        else:
            out = {"type": self.kind}
        return {**out, "description": self.help}


def input_schema(table: dict[str, Arg]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: a.schema() for name, a in table.items()},
        "required": [name for name, a in table.items() if a.required],
        "additionalProperties": False,
    }


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(tool: str, name: str, wanted: str, value: Any) -> BadArguments:
    return BadArguments(f"{tool}: argument `{name}` must be {wanted}, got {_shown(value)}")


def check(tool: str, table: dict[str, Arg], given: Any) -> dict[str, Any]:
    """`given` checked against `table`: the arguments, with None for those not given. Raises BadArguments."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise BadArguments(f"{tool}: its arguments must be a JSON object, got {_shown(given)}")
    unknown = sorted(set(given) - set(table))
    if unknown:
        raise BadArguments(f"{tool}: unknown argument `{unknown[0]}`; its arguments are: " + ", ".join(table))
    out: dict[str, Any] = {}
    for name, a in table.items():
        v = given.get(name)
        if v is None:
            if a.required:
                raise BadArguments(f"{tool}: argument `{name}` is required ({a.help})")
            out[name] = None
            continue
        k = a.kind
        if k == "string":
            if not isinstance(v, str) or not v:
                raise _bad(tool, name, "a non-empty string", v)
        elif k == "integer":
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise _bad(tool, name, "a positive integer", v)
        elif k == "number":
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise _bad(tool, name, "a positive number", v)
        elif k == "size":
            if isinstance(v, bool) or not isinstance(v, int | str):
                raise _bad(tool, name, 'a number of bytes or a size such as "512M"', v)
        elif k == "boolean":
            if not isinstance(v, bool):
                raise _bad(tool, name, "true or false", v)
        elif k == "strings":
            if not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                raise _bad(tool, name, "a list of strings", v)
        elif k == "object":
            if not isinstance(v, dict):
                raise _bad(tool, name, "a JSON object", v)
        out[name] = v
    return out
