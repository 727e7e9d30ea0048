"""Checks `dal check` adds to the resolver's: mistakes that are valid DAL but almost surely not meant.

- a script that declares `let operation_key = "..."` and never uses it: the first article's code did
  exactly this, and DAL cannot know the name means anything, so the run had no key and a second run
  repeated the operation instead of being skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dal.core.errors import DalError

KEY_NAMES = ("operation_key",)


def _nodes(node: Any) -> Iterator[Any]:
    """Every AST node under `node` (attrs classes; lists and tuples of them)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (list, tuple)):
            stack.extend(n)
            continue
        fields = getattr(n, "__attrs_attrs__", None)
        if fields is None:
            continue
        yield n
        for f in fields:
            if f.name != "span":
                stack.append(getattr(n, f.name))


def lint(program: Any, filename: str, source: str) -> list[DalError]:
    """The warnings for a checked program (kind `unused-operation-key`)."""
    from dal.syntax import ast

    declared: dict[str, Any] = {}
    read: set[str] = set()
    for n in _nodes(program):
        if isinstance(n, ast.Let) and n.name in KEY_NAMES:
            declared.setdefault(n.name, n)
        elif isinstance(n, ast.Name):
            read.add(n.id)
    out = []
    for name, let in declared.items():
        if name in read:
            continue
        w = DalError(
            f"`{name}` is declared but never used: DAL does not know the name, so this run has no operation "
            "key (a second run repeats the operation instead of being skipped or resumed)",
            let.span, filename=filename, source=source,
            help=f"pass it to operation() before the first run(): `operation({name})`; or give the key on the "
            "command line: `dal run --key KEY script.dal`",
        )
        w.kind = "unused-operation-key"
        out.append(w)
    return out
