"""The closure compiler: every AST node becomes a Python closure once, before the script runs.

Running a script is then calling closures; nothing dispatches on node types at run time. A
statement closure takes the current frame (a list: slot 0 the closure's free cells, slot 1 the
return value, then the locals) and returns None, or BREAK / CONTINUE / RETURN to unwind.

Steps: each statement charges `1 + (number of expression nodes it evaluates)` when it starts, all at
once (so `a and b` costs the same whether or not `b` runs: counts stay deterministic and cheap).
Loop conditions charge per evaluation, `for` charges one step per item bound. Charges that nothing
could tell apart from one another (no call between them) are made at once, falling back to one charge
per statement near a budget, the clock check or an interrupt: see "program and blocks" below. Every
charge is written by the emitter in dal/eval/charges.py; the templates here only say where it goes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from dal.core.errors import (
    BudgetExhausted,
    DalError,
    DalNameError,
    DalRuntimeError,
    DalTypeError,
    Interrupted,
    StackFrame,
)
from dal.eval import ops
from dal.eval.charges import Charges, indent
from dal.eval.runtime import FailSignal, FinishSignal, LoopFrame, LoopSite, Runtime, SkipSignal, WaitSignal
from dal.eval.values import INT_LIMIT, UNSET, Builtin, Cell, Function, a_type_name, type_name
from dal.resolve.resolver import BUILTIN, FREE, GLOBAL, LOCAL, Resolution, conjuncts
from dal.syntax import ast

BREAK = "break"
CONTINUE = "continue"
RETURN = "return"

Frame = list[Any]
Code = Callable[[Frame], Any]


def node_cost(e: Any) -> int:
    """Steps an expression costs: one per node, a function literal counts once."""
    if e is None:
        return 0
    t = type(e)
    if t is ast.Literal or t is ast.Name or t is ast.FnExpr:
        return 1
    if t is ast.ListLit:
        return 1 + sum(node_cost(x) for x in e.items)
    if t is ast.MapLit:
        return 1 + sum(node_cost(v) for _, v in e.entries)
    if t is ast.Unary:
        return 1 + node_cost(e.operand)
    if t is ast.Binary or t is ast.Logical:
        return 1 + node_cost(e.left) + node_cost(e.right)
    if t is ast.Call:
        return 1 + node_cost(e.callee) + sum(node_cost(a) for a in e.args)
    if t is ast.Field:
        return 1 + node_cost(e.obj)
    if t is ast.Index:
        return 1 + node_cost(e.obj) + node_cost(e.index)
    if t is ast.Slice:
        return 1 + node_cost(e.obj) + node_cost(e.start) + node_cost(e.stop)
    raise AssertionError(f"unknown node {e!r}")  # pragma: no cover


def _loop_exit_reason(exc: BaseException) -> str:
    if isinstance(exc, BudgetExhausted):
        return "budget"
    if isinstance(exc, Interrupted):
        return "interrupted"
    if isinstance(exc, FinishSignal):
        return "finish"
    if isinstance(exc, FailSignal):
        return "fail"
    if isinstance(exc, WaitSignal):
        return "waiting"
    if isinstance(exc, SkipSignal):  # operation() named a completed run: the script stops cleanly
        return "finish"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return "error"


# --- specialised closures ---------------------------------------------------------------------
# The hot operators are generated from one template per (operator, operand kinds), once per
# process: a name in a local slot or a global, or a literal, is read inline instead of through its
# own closure, and two integers (or two strings) take the Python operator directly. Anything else
# falls to the strict slow path in `ops`, which raises DAL's type errors.

_INT_OPS = {"+", "-", "*", "%", "<", "<=", ">", ">="}
_STR_OPS = {"+", "<", "<=", ">", ">="}
_COMPARISONS = {"<", "<=", ">", ">=", "==", "!="}
_TEMPLATE_CACHE: dict[tuple[Any, ...], Callable[..., Code]] = {}

# How a template reads an operand into `v`: `c` is the slot, global name, constant or closure; a
# global that is not there yet goes through its closure `cf`, which raises the DAL error.
_READ = {
    "call": "{v} = {c}(f)",
    "slot": "{v} = f[{c}]",
    "glob": "try:\n        {v} = G[{c}]\n    except KeyError:\n        {v} = {c}f(f)",
    "const": "{v} = {c}",
    "cint": "{v} = {c}",
}


def _template(key: tuple[Any, ...], lines: list[str] | Callable[[], list[str]]) -> Callable[..., Code]:
    """The `make` function of a template; `lines` (or the function that writes them, called only the first
    time `key` is seen) is its text."""
    made = _TEMPLATE_CACHE.get(key)
    if made is None:
        if callable(lines):
            lines = lines()
        ns: dict[str, Any] = {}
        exec("\n".join(lines), ns)  # noqa: S102 - our own template text, never the script's
        made = _TEMPLATE_CACHE[key] = ns["make"]
    return made


# Integers stay within MAX_INT_DIGITS digits (`NL < v < L`) and strings within the memory budget's size
# (`MS` characters): a result outside goes to the slow path, which raises the located error. A literal
# is never negative, so `x + 1` can only overflow upward and `x - 1` downward.
_GROWS = {"+", "-", "*"}


def _int_bound(op: str, rk: str) -> str:
    """The test that the integer result `v` of `x op y` is within DAL's size. The comparison with a small
    constant comes first: CPython specialises it for small integers, while one with `L` (a 33,000-bit
    integer) takes the generic path; so a small result costs a few nanoseconds."""
    if rk == "cint" and op == "+":
        return "(v < 1073741823 or v < L)"
    if rk == "cint" and op == "-":
        return "(v > -1073741823 or v > NL)"
    return "(-1073741823 < v < 1073741823 or NL < v < L)"


def _binary_factory(op: str, lk: str, rk: str, nonzero: bool) -> Callable[..., Code]:
    """make(a, af, b, bf, G, slow, span, comp, L, NL, MS) -> closure computing `a op b` with DAL's types."""
    lines = [
        "def make(a, af, b, bf, G, slow, span, comp, L, NL, MS):",
        "  def binop(f):",
        "    " + _READ[lk].format(v="x", c="a"),
        "    " + _READ[rk].format(v="y", c="b"),
    ]
    if op in ("==", "!="):
        lines += [
            "    tx = type(x)",
            "    if tx is type(y) and (tx is str or tx is int):",
            f"        return x {op} y",
        ]
    else:
        test = "type(x) is int" if rk == "cint" else "type(x) is int and type(y) is int"
        if op == "%" and not nonzero:
            test += " and y"
        if op in _GROWS:
            lines += [f"    if {test}:", f"        v = x {op} y", f"        if {_int_bound(op, rk)}:",
                      "            return v"]
        else:
            lines += [f"    if {test}:", f"        return x {op} y"]
        if op == "+" and rk != "cint":
            lines += ["    if type(x) is str and type(y) is str and len(x) + len(y) <= MS:", "        return x + y"]
        elif op in _STR_OPS and rk != "cint":
            lines += ["    if type(x) is str and type(y) is str:", f"        return x {op} y"]
    lines += ["    return slow(x, y, span, comp)", "  return binop"]
    return _template(("bin", op, lk, rk, nonzero), lines)


