"""Checks `dal check` adds to the resolver's: mistakes that are valid DAL but almost surely not meant.

- a script that declares `let operation_key = "..."` and never uses it: the first article's code did
  exactly this, and DAL cannot know the name means anything, so the run had no key and a second run
  repeated the operation instead of being skipped.
- `now()` or `env()` read before `operation("K")`: the operation's journal starts at operation(), so a
  resume of the key does not replay that value; the resumed run reads a new one, and what the script built
  from it differs from what the journal holds (error[divergence]). docs/durability.md#known-limits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dal.core.errors import DalError

KEY_NAMES = ("operation_key",)
UNREPLAYED = ("now", "env")  # builtins whose value a resume replays only after operation()


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
    return out + _read_before_operation(program, filename, source)


def _top_level_calls(program: Any) -> list[Any]:
    """The calls of `now`, `env` and `operation` by name that run as the script runs, in source order: not
    those inside a function's body (they run when it is called, which this check does not follow)."""
    from dal.syntax import ast

    found, stack = [], [program]
    while stack:
        n = stack.pop()
        if isinstance(n, (list, tuple)):
            stack.extend(n)
            continue
        if isinstance(n, (ast.FnDef, ast.FnExpr)) or getattr(n, "__attrs_attrs__", None) is None:
            continue
        if isinstance(n, ast.Call) and isinstance(n.callee, ast.Name) and n.callee.id in (*UNREPLAYED, "operation"):
            found.append(n)
        stack.extend(getattr(n, f.name) for f in n.__attrs_attrs__ if f.name != "span")
    return sorted(found, key=lambda c: c.span.start)


def _read_before_operation(program: Any, filename: str, source: str) -> list[DalError]:
    from dal.syntax import ast

    own = {n.name for n in _nodes(program) if isinstance(n, (ast.FnDef, ast.Let))}  # shadowed builtins
    calls = _top_level_calls(program)
    first = next((c for c in calls if c.callee.id == "operation"), None)
    if first is None or "operation" in own:
        return []
    out = []
    for call in calls:
        name = call.callee.id
        if call.span.start >= first.span.start or name in own or name == "operation":
            continue
        w = DalError(
            f"`{name}()` is read before operation(): a resume of the operation does not replay this value, so "
            "the resumed run reads a new one, and effects built from it differ from the journal's "
            "(error[divergence])",
            call.span, filename=filename, source=source,
            help="call operation(...) first, or give the key on the command line: `dal run --key KEY script.dal`",
        )
        w.kind = "read-before-operation"
        out.append(w)
    return out
