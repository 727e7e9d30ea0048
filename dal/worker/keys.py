"""The operation key a script names for itself: a literal `operation("...")` (or one built from the script's
arguments), found before it runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dal.runner.opkeys import script_key_problem
from dal.syntax import ast


class KeyProblem(Exception):
    """The script's own operation key cannot be known before it runs, or is one a script may not choose;
    the message says what to do, `span` (when known) is the call at fault."""

    def __init__(self, message: str, span: ast.Span | None = None) -> None:
        super().__init__(message)
        self.span = span


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


def _folded(e: Any, args: Mapping[str, Any]) -> str | None:
    """The text of a key built from string literals, the script's arguments and `+` (`"send-" + to`,
    `"poll-" + str(n)`), as the run will build it; None when it is built from anything else."""
    if isinstance(e, ast.Literal) and isinstance(e.value, str):
        return e.value
    if isinstance(e, ast.Name) and isinstance(args.get(e.id), str):
        return args[e.id]
    if (isinstance(e, ast.Call) and isinstance(e.callee, ast.Name) and e.callee.id == "str" and len(e.args) == 1
            and isinstance(e.args[0], ast.Name) and e.args[0].id in args):
        v = args[e.args[0].id]
        return ("true" if v else "false") if isinstance(v, bool) else str(v)
    if isinstance(e, ast.Binary) and e.op == "+":
        left, right = _folded(e.left, args), _folded(e.right, args)
        return None if left is None or right is None else left + right
    return None


def literal_key(program: ast.Program, args: Mapping[str, Any] | None = None) -> str | None:
    """The key of the script's `operation("K")` calls, when every one is the same string literal (or is
    built from literals and the script's arguments `args`, bound: dal/eval/args.py); None when it calls no
    operation(). KeyProblem when a call's key is computed otherwise, or two calls name different keys,
    or a key is one a script may not choose (dal/runner/opkeys.py: empty, not valid Unicode, DAL's own
    prefixes; the builtin refuses the same keys when the script runs), or the script defines its own
    `operation` (then nothing here can tell what its calls mean)."""
    keys: list[str] = []
    computed = False
    args = dict(args or {})
    refused: KeyProblem | None = None
    stack: list[Any] = [program]
    while stack and args:  # a name declared again anywhere: a key read from it may not be the argument
        node = stack.pop()
        if isinstance(node, ast.Let | ast.FnDef | ast.For | ast.FnExpr):
            for name in (getattr(node, "name", None), getattr(node, "var", None), *getattr(node, "params", ())):
                args.pop(name, None)
        stack.extend(_children(node))
    stack = [program]
    while stack:  # no recursion: a script may nest 1,000 levels deep
        node = stack.pop()
        if isinstance(node, ast.FnDef | ast.Let | ast.Param) and node.name == "operation":
            return None  # its own function or variable: not the builtin
        if isinstance(node, ast.Call) and isinstance(node.callee, ast.Name) and node.callee.id == "operation":
            arg = node.args[0] if len(node.args) == 1 else None
            text = _folded(arg, args) if arg is not None else None
            if text is not None:
                if refused is None and (problem := script_key_problem(text)) is not None:
                    refused = KeyProblem(problem, arg.span)
                keys.append(text)
            else:
                computed = True
        stack.extend(_children(node))
    if refused is not None:
        raise refused
    if computed:
        raise KeyProblem("the script computes its operation key (operation(...) of something other than a string "
                         "literal), so the job's key cannot be known before it runs: pass --key KEY (the script's "
                         "operation() must then name the same key)")
    if len(set(keys)) > 1:
        raise KeyProblem(f"the script names several operation keys ({', '.join(sorted(set(keys)))}): pass --key")
    return keys[0] if keys else None
