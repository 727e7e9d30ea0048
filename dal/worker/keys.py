"""The operation key a script names for itself: a literal `operation("...")`, found before it runs."""

from __future__ import annotations

from typing import Any

from dal.syntax import ast


class KeyProblem(Exception):
    """The script's own operation key cannot be known before it runs; the message says what to do."""


def _children(node: Any) -> list[Any]:
    out: list[Any] = []
    for field in getattr(node, "__attrs_attrs__", ()):
        if field.name == "span":
            continue
        value = getattr(node, field.name)
        stack = [value]
        while stack:  # tuples of nodes, and tuples of (condition, block) pairs
            v = stack.pop()
            if isinstance(v, tuple):
                stack.extend(v)
            elif hasattr(v, "__attrs_attrs__") and not isinstance(v, ast.Span):
                out.append(v)
    return out


def literal_key(program: ast.Program) -> str | None:
    """The key of the script's `operation("K")` calls, when every one is the same string literal; None when
    it calls no operation(). KeyProblem when a call's key is computed, or two calls name different keys,
    or the script defines its own `operation` (then nothing here can tell what its calls mean)."""
    keys: list[str] = []
    computed = False
    stack: list[Any] = [program]
    while stack:  # no recursion: a script may nest 1,000 levels deep
        node = stack.pop()
        if isinstance(node, ast.FnDef | ast.Let) and node.name == "operation":
            return None  # its own function or variable: not the builtin
        if isinstance(node, ast.Call) and isinstance(node.callee, ast.Name) and node.callee.id == "operation":
            arg = node.args[0] if len(node.args) == 1 else None
            if isinstance(arg, ast.Literal) and isinstance(arg.value, str):
                keys.append(arg.value)
            else:
                computed = True
        stack.extend(_children(node))
    if computed:
        raise KeyProblem("the script computes its operation key (operation(...) of something other than a string "
                         "literal), so the job's key cannot be known before it runs: pass --key KEY (the script's "
                         "operation() must then name the same key)")
    if len(set(keys)) > 1:
        raise KeyProblem(f"the script names several operation keys ({', '.join(sorted(set(keys)))}): pass --key")
    return keys[0] if keys else None