def _field_factory(kind: str) -> Callable[..., Code]:
    """make(a, af, G, key, get_field, span, comp) -> closure reading `obj.key`."""
    return _template(("field", kind), [
        "def make(a, af, G, key, get_field, span, comp):",
        "  def field(f):",
        "    " + _READ[kind].format(v="o", c="a"),
        "    if type(o) is dict:",
        "        try:",
        "            return o[key]",
        "        except KeyError:",
        "            pass",
        "    return get_field(o, key, span, comp)",
        "  return field",
    ])


def _call_free(e: Any) -> bool:
    """True when evaluating `e` calls nothing (no user function, no builtin) and makes no function."""
    t = type(e)
    if t is ast.Literal or t is ast.Name:
        return True
    if t is ast.Call or t is ast.FnExpr:
        return False
    if t is ast.ListLit:
        return all(_call_free(x) for x in e.items)
    if t is ast.MapLit:
        return all(_call_free(v) for _, v in e.entries)
    if t is ast.Unary:
        return _call_free(e.operand)
    if t is ast.Binary or t is ast.Logical:
        return _call_free(e.left) and _call_free(e.right)
    if t is ast.Field:
        return _call_free(e.obj)
    if t is ast.Index:
        return _call_free(e.obj) and _call_free(e.index)
    if t is ast.Slice:
        return _call_free(e.obj) and (e.start is None or _call_free(e.start)) and (e.stop is None or _call_free(e.stop))
    return False


class _Stmt:
    """A compiled statement: the steps it charges when it starts, its code with that charge inlined
    (`charged`) and without it (`raw`, for a caller that charged it already). `straight`: it calls
    nothing (no user function, no builtin) and always goes on to the next statement, so nothing can
    read the step counter between its charge and the next statement's."""

    __slots__ = ("cost", "span", "raw", "charged", "straight")

    def __init__(self, cost: int, span: ast.Span, raw: Code, charged: Code) -> None:
        self.cost = cost
        self.span = span
        self.raw = raw
        self.charged = charged
        self.straight = False


class _Unit:
    """Compiled statements that may be charged at once: a run of straight statements and the statement
    after them, a block, a loop body. `cost` is what they charge before anything can read the counter;
    `code` charges it itself; `pre` expects its caller to have charged `cost` already (and gives back
    what a failing statement did not reach); `exact` charges statement by statement, for when the
    budget, the clock check or an interrupt falls inside `cost`. With `cost` 0 the three are one."""

    __slots__ = ("cost", "code", "pre", "exact")

    def __init__(self, cost: int, code: Code, pre: Code, exact: Code) -> None:
        self.cost = cost
        self.code = code
        self.pre = pre
        self.exact = exact


# At most this many `if`s of one block are compiled with the statements after them (see `_if_next`):
# each adds a Python call level when the script runs.
_IF_NEXT_MAX = 16
# At most this many statements are charged at once (`_group`): each group length is a template of its
# own, as long as the group, so an unbounded group made a script of n `let`s compile in O(n**2).
_GROUP_MAX = 32


def _noop(f: Frame) -> None:
    return None


# CPython 3.11 keeps Python frames in chunks of 16 KB, allocated with mmap when a frame does not fit in
# the current one and freed with munmap as soon as the first frame of a chunk returns. A recursion that
# keeps crossing a chunk boundary (fib near its leaves) pays a mmap and a munmap per crossing: fib(25)
# made 25,000 of each, which doubled its run time, and whether a program hit a boundary depended on the
# exact frame sizes of the compiled closures. So a script's entry frame declares a stack of `_ROOM` words
# that it never uses: it gets a chunk of its own (2 MB, of which only the pages used are touched), and
# the script's frames fill the rest of that chunk: room for some 1,200 levels of DAL calls (the default
# limit is 1,000).
_ROOM = 132_000


def _with_stack_room(code: Code) -> Code:
    def run(f: Frame) -> Any:
        return code(f)

    run.__code__ = run.__code__.replace(co_stacksize=run.__code__.co_stacksize + _ROOM)
    return run


