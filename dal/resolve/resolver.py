"""The resolver: a pass over the whole AST before any statement runs.

It rejects undefined names, assignment to undeclared names, duplicate parameters, `break` and
`continue` outside a loop, `return` outside a function, and wrong arity in calls of builtins and of
functions known statically. It warns about `while` loops whose condition has no comparison.

It also decides where every variable lives, so the evaluator never looks a name up by string at
run time: a slot in the current frame, a cell (a local captured by a closure, fresh on every entry
of its block, so each loop iteration gets its own), a free cell of the closure, or a global.
Function bodies are resolved when their enclosing block ends, so functions may call functions and
read globals declared later in that block; function declarations are hoisted to their block start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from dal.core.errors import DalError, DalNameError, DalSyntaxError, DalTypeError
from dal.core.gcpause import gc_paused
from dal.core.records import Record, ValueRecord
from dal.syntax import ast
from dal.syntax.template import TemplateError, count_mismatch, parse_template

# How a name is reached at run time.
LOCAL, CELL, FREE, GLOBAL, BUILTIN = "local", "cell", "free", "global", "builtin"
FRAME_HEADER = 2  # slot 0: the closure's free cells; slot 1: the return value


class Binding(Record):
    __slots__ = ("name", "func", "slot", "span", "kind", "captured", "assigned", "fn_node")

    def __init__(
        self,
        name: str,
        func: FuncInfo,
        slot: int | None,  # None for globals
        span: ast.Span,
        kind: str = "let",  # let | fn | param | for | arg (a script argument)
        captured: bool = False,
        assigned: bool = False,
        fn_node: ast.FnDef | None = None,
    ) -> None:
        self.name = name
        self.func = func
        self.slot = slot
        self.span = span
        self.kind = kind
        self.captured = captured
        self.assigned = assigned
        self.fn_node = fn_node

    @property
    def is_global(self) -> bool:
        return self.slot is None


class FuncInfo(Record):
    """A function (or the module) being resolved: its frame size and free variables."""

    __slots__ = ("node", "parent", "nslots", "free", "free_sources", "_free_at")
    _shown = ("node", "parent", "nslots", "free", "free_sources")

    def __init__(
        self,
        node: Any,
        parent: FuncInfo | None,
        nslots: int = FRAME_HEADER,
        free: list[Binding] | None = None,
        # For each free variable, where the *enclosing* function finds the cell: (CELL, slot) or (FREE, i).
        free_sources: list[tuple[str, int]] | None = None,
    ) -> None:
        self.node = node
        self.parent = parent
        self.nslots = nslots
        self.free = [] if free is None else free
        self.free_sources = [] if free_sources is None else free_sources
        self._free_at = {id(fb): i for i, fb in enumerate(self.free)}  # a binding's index in `free`

    def free_index(self, b: Binding) -> int:
        i = self._free_at.get(id(b))
        if i is not None:
            return i
        assert self.parent is not None
        if b.func is self.parent:
            src = (CELL, b.slot)
        else:
            src = (FREE, self.parent.free_index(b))
        self.free.append(b)
        self.free_sources.append(src)  # type: ignore[arg-type]
        self._free_at[id(b)] = len(self.free) - 1
        return len(self.free) - 1


class Scope(Record):
    __slots__ = ("func", "parent", "names", "is_module_top", "deferred")

    def __init__(
        self,
        func: FuncInfo,
        parent: Scope | None,
        names: dict[str, Binding] | None = None,
        is_module_top: bool = False,
        deferred: list[Callable[[], None]] | None = None,
    ) -> None:
        self.func = func
        self.parent = parent
        self.names = {} if names is None else names
        self.is_module_top = is_module_top
        self.deferred = [] if deferred is None else deferred


class Resolution(ValueRecord):
    """What the compiler needs: for each node (by id), how to reach its name."""

    __slots__ = ("refs", "decls", "params", "funcs", "block_cells", "loop_reads", "errors", "warnings", "module")

    def __init__(
        self,
        # Name -> (LOCAL, Binding) | (FREE, i) | (GLOBAL|BUILTIN, name)
        refs: dict[int, tuple[str, Any]] | None = None,
        decls: dict[int, Binding] | None = None,  # Let/FnDef/For node -> binding
        params: dict[int, list[Binding]] | None = None,  # FnDef/FnExpr node -> param bindings
        funcs: dict[int, FuncInfo] | None = None,  # FnDef/FnExpr/Program -> FuncInfo
        block_cells: dict[int, list[int]] | None = None,  # Block/Program -> captured slots declared
        loop_reads: dict[int, tuple[str, ...]] | None = None,  # While node -> names the cond reads
        errors: list[DalError] | None = None,
        warnings: list[DalError] | None = None,
        module: FuncInfo | None = None,
    ) -> None:
        self.refs = {} if refs is None else refs
        self.decls = {} if decls is None else decls
        self.params = {} if params is None else params
        self.funcs = {} if funcs is None else funcs
        self.block_cells = {} if block_cells is None else block_cells
        self.loop_reads = {} if loop_reads is None else loop_reads
        self.errors = [] if errors is None else errors
        self.warnings = [] if warnings is None else warnings
        self.module = module


class ModuleState(ValueRecord):
    """Names already defined at top level (the REPL keeps this between inputs)."""

    __slots__ = ("globals", "module")

    def __init__(self, globals: dict[str, Binding] | None = None, module: FuncInfo | None = None) -> None:  # noqa: A002
        self.globals = {} if globals is None else globals
        self.module = module


def _conjuncts(expr: ast.Expr) -> list[ast.Expr]:
    out: list[ast.Expr] = []
    _add_conjuncts(expr, out)
    return out


def _add_conjuncts(expr: ast.Expr, out: list[ast.Expr]) -> None:
    # Appending, not concatenating: `a and b and ...` of n clauses costs n, not n**2 / 2.
    if isinstance(expr, ast.Logical) and expr.op == "and":
        _add_conjuncts(expr.left, out)
        _add_conjuncts(expr.right, out)
    else:
        out.append(expr)


def conjuncts(expr: ast.Expr) -> list[ast.Expr]:
    """The top-level `and` clauses of a condition, left to right."""
    return _conjuncts(expr)


def _names_in(expr: Any, out: dict[str, None]) -> None:
    """Add the names `expr` reads to `out` (a dict, for its order), in the order they first appear."""
    if isinstance(expr, ast.Name):
        out[expr.id] = None
        return
    if isinstance(expr, ast.FnExpr):
        return
    # The AST's node classes are attrs classes: their fields are `__attrs_attrs__` (what attrs.fields and
    # attrs.has read), walked without importing attrs here.
    for field in type(expr).__attrs_attrs__:
        if field.name == "span":
            continue
        v = getattr(expr, field.name)
        if isinstance(v, tuple):
            for item in v:
                if isinstance(item, tuple):
                    for x in item:
                        if _is_node(x):
                            _names_in(x, out)
                elif _is_node(item):
                    _names_in(item, out)
        elif _is_node(v):
            _names_in(v, out)


def _is_node(v: Any) -> bool:
    return getattr(type(v), "__attrs_attrs__", None) is not None


# Each "did you mean" compares the name with every name in sight: a script with thousands of undefined
# names gets one for the first of them only, and stays linear.
_MAX_SUGGESTIONS = 100


class Resolver:
    def __init__(
        self,
        filename: str,
        source: str,
        builtins: dict[str, tuple[int, int | None]],
        state: ModuleState | None = None,
        repl: bool = False,
    ) -> None:
        self.filename = filename
        self.source = source
        self.builtins = builtins
        self.res = Resolution()
        self.state = state or ModuleState()
        self.repl = repl
        self.loop_depth = 0
        self.func_depth = 0
        # For each name, its bindings in the blocks open now, innermost last: a look-up costs the same
        # however deeply the block that makes it nests. (Names at the module's top are in state.globals.)
        self.visible: dict[str, list[Binding]] = {}
        self.suggested = 0  # undefined names so far (only the first few get a "did you mean")

    # --- diagnostics ----------------------------------------------------------------------

    def _err(self, cls: type[DalError], message: str, span: ast.Span, help: str | None = None) -> None:
        self.res.errors.append(cls(message, span, filename=self.filename, source=self.source, help=help))

    def _warn(self, message: str, span: ast.Span, help: str | None = None) -> None:
        w = DalError(message, span, filename=self.filename, source=self.source, help=help)
        w.kind = "unbounded-loop"
        self.res.warnings.append(w)

    # --- scopes ---------------------------------------------------------------------------

    def _declare(self, scope: Scope, name: str, span: ast.Span, kind: str) -> Binding:
        existing = scope.names.get(name)
        if existing is not None and not (self.repl and scope.is_module_top):
            what = {"param": "parameter", "fn": "function", "for": "loop variable",
                    "arg": "script argument"}.get(existing.kind, "variable")
            self._err(
                DalNameError,
                f"`{name}` is already declared in this block (as a {what} at line {existing.span.line})",
                span,
                help=f"assign to it with `{name} = ...` or choose another name",
            )
            return existing
        if scope.is_module_top:
            b = Binding(name, scope.func, None, span, kind)
            self.state.globals[name] = b
        else:
            b = Binding(name, scope.func, scope.func.nslots, span, kind)
            scope.func.nslots += 1
            self.visible.setdefault(name, []).append(b)
        scope.names[name] = b
        return b

    def _lookup(self, scope: Scope, name: str) -> Binding | None:
        """The binding `name` means in `scope`, which is the innermost block open now (function bodies
        are resolved when their block ends, while the blocks around them are still open)."""
        shadows = self.visible.get(name)
        if shadows:
            return shadows[-1]
        return self.state.globals.get(name)

    def _close(self, scope: Scope) -> None:
        """The block of `scope` has ended: its names are no longer visible."""
        if scope.is_module_top:
            return
        visible = self.visible
        for name in scope.names:
            visible[name].pop()

    def _ref(self, scope: Scope, node: ast.Name) -> tuple[str, Any] | None:
        name = node.id
        b = self._lookup(scope, name)
        if b is None:
            if name in self.builtins:
                return (BUILTIN, name)
            return None
        return self._access(scope, b)

    def _access(self, scope: Scope, b: Binding) -> tuple[str, Any]:
        if b.is_global:
            return (GLOBAL, b.name)
        if b.func is scope.func:
            return (LOCAL, b)
        b.captured = True
        return (FREE, scope.func.free_index(b))

    # --- entry ----------------------------------------------------------------------------

    def resolve_program(self, prog: ast.Program) -> Resolution:
        module = self.state.module or FuncInfo(prog, None)
        self.state.module = module
        self.res.module = module
        self.res.funcs[id(prog)] = module
        scope = Scope(module, None, is_module_top=True)
        # Globals defined by earlier REPL inputs are visible through state.globals.
        self._block(prog.body, scope, prog)
        return self.res

    def _block(self, body: Iterable[ast.Stmt], scope: Scope, owner: Any) -> None:
        body = list(body)
        # Hoist function declarations so a block may call a function defined below.
        for st in body:
            if isinstance(st, ast.FnDef):
                b = self._declare(scope, st.name, st.span, "fn")
                b.fn_node = st
                self.res.decls[id(st)] = b
        for st in body:
            self._stmt(st, scope)
        for job in scope.deferred:
            job()
        scope.deferred.clear()
        self._close(scope)
        cells = [b.slot for b in scope.names.values() if b.captured and b.slot is not None]
        if cells:
            self.res.block_cells[id(owner)] = cells  # type: ignore[assignment]

    def _stmt(self, st: ast.Stmt, scope: Scope) -> None:
        match st:
            case ast.Let(name=name, value=value):
                self._expr(value, scope)
                self.res.decls[id(st)] = self._declare(scope, name, st.span, "let")
            case ast.Param(name=name):
                self.res.decls[id(st)] = self._declare(scope, name, st.span, "arg")
            case ast.Assign(target=target, value=value):
                self._expr(value, scope)
                if isinstance(target, ast.Name):
                    ref = self._ref(scope, target)
                    if ref is None or ref[0] == BUILTIN:
                        self._err(
                            DalNameError,
                            f"cannot assign to `{target.id}`: it was never declared",
                            target.span,
                            help=f"declare it first with `let {target.id} = ...`",
                        )
                    elif (b := self._lookup(scope, target.id)) is not None and b.kind == "arg":
                        self._err(
                            DalNameError,
                            f"cannot assign to `{target.id}`: it is the script's argument (param at line "
                            f"{b.span.line}), the value the run was given",
                            target.span,
                            help=f"keep a changed value in a new name: `let my_{target.id} = ...`",
                        )
                    else:
                        assert b is not None
                        b.assigned = True
                        self.res.refs[id(target)] = ref
                else:
                    self._expr(target, scope)
            case ast.ExprStmt(expr=expr):
                self._expr(expr, scope)
            case ast.If(branches=branches, orelse=orelse):
                for cond, blk in branches:
                    self._expr(cond, scope)
                    self._block(blk.body, Scope(scope.func, scope), blk)
                if orelse is not None:
                    self._block(orelse.body, Scope(scope.func, scope), orelse)
            case ast.While(cond=cond, body=body):
                self._expr(cond, scope)
                names: dict[str, None] = {}
                _names_in(cond, names)
                self.res.loop_reads[id(st)] = tuple(names)
                if not any(isinstance(c, ast.Binary) and c.op in ("<", "<=", ">", ">=") for c in _conjuncts(cond)):
                    self._warn(
                        "this `while` loop has no declared bound: its condition has no `<`, `<=`, `>` or `>=` "
                        "clause, so only the global step budget stops it",
                        cond.span,
                        help="add a bound, e.g. `while ... and attempt < max_attempts`",
                    )
                self.loop_depth += 1
                self._block(body.body, Scope(scope.func, scope), body)
                self.loop_depth -= 1
            case ast.For(var=var, iterable=iterable, body=body):
                self._expr(iterable, scope)
                inner = Scope(scope.func, scope)
                self.res.decls[id(st)] = self._declare(inner, var, st.span, "for")
                names = {}
                _names_in(iterable, names)
                self.res.loop_reads[id(st)] = tuple([var, *names])
                self.loop_depth += 1
                self._block(body.body, inner, body)
                self.loop_depth -= 1
            case ast.FnDef():
                self._function(st, scope)
            case ast.Break() | ast.Continue():
                if self.loop_depth == 0:
                    word = "break" if isinstance(st, ast.Break) else "continue"
                    self._err(DalSyntaxError, f"`{word}` outside a loop", st.span)
            case ast.Return(value=value):
                if self.func_depth == 0:
                    self._err(
                        DalSyntaxError,
                        "`return` outside a function",
                        st.span,
                        help="use `finish(value)` to end the script with a result",
                    )
                if value is not None:
                    self._expr(value, scope)
            case _:  # pragma: no cover - the parser builds no other statement
                raise AssertionError(f"unknown statement {st!r}")

    def _function(self, node: ast.FnDef | ast.FnExpr, scope: Scope) -> None:
        info = FuncInfo(node, scope.func)
        self.res.funcs[id(node)] = info
        seen: dict[str, ast.Span] = {}
        for p in node.params:
            if p in seen:
                self._err(DalNameError, f"duplicate parameter `{p}`", node.span)
            seen[p] = node.span

        def body_job() -> None:
            saved = (self.loop_depth, self.func_depth)
            self.loop_depth, self.func_depth = 0, self.func_depth + 1
            inner = Scope(info, scope)
            params = []
            for p in node.params:
                if p in inner.names:
                    params.append(inner.names[p])
                    continue
                params.append(self._declare(inner, p, node.span, "param"))
            self.res.params[id(node)] = params
            self._block(node.body.body, inner, node.body)
            self.loop_depth, self.func_depth = saved

        scope.deferred.append(body_job)

    def _expr(self, e: ast.Expr, scope: Scope) -> None:
        match e:
            case ast.Literal():
                pass
            case ast.Name():
                ref = self._ref(scope, e)
                if ref is None:
                    self._undefined(e, scope)
                else:
                    self.res.refs[id(e)] = ref
            case ast.ListLit(items=items):
                for item in items:
                    self._expr(item, scope)
            case ast.MapLit(entries=entries):
                for _, v in entries:
                    self._expr(v, scope)
            case ast.Unary(operand=operand):
                self._expr(operand, scope)
            case ast.Binary(left=left, right=right) | ast.Logical(left=left, right=right):
                self._expr(left, scope)
                self._expr(right, scope)
            case ast.Call(callee=callee, args=args):
                self._expr(callee, scope)
                for a in args:
                    self._expr(a, scope)
                self._check_arity(e, scope)
            case ast.Field(obj=obj):
                self._expr(obj, scope)
            case ast.Index(obj=obj, index=index):
                self._expr(obj, scope)
                self._expr(index, scope)
            case ast.Slice(obj=obj, start=start, stop=stop):
                self._expr(obj, scope)
                for bound in (start, stop):
                    if bound is not None:
                        self._expr(bound, scope)
            case ast.FnExpr():
                self._function(e, scope)
            case _:  # pragma: no cover
                raise AssertionError(f"unknown expression {e!r}")

    def _undefined(self, e: ast.Name, scope: Scope) -> None:
        close: list[str] = []
        self.suggested += 1
        if self.suggested <= _MAX_SUGGESTIONS:
            import difflib

            known: set[str] = set(self.builtins) | set(self.state.globals)
            s: Scope | None = scope
            while s is not None:
                known |= set(s.names)
                s = s.parent
            close = difflib.get_close_matches(e.id, sorted(known), n=1)
        help = f"did you mean `{close[0]}`?" if close else f"declare it with `let {e.id} = ...`"
        self._err(DalNameError, f"undefined name `{e.id}`", e.span, help=help)

    def _check_arity(self, call: ast.Call, scope: Scope) -> None:
        callee = call.callee
        if not isinstance(callee, ast.Name):
            return
        n = len(call.args)
        ref = self.res.refs.get(id(callee))
        if ref is None:
            return
        if ref[0] == BUILTIN:
            lo, hi = self.builtins[callee.id]
            if n < lo or (hi is not None and n > hi):
                want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
                self._err(
                    DalTypeError,
                    f"`{callee.id}` takes {want} argument{'s' if want != '1' else ''}, but {n} "
                    f"{'was' if n == 1 else 'were'} given",
                    call.span,
                )
            elif callee.id == "format":
                self._check_template(call)
            return
        self._check_user_arity(call, scope, callee, n)

    def _check_template(self, call: ast.Call) -> None:
        """`format("literal", ...)`: the template is read now, so a call that does not fit it is found before
        anything runs (the builtin reads it again, the same way, when the template is built at run time)."""
        template = call.args[0]
        if not (isinstance(template, ast.Literal) and type(template.value) is str):
            return
        try:
            _, count = parse_template(template.value)
        except TemplateError as e:
            self._err(DalTypeError, e.message, template.span, help=e.help)
            return
        if count != len(call.args) - 1:
            self._err(DalTypeError, count_mismatch(count, len(call.args) - 1), call.span,
                      help="give format one value per placeholder")

    def _check_user_arity(self, call: ast.Call, scope: Scope, callee: ast.Name, n: int) -> None:
        b = self._lookup(scope, callee.id)
        if b is not None and b.kind == "fn" and b.fn_node is not None and not b.assigned:
            want_n = len(b.fn_node.params)
            if want_n != n:
                # `assigned` may still become true later in the block; re-check when it ends.
                def later(b: Binding = b, want_n: int = want_n) -> None:
                    if not b.assigned:
                        self._err(
                            DalTypeError,
                            f"`{callee.id}` takes {want_n} argument{'s' if want_n != 1 else ''}, but {n} "
                            f"{'was' if n == 1 else 'were'} given",
                            call.span,
                            help=f"`{callee.id}` is defined at line {b.span.line}",
                        )

                scope.deferred.append(later)


def resolve(
    program: ast.Program,
    *,
    filename: str,
    source: str,
    builtins: dict[str, tuple[int, int | None]],
    state: ModuleState | None = None,
    repl: bool = False,
) -> Resolution:
    """Resolve `program`. Errors and warnings are collected, not raised: the caller decides."""
    r = Resolver(filename, source, builtins, state, repl)
    try:
        with gc_paused():
            return r.resolve_program(program)
    except RecursionError:
        res = r.res
        res.errors.append(
            DalSyntaxError(
                "the script is nested too deeply", program.span, filename=filename, source=source,
                help="split deeply nested expressions into several statements",
            )
        )
        return res
