"""The canonical layout of DAL source (`dal fmt`) and the AST unparser it is built on.

One statement per line, blocks indented by four spaces, `}` on its own line, parentheses only where
precedence needs them, long lists, maps and argument lists broken one item per line. Comments are
kept: a comment on its own line stays before the statement that followed it, a comment at the end
of a line stays at the end of that statement's line. At most one blank line between statements is
kept. `parse(unparse(tree)) == tree` for every tree; formatting is idempotent.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from dal.core.errors import DalSyntaxError
from dal.core.stack import in_big_stack
from dal.syntax import ast
from dal.syntax.parser import parse

INDENT = "    "
WIDTH = 100

# Binding strength of each expression form (higher binds tighter).
P_OR, P_AND, P_NOT, P_CMP, P_SUM, P_PROD, P_UNARY, P_POSTFIX, P_ATOM = range(1, 10)
_BIN_PREC = {
    "==": P_CMP, "!=": P_CMP, "<": P_CMP, "<=": P_CMP, ">": P_CMP, ">=": P_CMP,
    "+": P_SUM, "-": P_SUM, "*": P_PROD, "/": P_PROD, "%": P_PROD,
}


def string_literal(s: str) -> str:
    text = json.dumps(s, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates must stay escaped
        text = json.dumps(s, ensure_ascii=True)
    return text


def _prec(e: ast.Expr) -> int:
    t = type(e)
    if t is ast.Logical:
        return P_OR if e.op == "or" else P_AND
    if t is ast.Unary:
        return P_NOT if e.op == "not" else P_UNARY
    if t is ast.Binary:
        return _BIN_PREC[e.op]
    if t in (ast.Call, ast.Field, ast.Index, ast.Slice):
        return P_POSTFIX
    return P_ATOM


class _Unparser:
    def __init__(self, comments: list[tuple[int, int, str, bool]] | None = None, source: str = "") -> None:
        self.lines: list[str] = []
        self.comments = list(comments or [])  # (offset, line, text, trailing)
        self.source = source
        self.flat_limit = WIDTH
        self.last_end: int | None = None  # source offset of what was emitted last in this block

    # --- expressions -------------------------------------------------------------------------

    def expr(self, e: ast.Expr, min_prec: int = 0, depth: int = 0) -> str:
        text = self._expr(e, depth)
        if _prec(e) < min_prec:
            return f"({text})"
        return text

    def _expr(self, e: ast.Expr, depth: int) -> str:
        match e:
            case ast.Literal(value=v):
                if v is None:
                    return "null"
                if v is True:
                    return "true"
                if v is False:
                    return "false"
                if isinstance(v, str):
                    return string_literal(v)
                return repr(v)
            case ast.Name(id=name):
                return name
            case ast.ListLit(items=items):
                return self._seq("[", [self.expr(x, 0, depth + 1) for x in items], "]", depth)
            case ast.MapLit(entries=entries):
                parts = [f"{string_literal(k)}: {self.expr(v, 0, depth + 1)}" for k, v in entries]
                return self._seq("{", parts, "}", depth, pad=True)
            case ast.Unary(op="not", operand=x):
                return "not " + self.expr(x, P_NOT, depth)
            case ast.Unary(op=op, operand=x):
                inner = self.expr(x, P_UNARY, depth)
                # `- -x` must not become `--x` (harmless in DAL, but unclear to a reader)
                return op + (" " if inner.startswith("-") else "") + inner
            case ast.Logical(op=op, left=l, right=r):
                p = P_OR if op == "or" else P_AND
                return f"{self.expr(l, p, depth)} {op} {self.expr(r, p + 1, depth)}"
            case ast.Binary(op=op, left=l, right=r):
                p = _BIN_PREC[op]
                if p == P_CMP:
                    return f"{self.expr(l, P_SUM, depth)} {op} {self.expr(r, P_SUM, depth)}"
                return f"{self.expr(l, p, depth)} {op} {self.expr(r, p + 1, depth)}"
            case ast.Call(callee=c, args=args):
                return self.expr(c, P_POSTFIX, depth) + self._seq(
                    "(", [self.expr(a, 0, depth + 1) for a in args], ")", depth
                )
            case ast.Field(obj=o, name=name):
                return f"{self.expr(o, P_POSTFIX, depth)}.{name}"
            case ast.Index(obj=o, index=i):
                return f"{self.expr(o, P_POSTFIX, depth)}[{self.expr(i, 0, depth)}]"
            case ast.Slice(obj=o, start=a, stop=b):
                lo = "" if a is None else self.expr(a, 0, depth)
                hi = "" if b is None else self.expr(b, 0, depth)
                return f"{self.expr(o, P_POSTFIX, depth)}[{lo}:{hi}]"
            case ast.FnExpr(params=params, body=body):
                sub = _Unparser()
                sub.block_lines(body.body, depth + 1)
                inner = "\n".join(sub.lines)
                head = f"fn({', '.join(params)})"
                if not sub.lines:
                    return head + " {}"
                return f"{head} {{\n{inner}\n{INDENT * depth}}}"
        raise AssertionError(f"cannot unparse {e!r}")  # pragma: no cover

    def _seq(self, open_: str, parts: list[str], close: str, depth: int, pad: bool = False) -> str:
        if not parts:
            return open_ + close
        one = ", ".join(parts)
        if len(one) + depth * 4 <= self.flat_limit and "\n" not in one:
            return f"{open_} {one} {close}" if pad else f"{open_}{one}{close}"
        inner = INDENT * (depth + 1)
        body = ",\n".join(inner + p for p in parts)
        return f"{open_}\n{body},\n{INDENT * depth}{close}"

    # --- statements --------------------------------------------------------------------------

    def _emit(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    def _fit(self, depth: int, build: Any) -> str:
        """Render with lists, maps and arguments flat when the line fits, broken when it does not."""
        for limit in (WIDTH, 60, 30, 0):
            self.flat_limit = limit
            text = build()
            first = text.split("\n", 1)[0]
            if len(first) + depth * 4 <= WIDTH and all(len(x) <= WIDTH for x in text.split("\n")[1:]):
                break
        self.flat_limit = WIDTH
        return text

    def _flush_comments(self, before: int, depth: int) -> None:
        while self.comments and self.comments[0][0] < before:
            off, _, text, trailing = self.comments.pop(0)
            last = self.lines[-1].lstrip() if self.lines else ""
            if trailing and last and not last.startswith("#"):
                self.lines[-1] += "  " + text
            else:
                self._blank_line_if(off)
                self._emit(depth, text)
            self.last_end = off + len(text)

    def _blank_line_if(self, start: int) -> None:
        """Keep one blank line where the source has at least one before `start` (not at a block's top)."""
        if self.last_end is None or not self.source or not self.lines or self.lines[-1] == "":
            return
        # a blank line is a whole line with nothing on it (a comment counts as something)
        whole_lines = self.source[self.last_end : start].split("\n")[1:-1]
        if any(not line.strip() for line in whole_lines):
            self.lines.append("")

    def block_lines(self, stmts: tuple[ast.Stmt, ...], depth: int, end: int | None = None) -> None:
        self.last_end = None
        for st in stmts:
            self._flush_comments(st.span.start, depth)
            self._blank_line_if(st.span.start)
            self.stmt(st, depth)
            # comments inside a statement that spans lines (in a broken list or call) follow it
            self._flush_comments(st.span.end, depth)
            self.last_end = st.span.end
            self._trailing(st.span.end)
        if end is not None:
            self._flush_comments(end, depth)

    def _trailing(self, end: int) -> None:
        """A comment on the same source line right after a statement stays at the end of its line."""
        if not self.comments or not self.source:
            return
        off, _, text, trailing = self.comments[0]
        if trailing and off >= end and "\n" not in self.source[end:off]:
            self.comments.pop(0)
            self.lines[-1] += "  " + text
            self.last_end = off + len(text)

    def _body(self, head: str, block: ast.Block, depth: int) -> None:
        if not block.body and not any(c[0] < block.span.end for c in self.comments[:1]):
            self._emit(depth, head + " {}")
            return
        self._emit(depth, head + " {")
        self.block_lines(block.body, depth + 1, end=block.span.end)
        self._emit(depth, "}")

    def stmt(self, st: ast.Stmt, depth: int) -> None:
        match st:
            case ast.Let(name=name, value=v):
                self._emit(depth, self._fit(depth, lambda: f"let {name} = {self.expr(v, 0, depth)}"))
            case ast.Param(name=name, type=kind, default=default):
                value = f" = {self.expr(ast.Literal(default), 0, depth)}" if st.has_default else ""
                self._emit(depth, f"param {name}: {kind}{value}")
            case ast.Assign(target=t, value=v):
                self._emit(depth, self._fit(depth, lambda: f"{self.expr(t, 0, depth)} = {self.expr(v, 0, depth)}"))
            case ast.ExprStmt(expr=e):
                self._emit(depth, self._fit(depth, lambda: self.expr(e, 0, depth)))
            case ast.If(branches=branches, orelse=orelse):
                for i, (cond, blk) in enumerate(branches):
                    head = ("if " if i == 0 else "} else if ") + self.expr(cond, 0, depth)
                    if i == 0:
                        self._emit(depth, head + " {")
                    else:
                        self.lines[-1] = INDENT * depth + head + " {"
                    self.block_lines(blk.body, depth + 1, end=blk.span.end)
                    self._emit(depth, "}")
                if orelse is not None:
                    self.lines[-1] = INDENT * depth + "} else {"
                    self.block_lines(orelse.body, depth + 1, end=orelse.span.end)
                    self._emit(depth, "}")
            case ast.While(cond=cond, body=body):
                self._body("while " + self.expr(cond, 0, depth), body, depth)
            case ast.For(var=var, iterable=it, body=body):
                self._body(f"for {var} in {self.expr(it, 0, depth)}", body, depth)
            case ast.FnDef(name=name, params=params, body=body):
                self._body(f"fn {name}({', '.join(params)})", body, depth)
            case ast.Break():
                self._emit(depth, "break")
            case ast.Continue():
                self._emit(depth, "continue")
            case ast.Return(value=v):
                if v is None:
                    self._emit(depth, "return")
                else:
                    self._emit(depth, self._fit(depth, lambda: "return " + self.expr(v, 0, depth)))
            case _:  # pragma: no cover
                raise AssertionError(f"cannot unparse {st!r}")


def _comments(source: str) -> list[tuple[int, int, str, bool]]:
    """Every `#` comment outside strings: (offset, line, text, is it after code on its line)."""
    out = []
    i, n, line, line_has_code = 0, len(source), 1, False
    while i < n:
        ch = source[i]
        if ch == "\n":
            line += 1
            line_has_code = False
        elif ch == '"':
            j = i + 1
            while j < n and source[j] not in '"\n':
                j += 2 if source[j] == "\\" else 1
            i = j
            line_has_code = True
        elif ch == "#":
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append((i, line, source[i:j].rstrip(), line_has_code))
            i = j
            continue
        elif not ch.isspace():
            line_has_code = True
        i += 1
    return out


def unparse(program: ast.Program) -> str:
    """Source text for a tree (no comments)."""
    u = _Unparser()
    u.block_lines(program.body, 0)
    return "\n".join(u.lines) + ("\n" if u.lines else "")


def format_source(source: str, filename: str = "<string>") -> str:
    """The canonical layout of `source`, comments kept. Raises DalSyntaxError for bad input."""
    try:
        return in_big_stack(lambda: _format(source, filename))
    except RecursionError:
        raise DalSyntaxError(
            "the script is nested too deeply to format", ast.Span(1, 1, 1, 2, 0, 1),
            filename=filename, source=source,
        ) from None


MAX_FORMAT_DEPTH = 200  # levels of brackets and blocks; the layout of deeper code grows quadratically


def _bracket_depth(program: ast.Program) -> int:
    """How deeply lists, maps, calls and blocks nest (iteratively: the tree may be very deep)."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(program, 0)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, tuple):
            todo.extend((x, depth) for x in node)
            continue
        if not attrs.has(type(node)) or isinstance(node, ast.Span):
            continue
        if isinstance(node, ast.ListLit | ast.MapLit | ast.Call | ast.Block | ast.FnExpr):
            depth += 1
            deepest = max(deepest, depth)
        todo.extend((getattr(node, a.name), depth) for a in attrs.fields(type(node)) if a.name != "span")
    return deepest


def _format(source: str, filename: str) -> str:
    program = parse(source, filename)
    if _bracket_depth(program) > MAX_FORMAT_DEPTH:
        raise DalSyntaxError(
            f"the script is nested too deeply to format (more than {MAX_FORMAT_DEPTH} levels of brackets)",
            program.span, filename=filename, source=source,
        )
    u = _Unparser(_comments(source), source)
    u.block_lines(program.body, 0, end=len(source) + 1)
    return "\n".join(u.lines).rstrip() + "\n" if u.lines else ""