class Compiler:
    def __init__(
        self,
        rt: Runtime,
        res: Resolution,
        *,
        filename: str,
        source: str,
        builtins: dict[str, Builtin],
        globals_: dict[str, Any],
        count_steps: bool = True,
        merge: bool = True,
    ) -> None:
        self.rt = rt
        self.res = res
        self.filename = filename
        self.source = source
        self.builtins = builtins
        self.G = globals_
        # Off only for the benchmark that measures what step accounting costs: nothing is charged, loop
        # tests and items included.
        self.count_steps = count_steps
        # Off only in tests: every statement and every loop test charged on its own, the reference that
        # the merged charges must match exactly (tests/test_steps_equivalence.py).
        self.merge = merge
        self.charges = Charges(count_steps)

    @functools.cached_property
    def invoke(self) -> Callable[[Function, list[Any], ast.Span], Any]:
        """Call a user function: new frame, depth check, call stack on error. Made when first needed (its
        template costs a fifth of a millisecond to compile, and a one-line script calls no function)."""
        return self._function_call(None)  # type: ignore[no-any-return]

    # --- helpers --------------------------------------------------------------------------

    def _err(self, cls: type[DalError], message: str, span: ast.Span, help: str | None = None) -> DalError:
        return cls(message, span, filename=self.filename, source=self.source, help=help)

    def _text(self, span: ast.Span) -> str:
        return self.source[span.start : span.end]

    def _make(self, key: tuple[Any, ...], lines: list[str] | Callable[[], list[str]]) -> Callable[..., Code]:
        """A template whose text has charges in it: with step counting off, they are left out (a text and a
        cache entry of its own)."""
        return _template((self.count_steps, *key), lines)

    def _charge(self, cost: int, span: ast.Span, run: Code) -> _Stmt:
        """A statement whose own code is `run`: its charge goes in a wrapper."""
        return _Stmt(cost, span, run, self._charged(cost, span, run))

    def _charged(self, cost: int, span: ast.Span, run: Code) -> Code:
        """`run`, charged `cost` steps when it starts."""
        if not self.count_steps:
            return run
        return self._make(("charged",), [
            "def make(rt, cost, span, run):", "  def charged(f):", *indent(self.charges.now("cost"), 4),
            "    return run(f)", "  return charged",
        ])(self.rt, cost, span, run)

    def _fused(self, tkey: str, body: list[str], cost: int, span: ast.Span, **env: Any) -> _Stmt:
        """A statement whose charge is inlined in its closure (one Python call per statement, not two),
        and the same closure without the charge, for a caller that charged it already.

        `body` is the statement's own code, indented four spaces, reading the names in `env`.
        """
        names = sorted(env)

        def build(charged: bool) -> Code:
            def text() -> list[str]:
                charge = self.charges.now("cost") if charged else []
                return [f"def make(rt, cost, span, {', '.join(names)}):", "  def stmt(f):", *indent(charge, 4),
                        *("    " + line for line in body), "  return stmt"]

            return self._make(("stmt", tkey, charged, *names), text)(self.rt, cost, span, **env)

        raw = build(False)
        return _Stmt(cost, span, raw, build(True) if self.count_steps else raw)

    def _value_lines(self, e: ast.Expr, env: dict[str, Any]) -> list[str]:
        """Code that leaves the value of `e` in `v`; a hot binary operator is inlined."""
        if type(e) is ast.Binary and e.op in _INT_OPS:
            lk, a, af = self._operand(e.left)
            rk, b, bf = self._operand(e.right, right=True)
            env.update(a=a, af=af, b=b, bf=bf, slow=ops.BINARY[e.op], bspan=e.span, comp=self, G=self.G)
            op = e.op
            test = "type(x) is int" if rk == "cint" else "type(x) is int and type(y) is int"
            if op == "%" and not (rk == "cint" and b != 0):
                test += " and y"
            lines = [_READ[lk].format(v="x", c="a"), _READ[rk].format(v="y", c="b"), f"if {test}:",
                     f"    v = x {op} y"]
            if op in _GROWS:
                env.update(L=INT_LIMIT, NL=-INT_LIMIT)
                lines += [f"    if not {_int_bound(op, rk)}:", "        v = slow(x, y, bspan, comp)"]
            if op == "+" and rk != "cint":
                env["MS"] = self.rt.limits.max_string
                lines += ["elif type(x) is str and type(y) is str and len(x) + len(y) <= MS:", "    v = x + y"]
            elif op in _STR_OPS and rk != "cint":
                lines += ["elif type(x) is str and type(y) is str:", f"    v = x {op} y"]
            lines += ["else:", "    v = slow(x, y, bspan, comp)"]
            return lines  # a glob read spans lines, indented for a four-space body
        env["value"] = self.expr(e)
        return ["v = value(f)"]

    # --- program and blocks ---------------------------------------------------------------
    # A statement charges its steps when it starts, before anything in it can call out. Where nothing
    # can read the counter between two charges (no user function, no builtin runs in between), they
    # are charged at once: a run of straight statements with the statement after it (`_group`), a
    # loop's test with the start of its body, an `if` with the start of the path it takes. When the
    # budget, the clock check or an interrupt falls inside such a charge, it is made statement by
    # statement instead (`_Unit.exact`), and a statement that fails gives back the charges of the
    # statements it kept from running: every count, and the statement where a budget runs out, are
    # those of charging each statement on its own.

    def program(self, prog: ast.Program) -> Code:
        return _with_stack_room(self.block(prog.body, prog))

    def block(self, stmts: tuple[ast.Stmt, ...], owner: Any, *, exclude_cells: tuple[int, ...] = ()) -> Code:
        return self._body(stmts, owner, exclude_cells=exclude_cells).code

    def _body(self, stmts: tuple[ast.Stmt, ...], owner: Any, *, exclude_cells: tuple[int, ...] = ()) -> _Unit:
        fns = [s for s in stmts if isinstance(s, ast.FnDef)]
        rest = [s for s in stmts if not isinstance(s, ast.FnDef)]
        run = self._units([*fns, *rest], 0)
        cells = tuple(k for k in self.res.block_cells.get(id(owner), ()) if k not in exclude_cells)
        if not cells:
            return run

        def with_cells(inner: Code) -> Code:
            def cells_then(f: Frame) -> Any:
                for k in cells:
                    f[k] = Cell(UNSET)
                return inner(f)

            return cells_then

        code = with_cells(run.code)
        if run.cost == 0:
            return _Unit(0, code, code, code)
        return _Unit(run.cost, code, with_cells(run.pre), with_cells(run.exact))

    def _units(self, stmts: list[ast.Stmt], ifs: int) -> _Unit:
        """A block's statements: each run of straight statements with the statement after it is one
        unit with one charge; an `if` whose condition calls nothing takes the rest of the block along
        (`_if_next`), up to `_IF_NEXT_MAX` of them per block."""
        units: list[_Unit] = []
        group: list[_Stmt] = []
        for i, st in enumerate(stmts):
            if self.merge and ifs < _IF_NEXT_MAX and self._if_next_ok(st):
                if group:
                    units.append(self._group(group))
                    group = []
                units.append(self._if_next(st, self._units(stmts[i + 1 :], ifs + 1)))  # type: ignore[arg-type]
                break
            s = self.stmt(st)
            group.append(s)
            if not (s.straight and self.merge) or len(group) == _GROUP_MAX:
                units.append(self._group(group))
                group = []
        if group:
            units.append(self._group(group))
        if not units:
            return _Unit(0, _noop, _noop, _noop)
        first, later = units[0], [u.code for u in units[1:]]
        code = self._seq([first.code, *later])
        if first.cost == 0:
            return _Unit(0, code, code, code)
        return _Unit(first.cost, code, self._seq([first.pre, *later]), self._seq([first.exact, *later]))

    def _straight(self, st: ast.Stmt) -> bool:
        """A `let`, an assignment whose expressions call nothing, or a `fn`: it cannot run user code or a
        builtin, so nothing can read the step counter while it runs, and it goes on to the next statement
        (or fails)."""
        t = type(st)
        if t is ast.FnDef:
            return True
        if t is ast.Let:
            exprs = [st.value]  # type: ignore[union-attr]
        elif t is ast.Assign:
            target = st.target  # type: ignore[union-attr]
            exprs = [st.value]  # type: ignore[union-attr]
            if type(target) is ast.Field:
                exprs.append(target.obj)
            elif type(target) is ast.Index:
                exprs += [target.obj, target.index]
        else:
            return False
        return all(_call_free(e) for e in exprs)

    def _group(self, group: list[_Stmt]) -> _Unit:
        """Straight statements and the statement after them, charged at once. When the budget (or the
        clock, or an interrupt) would be reached inside them, they run statement by statement, each
        with its own charge; when one fails, the charges of the statements after it are given back."""
        if not self.count_steps:
            code = self._seq([s.raw for s in group])
            return _Unit(0, code, code, code)
        if len(group) == 1:
            s = group[0]
            return _Unit(s.cost, s.charged, s.raw, s.charged)
        k = len(group)
        costs = [s.cost for s in group]
        exact = self._seq([s.charged for s in group])
        # When statement j fails, the charges of the statements after it, made with its own, are given
        # back: each call has its own handler (free until something raises), so nothing counts which
        # statement is running.
        backs = [sum(costs[j + 1 :]) for j in range(k - 1)]
        params = ", ".join([*(f"s{j}" for j in range(k)), *(f"b{j}" for j in range(k - 1))])
        charges = self.charges

        def build(charged: bool) -> Code:
            def text() -> list[str]:
                body: list[str] = []
                for j in range(k - 1):
                    body += charges.unless_raises([f"s{j}(f)"], f"b{j}")
                body.append(f"return s{k - 1}(f)")
                if charged:
                    body = charges.at_once("total", ["return exact(f)"], body)
                return [f"def make(rt, total, exact, {params}):", "  def run(f):", *indent(body, 4), "  return run"]

            return self._make(("run", k, charged), text)(self.rt, sum(costs), exact, *(s.raw for s in group), *backs)

        return _Unit(sum(costs), build(True), build(False), exact)

    @staticmethod
    def _seq(code: list[Code]) -> Code:
        if not code:
            return lambda f: None
        if len(code) == 1:
            return code[0]
        if len(code) == 2:
            a, b = code

            def two(f: Frame) -> Any:
                r = a(f)
                if r is not None:
                    return r
                return b(f)

            return two
        code_t = tuple(code)

        def seq(f: Frame) -> Any:
            for s in code_t:
                r = s(f)
                if r is not None:
                    return r
            return None

        return seq

    # --- statements -----------------------------------------------------------------------

    def stmt(self, st: ast.Stmt) -> _Stmt:
        s: _Stmt = getattr(self, "s_" + type(st).__name__)(st)
        s.straight = self._straight(st)
        return s

    def s_Let(self, st: ast.Let) -> _Stmt:
        b = self.res.decls[id(st)]
        if b.is_global:
            return self._assign(st, st.value, ("let_glob", b.name, None), 1 + node_cost(st.value))
        kind = "cell" if b.captured else "slot"
        return self._assign(st, st.value, (kind, b.slot, None), 1 + node_cost(st.value))

    def s_Param(self, st: ast.Param) -> _Stmt:
        """A script argument: a `let` of the value the run was bound to (dal/eval/args.py), costing what
        `let name = <literal>` costs; a run that bound none (the REPL, a bare Engine) gets the default."""
        given = self.rt.args or {}
        b = self.res.decls[id(st)]
        if st.name in given or st.has_default:
            value = ast.Literal(given[st.name] if st.name in given else st.default, span=st.span)
            return self._assign(st, value, ("let_glob", b.name, None), 1 + node_cost(value))

        def missing() -> DalError:
            from dal.eval.args import missing

            return missing(st, self.filename, self.source)

        return self._fused("param_missing", ["raise missing()"], 2, st.span, missing=missing)

    _STORE = {
        "slot": ["f[t] = v"],
        "cell": ["f[t].value = v"],
        "free": ["f[0][t].value = v"],
        "let_glob": ["G[t] = v"],
        "glob": ["if t not in G:", "    raise unbound()", "G[t] = v"],
    }

    def _assign(self, st: ast.Stmt, value: ast.Expr, target: tuple[str, Any, Any], cost: int) -> _Stmt:
        """`name = value` as one fused closure; `s = s + x` on a string appends in place."""
        kind, t, unbound = target
        env: dict[str, Any] = {"t": t, "unbound": unbound, "G": self.G}
        if (
            kind in ("slot", "glob")
            and type(value) is ast.Binary
            and value.op == "+"
            and type(value.left) is ast.Name
            and self._operand(value.left)[:2] == (kind, t)
        ):
            # CPython appends to a str in place when nothing else holds it: take it out of the frame
            # first, so `s = s + x` in a loop is linear, not quadratic. Strings stay immutable values:
            # a string that anything else still holds has other references and is copied, as before.
            rk, b, bf = self._operand(value.right)
            env.update(a=t, af=self._name_reader(value.left), b=b, bf=bf, slow=ops.BINARY["+"],
                       bspan=value.span, comp=self, L=INT_LIMIT, NL=-INT_LIMIT, MS=self.rt.limits.max_string)
            # `s = s + "x"`: the literal's length is known, so the size test reads one length
            literal = rk == "const" and type(b) is str
            if literal:
                env["MS"] -= len(b)
            body = [
                _READ[kind].format(v="x", c="a"),
                _READ[rk].format(v="y", c="b"),
                "if type(x) is str and len(x) <= MS:" if literal else
                "if type(x) is str and type(y) is str and len(x) + len(y) <= MS:",
                "    f[t] = None" if kind == "slot" else "    G[t] = None",
                "    x += y",
                "    f[t] = x" if kind == "slot" else "    G[t] = x",
                "    return",
                "if type(x) is int and type(y) is int:",
                "    v = x + y",
                f"    if not {_int_bound('+', rk)}:",
                "        v = slow(x, y, bspan, comp)",
                "else:",
                "    v = slow(x, y, bspan, comp)",
            ]
            return self._fused(f"concat_{kind}_{rk}_{literal}", body + self._STORE[kind], cost, st.span, **env)
        body = self._value_lines(value, env) + self._STORE[kind]
        return self._fused("assign|" + "|".join(body), body, cost, st.span, **env)

    def s_Assign(self, st: ast.Assign) -> _Stmt:
        target = st.target
        cost = 1 + node_cost(st.value)
        if isinstance(target, ast.Name):
            kind, what = self.res.refs[id(target)]
            if kind == LOCAL:
                return self._assign(st, st.value, ("cell" if what.captured else "slot", what.slot, None), cost)
            if kind == GLOBAL:

                def unbound() -> DalError:
                    return self._err(DalNameError, f"`{what}` is assigned before its `let` ran", target.span)

                return self._assign(st, st.value, ("glob", what, unbound), cost)
            if kind == FREE:
                return self._assign(st, st.value, ("free", what, None), cost)
            raise AssertionError(kind)  # pragma: no cover
        value = self.expr(st.value)
        cost += node_cost(target.obj)
        set_item = ops.set_item
        tspan = target.span
        if isinstance(target, ast.Field):
            ok, a, af = self._operand(target.obj)
            if ok == "cint":  # pragma: no cover - a literal has no fields either way
                ok = "const"
            body = [
                "v = value(f)",
                _READ[ok].format(v="o", c="a"),
                "if type(o) is dict:",
                "    o[key] = v",
                "else:",
                "    set_item(o, key, v, tspan, comp, field=True)",
            ]
            return self._fused("field_" + ok, body, cost, st.span, value=value, a=a, af=af, G=self.G,
                               key=target.name, set_item=set_item, tspan=tspan, comp=self)
        obj = self.expr(target.obj)
        index = self.expr(target.index)
        cost += node_cost(target.index)

        def assign_index(f: Frame) -> None:
            v = value(f)
            set_item(obj(f), index(f), v, tspan, self)

        return self._charge(cost, st.span, assign_index)

    def s_ExprStmt(self, st: ast.ExprStmt) -> _Stmt:
        return self._fused("expr", ["e(f)"], 1 + node_cost(st.expr), st.span, e=self.expr(st.expr))

    @staticmethod
    def _is_boolean(e: ast.Expr) -> bool:
        """Expressions that yield a boolean or raise: their conditions need no check."""
        t = type(e)
        if t is ast.Binary:
            return e.op in _COMPARISONS  # type: ignore[union-attr]
        return t is ast.Logical or (t is ast.Unary and e.op == "not")  # type: ignore[union-attr]

    def _cond(self, e: ast.Expr, what: str) -> Code:
        c = self.expr(e)
        if self._is_boolean(e):
            return c
        span = e.span

        def cond(f: Frame) -> bool:
            v = c(f)
            if v is True:
                return True
            if v is False:
                return False
            raise self._err(
                DalTypeError,
                f"{what} must be a boolean, got {type_name(v)}",
                span,
                help="compare explicitly, e.g. `len(xs) > 0` or `x != null`",
            )

        return cond

    def s_If(self, st: ast.If) -> _Stmt:
        conds = [self._cond(c, "an `if` condition") for c, _ in st.branches]
        blocks = [self.block(b.body, b) for _, b in st.branches]
        orelse = self.block(st.orelse.body, st.orelse) if st.orelse is not None else None
        if len(conds) == 1:
            cnode = st.branches[0][0]
            env: dict[str, Any] = {"b0": blocks[0], "e0": orelse}
            if self._is_boolean(cnode):
                body = self._value_lines(cnode, env)
            else:
                env["c0"] = conds[0]
                body = ["v = c0(f)"]
            body += ["if v:", "    return b0(f)"]
            if orelse is not None:
                body.append("return e0(f)")
            return self._fused("if|" + "|".join(body), body, 1 + node_cost(cnode), st.span, **env)
        later = [
            (self._charged(node_cost(c), c.span, cc), b)
            for (c, _), cc, b in zip(st.branches[1:], conds[1:], blocks[1:], strict=True)
        ]
        first_c, first_b = conds[0], blocks[0]

        def if_chain(f: Frame) -> Any:
            if first_c(f):
                return first_b(f)
            for c, b in later:
                if c(f):
                    return b(f)
            if orelse is not None:
                return orelse(f)
            return None

        return self._charge(1 + node_cost(st.branches[0][0]), st.span, if_chain)

    @staticmethod
    def _if_next_ok(st: ast.Stmt) -> bool:
        return type(st) is ast.If and len(st.branches) == 1 and _call_free(st.branches[0][0])  # type: ignore[union-attr]

    def _if_next(self, st: ast.If, rest: _Unit) -> _Unit:
        """An `if` (at most an `else`, no `else if`) whose condition calls nothing, compiled with `rest`,
        the statements after it in its block.

        The condition is evaluated first (nothing can tell: it calls nothing and changes nothing), then
        the `if` is charged together with the first charge of the path taken: the branch's first
        statements, or the statements after the `if` when no branch runs. If the condition fails, the
        `if` alone is charged before the error goes on, as if it had been charged first."""
        cnode, blk = st.branches[0]
        b0 = self._body(blk.body, blk)
        e0 = self._body(st.orelse.body, st.orelse) if st.orelse is not None else None
        has_rest = rest.code is not _noop
        span, ci = st.span, 1 + node_cost(cnode)
        rcode = rest.code

        def exactly(run: Code, then_rest: bool) -> Code:
            """The slow path: the `if` charged alone, then `run` (a branch or the rest) charging exactly."""
            return self._charged(ci, span, self._seq([run, rcode]) if then_rest else run)

        env: dict[str, Any] = {"rt": self.rt, "span": span, "b0pre": b0.pre, "sb": exactly(b0.exact, has_rest),
                               "rpre": rest.pre, "rcode": rcode, "sr": exactly(rest.exact, False)}
        if e0 is not None:
            env.update(e0pre=e0.pre, se=exactly(e0.exact, has_rest))
        if self._is_boolean(cnode):
            cond = self._value_lines(cnode, env)
        else:
            env["c0"] = self._cond(cnode, "an `if` condition")
            cond = ["v = c0(f)"]
        names = sorted(env)
        charges = self.charges
        # the steps charged at once on each path, written into the template as constants
        tb, te, tr = ci + b0.cost, ci + (e0.cost if e0 is not None else 0), ci + rest.cost

        def path(total: int, slow: str, run: str, then_rest: bool) -> list[str]:
            if not run:
                fast = ["return None"]
            elif not then_rest:
                fast = [f"return {run}(f)"]
            else:
                fast = [f"r = {run}(f)", "if r is not None:", "    return r", "return rcode(f)"]
            return charges.at_once(str(total), [f"return {slow}(f)"], fast)

        def text() -> list[str]:
            lines = [*charges.if_raises(cond, str(ci)), "if v:", *indent(path(tb, "sb", "b0pre", has_rest), 4)]
            if e0 is not None:
                lines += path(te, "se", "e0pre", has_rest)
            else:
                lines += path(tr, "sr", "rpre" if has_rest else "", False)
            return [f"def make({', '.join(names)}):", "  def if_(f):", *indent(lines, 4), "  return if_"]

        key = ("if_next", e0 is not None, has_rest, ci, tb, te, tr, tuple(cond), tuple(names))
        code = self._make(key, text)(**env)
        return _Unit(0, code, code, code)

    def _loop_site(self, st: ast.While | ast.For) -> LoopSite:
        if isinstance(st, ast.While):
            header = "while " + self._text(st.cond.span)
            clauses = tuple(self._text(c.span) for c in conjuncts(st.cond))
        else:
            header = f"for {st.var} in " + self._text(st.iterable.span)
            clauses = ()
        return LoopSite(
            kind="while" if isinstance(st, ast.While) else "for",
            span=st.span,
            header=" ".join(header.split()),
            conjuncts=tuple(" ".join(c.split()) for c in clauses),
            reads=self.res.loop_reads.get(id(st), ()),
            filename=self.filename,
        )

    def _snapshotter(self, st: ast.While | ast.For) -> Callable[[Frame], dict[str, Any]]:
        """Read the variables the loop condition names, as they are at the loop's exit."""
        readers: list[tuple[str, Code]] = []
        wanted = list(self.res.loop_reads.get(id(st), ()))
        found: dict[str, ast.Name] = {}
        root = st.cond if isinstance(st, ast.While) else st.iterable

        def walk(e: Any) -> None:
            if isinstance(e, ast.Name):
                found.setdefault(e.id, e)
            elif isinstance(e, ast.FnExpr):
                return
            elif isinstance(e, tuple):
                for x in e:
                    walk(x)
            elif hasattr(e, "__attrs_attrs__"):
                for a in e.__attrs_attrs__:
                    if a.name != "span":
                        walk(getattr(e, a.name))

        walk(root)
        for name in wanted:
            node = found.get(name)
            if node is not None and id(node) in self.res.refs and self.res.refs[id(node)][0] != BUILTIN:
                readers.append((name, self._name_reader(node, checked=False)))

        def snapshot(f: Frame) -> dict[str, Any]:
            out = {}
            for name, r in readers:
                try:
                    out[name] = r(f)
                except Exception:  # a name not yet bound at exit time
                    continue
            return out

        return snapshot

    def _finish_loop(self, lf: LoopFrame, reason: str, clause: str | None, f: Frame, snap: Any) -> None:
        rt = self.rt
        rt.loops.pop()
        # the snapshot is taken lazily: a recorder aggregating a hot loop site skips it
        rt.host.loop_exit(lf, reason, clause, rt.steps - lf.started_steps, time.time(), lambda: snap(f))

    def s_While(self, st: ast.While) -> _Stmt:
        site = self._loop_site(st)
        parts = conjuncts(st.cond)
        body = self._body(st.body.body, st.body)
        # A test that calls nothing is charged with the start of the body: one charge per iteration. The
        # body's share is given back when the test is false or fails.
        merged = self.count_steps and self.merge and body.cost > 0 and _call_free(st.cond)
        cc = 1 + node_cost(st.cond)
        env: dict[str, Any] = {
            "rt": self.rt, "site": site, "LoopFrame": LoopFrame, "now": time.time, "finish": self._finish_loop,
            "snap": self._snapshotter(st), "span": st.cond.span, "cc": cc, "bc": body.cost, "tot": cc + body.cost,
            "bcode": body.code, "bpre": body.pre, "bexact": body.exact, "BREAK": BREAK, "CONTINUE": CONTINUE,
            "reason_of": _loop_exit_reason,
        }
        if len(parts) == 1 and self._is_boolean(parts[0]):
            env["t0"] = site.conjuncts[0]
            value = self._value_lines(parts[0], env)

            def test(ind: int, on_false: list[str]) -> list[str]:
                return [*indent(value, ind), *indent(["if not v:", "    clause = t0", *on_false], ind)]
        else:
            value = []
            for j, part in enumerate(parts):
                env[f"c{j}"] = self._cond(part, "a `while` condition")
                env[f"t{j}"] = site.conjuncts[j]

            def test(ind: int, on_false: list[str]) -> list[str]:
                out = []
                for j in range(len(parts)):
                    out += [f"if not c{j}(f):", f"    clause = t{j}", *on_false]
                return indent(out, ind)

        names = sorted(env)
        shape = (tuple(value), len(parts))

        def text() -> list[str]:
            after = [
                "if r is not None:",
                "    if r is BREAK:",
                "        reason = 'break'",
                "        break",
                "    if r is CONTINUE:",
                "        continue",
                "    finish(lf, 'return', None, f, snap)",
                "    return r",
            ]
            ch = self.charges
            if merged:
                give_back = [*("    " + line for line in ch.give_back("bc")), "    break"]
                loop = ch.at_once(
                    "tot",
                    [*ch.now("cc"), *test(0, ["    break"]), "lf.iterations += 1", "r = bexact(f)"],
                    [*ch.unless_raises(test(0, give_back), "bc"), "lf.iterations += 1", "r = bpre(f)"],
                )
            else:
                loop = [*ch.now("cc"), *test(0, ["    break"]), "lf.iterations += 1", "r = bcode(f)"]
            return [
                f"def make({', '.join(names)}):",
                "  def while_(f):",
                "    lf = LoopFrame(site, rt.steps, now())",
                "    rt.loops.append(lf)",
                "    clause = reason = None",
                "    try:",
                "        while True:",
                *indent(loop + after, 12),
                "    except BaseException as exc:",
                "        finish(lf, reason_of(exc), None, f, snap)",
                "        raise",
                "    if clause is not None:",
                "        finish(lf, 'condition', clause, f, snap)",
                "    else:",
                "        finish(lf, reason, None, f, snap)",
                "    return None",
                "  return while_",
            ]

        return self._charge(1, st.span, self._make(("while", merged, shape, tuple(names)), text)(**env))

    def s_For(self, st: ast.For) -> _Stmt:
        site = self._loop_site(st)
        b = self.res.decls[id(st)]
        cells = tuple(self.res.block_cells.get(id(st.body), ()))
        # the body block must not recreate cells itself: for_ does it before binding the variable
        body = self._body(st.body.body, st.body, exclude_cells=cells)
        # An item's step is charged with the start of the body (binding the variable calls nothing).
        merged = self.merge and body.cost > 0
        env: dict[str, Any] = {
            "rt": self.rt, "site": site, "LoopFrame": LoopFrame, "now": time.time, "finish": self._finish_loop,
            "snap": self._snapshotter(st), "reason_of": _loop_exit_reason, "to_items": ops.iter_items,
            "iterable": self.expr(st.iterable), "ispan": st.iterable.span, "comp": self, "span": st.span,
            "tot": 1 + body.cost, "bcode": body.code, "bpre": body.pre, "bexact": body.exact, "cells": cells,
            "slot": b.slot, "Cell": Cell, "UNSET": UNSET, "BREAK": BREAK, "CONTINUE": CONTINUE,
        }
        ch = self.charges
        charge = ch.at_once("tot", [*ch.now("1"), "run = bexact"], ["run = bpre"]) if merged else ch.now("1")
        names = sorted(env)

        def text() -> list[str]:
            item = [
                *charge,
                *(["for k in cells:", "    f[k] = Cell(UNSET)"] if cells else []),
                "f[slot].value = item" if b.captured else "f[slot] = item",
                "lf.iterations += 1",
                "r = run(f)",
                "if r is not None:",
                "    if r is BREAK:",
                "        finish(lf, 'break', None, f, snap)",
                "        return None",
                "    if r is CONTINUE:",
                "        continue",
                "    finish(lf, 'return', None, f, snap)",
                "    return r",
            ]
            return [
                f"def make({', '.join(names)}):",
                "  def for_(f):",
                "    items = to_items(iterable(f), ispan, comp)",
                "    lf = LoopFrame(site, rt.steps, now())",
                "    rt.loops.append(lf)",
                "    run = bcode",
                "    try:",
                "        for item in items:",
                *indent(item, 12),
                "    except BaseException as exc:",
                "        finish(lf, reason_of(exc), None, f, snap)",
                "        raise",
                "    finish(lf, 'end', None, f, snap)",
                "    return None",
                "  return for_",
            ]

        for_ = self._make(("for", merged, b.captured, bool(cells), tuple(names)), text)(**env)
        return self._charge(1 + node_cost(st.iterable), st.span, for_)

    def s_FnDef(self, st: ast.FnDef) -> _Stmt:
        b = self.res.decls[id(st)]
        make = self._make_function(st, st.name)
        if b.is_global:
            G, name = self.G, b.name

            def define_global(f: Frame) -> None:
                G[name] = make(f)

            return self._charge(1, st.span, define_global)
        k = b.slot
        if b.captured:

            def define_cell(f: Frame) -> None:
                f[k].value = make(f)

            return self._charge(1, st.span, define_cell)

        def define_local(f: Frame) -> None:
            f[k] = make(f)

        return self._charge(1, st.span, define_local)

    def s_Break(self, st: ast.Break) -> _Stmt:
        return self._charge(1, st.span, lambda f: BREAK)

    def s_Continue(self, st: ast.Continue) -> _Stmt:
        return self._charge(1, st.span, lambda f: CONTINUE)

    def s_Return(self, st: ast.Return) -> _Stmt:
        if st.value is None:
            return self._fused("ret_null", ["f[1] = None", "return RETURN"], 1, st.span, RETURN=RETURN)
        env: dict[str, Any] = {"RETURN": RETURN}
        body = [*self._value_lines(st.value, env), "f[1] = v", "return RETURN"]
        return self._fused("ret|" + "|".join(body), body, 1 + node_cost(st.value), st.span, **env)

    # --- functions ------------------------------------------------------------------------

    def _make_function(self, node: ast.FnDef | ast.FnExpr, name: str) -> Callable[[Frame], Function]:
        info = self.res.funcs[id(node)]
        params = self.res.params.get(id(node), [])
        param_slots = tuple(p.slot for p in params)
        param_cells = tuple(p.captured for p in params)
        body = self.block(node.body.body, node.body, exclude_cells=param_slots)
        sources = tuple(info.free_sources)
        nslots = info.nslots
        filename, span, pnames = self.filename, node.span, node.params

        def make(f: Frame) -> Function:
            cells = tuple(f[i] if kind == "cell" else f[0][i] for kind, i in sources)
            return Function(name, pnames, nslots, body, cells, span, filename, param_slots, param_cells)

        return make

    # --- expressions ----------------------------------------------------------------------

    def expr(self, e: ast.Expr) -> Code:
        return getattr(self, "e_" + type(e).__name__)(e)

    def e_Literal(self, e: ast.Literal) -> Code:
        v = e.value
        return lambda f: v

    def _name_reader(self, e: ast.Name, checked: bool = True) -> Code:
        kind, what = self.res.refs[id(e)]
        if kind == LOCAL:
            k = what.slot
            if what.captured:

                def read_cell(f: Frame) -> Any:
                    v = f[k].value
                    if v is UNSET:
                        raise self._err(DalNameError, f"`{e.id}` is used before its `let` ran", e.span)
                    return v

                return read_cell
            return lambda f: f[k]
        if kind == FREE:
            i = what

            def read_free(f: Frame) -> Any:
                v = f[0][i].value
                if v is UNSET:
                    raise self._err(DalNameError, f"`{e.id}` is used before its `let` ran", e.span)
                return v

            return read_free
        if kind == GLOBAL:
            G, name = self.G, what

            def read_global(f: Frame) -> Any:
                try:
                    return G[name]
                except KeyError:
                    raise self._err(DalNameError, f"`{name}` is used before its `let` ran", e.span) from None

            return read_global
        if kind == BUILTIN:
            fn = self.builtins[what]
            return lambda f: fn
        raise AssertionError(kind)  # pragma: no cover

    def e_Name(self, e: ast.Name) -> Code:
        return self._name_reader(e)

    def e_ListLit(self, e: ast.ListLit) -> Code:
        items = tuple(self.expr(x) for x in e.items)
        if not items:
            return lambda f: []
        return lambda f: [x(f) for x in items]

    def e_MapLit(self, e: ast.MapLit) -> Code:
        entries = tuple((k, self.expr(v)) for k, v in e.entries)
        if not entries:
            return lambda f: {}
        return lambda f: {k: v(f) for k, v in entries}

    def e_Unary(self, e: ast.Unary) -> Code:
        x = self.expr(e.operand)
        span = e.span
        if e.op == "not":

            def not_(f: Frame) -> bool:
                v = x(f)
                if v is True:
                    return False
                if v is False:
                    return True
                raise self._err(DalTypeError, f"`not` needs a boolean, got {type_name(v)}", span)

            return not_
        neg = ops.neg

        def neg_(f: Frame) -> Any:
            v = x(f)
            if type(v) is int:
                return -v
            return neg(v, span, self)

        return neg_

    def e_Logical(self, e: ast.Logical) -> Code:
        a = self.expr(e.left)
        b = self.expr(e.right)
        op = e.op
        lspan, rspan = e.left.span, e.right.span

        def bad(v: Any, span: ast.Span) -> DalError:
            return self._err(
                DalTypeError,
                f"`{op}` needs booleans, got {type_name(v)}",
                span,
                help="compare explicitly, e.g. `x != null`",
            )

        if op == "and":

            def and_(f: Frame) -> bool:
                v = a(f)
                if v is False:
                    return False
                if v is not True:
                    raise bad(v, lspan)
                w = b(f)
                if w is True or w is False:
                    return w
                raise bad(w, rspan)

            return and_

        def or_(f: Frame) -> bool:
            v = a(f)
            if v is True:
                return True
            if v is not False:
                raise bad(v, lspan)
            w = b(f)
            if w is True or w is False:
                return w
            raise bad(w, rspan)

        return or_

    def _operand(self, e: ast.Expr, right: bool = False) -> tuple[str, Any, Any]:
        """How a template reads this operand: (kind, what, fallback closure)."""
        t = type(e)
        if t is ast.Literal:
            v = e.value  # type: ignore[union-attr]
            return ("cint" if right and type(v) is int else "const", v, None)
        if t is ast.Name:
            kind, what = self.res.refs[id(e)]
            if kind == LOCAL and not what.captured:
                return ("slot", what.slot, None)
            if kind == GLOBAL:
                return ("glob", what, self._name_reader(e))  # type: ignore[arg-type]
        return ("call", self.expr(e), None)

    def e_Binary(self, e: ast.Binary) -> Code:
        op = e.op
        slow = ops.BINARY[op]
        if op in _INT_OPS or op in ("==", "!="):
            lk, a, af = self._operand(e.left)
            rk, b, bf = self._operand(e.right, right=True)
            nonzero = rk == "cint" and b != 0
            make = _binary_factory(op, lk, rk, nonzero)
            return make(a, af, b, bf, self.G, slow, e.span, self, INT_LIMIT, -INT_LIMIT, self.rt.limits.max_string)
        a = self.expr(e.left)
        b = self.expr(e.right)
        span = e.span
        comp = self

        def binop(f: Frame) -> Any:
            return slow(a(f), b(f), span, comp)

        return binop

    def e_Field(self, e: ast.Field) -> Code:
        kind, a, af = self._operand(e.obj)
        if kind == "cint":  # pragma: no cover - a literal's field is a type error either way
            kind = "const"
        return _field_factory(kind)(a, af, self.G, e.name, ops.get_field, e.span, self)

    def e_Index(self, e: ast.Index) -> Code:
        obj = self.expr(e.obj)
        index = self.expr(e.index)
        span = e.span
        get_item = ops.get_item

        def item(f: Frame) -> Any:
            return get_item(obj(f), index(f), span, self)

        return item

    def e_Slice(self, e: ast.Slice) -> Code:
        obj = self.expr(e.obj)
        start = self.expr(e.start) if e.start is not None else None
        stop = self.expr(e.stop) if e.stop is not None else None
        span = e.span
        get_slice = ops.get_slice

        def slice_(f: Frame) -> Any:
            o = obj(f)
            return get_slice(o, None if start is None else start(f), None if stop is None else stop(f), span, self)

        return slice_

    def e_FnExpr(self, e: ast.FnExpr) -> Code:
        return self._make_function(e, "<anonymous>")

    def e_Call(self, e: ast.Call) -> Code:
        args = tuple(self.expr(a) for a in e.args)
        nargs = len(args)
        names = [f"x{i}" for i in range(nargs)]
        argv = "[" + ", ".join(names) + "]"
        env: dict[str, Any] = {f"a{i}": a for i, a in enumerate(args)}
        reads = [f"x{i} = a{i}(f)" for i in range(nargs)]
        callee_node = e.callee
        if isinstance(callee_node, ast.Name):
            ref = self.res.refs.get(id(callee_node))
            if ref is not None and ref[0] == BUILTIN:
                fn = self.builtins[ref[1]]
                env.update(impl=fn.impl, rt=self.rt, span=e.span, filename=self.filename, DalError=DalError,
                           call=self.call_value)
                lines = ["def make(" + ", ".join(sorted(env)) + "):", "  def call_builtin(f):",
                         *("    " + r for r in reads),
                         "    try:", f"        return impl(rt, {argv}, span{', call' if fn.calls else ''})",
                         "    except DalError as err:", "        raise err.located(span, filename) from None",
                         "  return call_builtin"]
                return _template(("builtin", nargs, fn.calls), lines)(**env)
        # A user function is entered inline when the arity matches and no parameter is captured; anything
        # else goes through `invoke` or `call_other`, which raise the errors.
        kind, c, cf = self._operand(callee_node)
        if kind == "cint":  # pragma: no cover - calling a literal is a type error either way
            kind = "const"
        env.update(c=c, cf=cf, G=self.G, call_other=self.call_other, span=e.span)
        read = ["    " + _READ[kind].format(v="fn", c="c"), *("    " + r for r in reads)]
        return self._function_call(nargs, read, env)

    def _function_call(self, nargs: int | None, read: list[str] | None = None,
                       env: dict[str, Any] | None = None) -> Any:
        """The one way a user function is called, as a template: `invoke(fn, argv, span)` (nargs None), or
        the inline call of a call site with `nargs` arguments, whose `read` lines leave the callee in `fn`
        and the arguments in x0, x1...; a callee that is not a user function, or that the inline path
        does not fit, goes to `call_other` or `invoke`."""
        env = dict(env or {})
        env.update(rt=self.rt, Function=Function, RETURN=RETURN, DalError=DalError, StackFrame=StackFrame,
                   filename=self.filename, overflow=self._overflow)
        if nargs is None:
            env.update(Cell=Cell, wrong_arity=self._wrong_arity)
            head = ["def make(" + ", ".join(sorted(env)) + "):", "  def invoke(fn, argv, span):",
                    "    if len(argv) != len(fn.params):",
                    "        raise wrong_arity(fn, argv, span)",
                    "    frame = [fn.cells, None, *argv]",
                    "    extra = fn.nslots - len(frame)",
                    "    if extra > 0:",
                    "        frame += [None] * extra",
                    "    if True in fn.param_cells:",
                    "        for slot, cell, v in zip(fn.param_slots, fn.param_cells, argv):",
                    "            if cell:",
                    "                frame[slot] = Cell(v)"]
        else:
            env["invoke"] = self.invoke
            names = [f"x{i}" for i in range(nargs)]
            argv = "[" + ", ".join(names) + "]"
            head = ["def make(" + ", ".join(sorted(env)) + "):", "  def call(f):", *(read or []),
                    "    if type(fn) is not Function:",
                    f"        return call_other(fn, {argv}, span)",
                    f"    if len(fn.params) != {nargs} or True in fn.param_cells:",
                    f"        return invoke(fn, {argv}, span)",
                    "    frame = [fn.cells, None" + "".join(", " + n for n in names) + "]",
                    f"    extra = fn.nslots - {2 + nargs}",
                    "    if extra > 0:",
                    "        frame += [None] * extra"]
        enter = ["    rt.depth += 1",
                 "    if rt.depth > rt.max_depth:",
                 "        rt.depth -= 1",
                 "        raise rt.too_deep(span)",
                 "    try:",
                 "        r = fn.body(frame)",
                 "    except DalError as err:",
                 "        err.call_stack.append(StackFrame(fn.name, filename, span))",
                 "        raise",
                 "    except RecursionError:",
                 "        raise overflow(span) from None",
                 "    finally:",
                 "        rt.depth -= 1",
                 "    if r is RETURN:",
                 "        return frame[1]",
                 "    return None",
                 "  return " + ("invoke" if nargs is None else "call")]
        lines = [*head, *enter]
        return _template(("invoke",) if nargs is None else ("call", nargs, *(read or [])), lines)(**env)

    def _wrong_arity(self, fn: Function, argv: list[Any], span: ast.Span) -> DalError:
        n = len(fn.params)
        return self._err(
            DalTypeError,
            f"`{fn.name}` takes {n} argument{'s' if n != 1 else ''}, but {len(argv)} "
            f"{'was' if len(argv) == 1 else 'were'} given",
            span,
        )

    def _overflow(self, span: ast.Span) -> DalError:
        return self._err(DalRuntimeError, "the call stack overflowed: is the recursion unbounded?", span)

    def call_other(self, fn: Any, argv: list[Any], span: ast.Span) -> Any:
        if type(fn) is Builtin:
            n = len(argv)
            if n < fn.min_args or (fn.max_args is not None and n > fn.max_args):
                lo, hi = fn.min_args, fn.max_args
                want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
                raise self._err(
                    DalTypeError,
                    f"`{fn.name}` takes {want} argument{'s' if want != '1' else ''}, but {n} "
                    f"{'was' if n == 1 else 'were'} given",
                    span,
                    help=f"usage: {fn.signature}",
                )
            try:
                if fn.calls:
                    return fn.impl(self.rt, argv, span, self.call_value)
                return fn.impl(self.rt, argv, span)
            except DalError as err:
                raise err.located(span, self.filename) from None
        raise self._err(DalTypeError, f"cannot call {a_type_name(fn)}: only functions can be called", span)


    def call_value(self, fn: Any, argv: list[Any], span: ast.Span) -> Any:
        """Call any DAL callable from Python: what a builtin that takes a function (`sort`'s key) is given."""
        if type(fn) is Function:
            return self.invoke(fn, argv, span)
        return self.call_other(fn, argv, span)
