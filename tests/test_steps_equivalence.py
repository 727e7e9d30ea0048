"""Step accounting is pinned: counts, where a budget runs out, and where the clock is looked at.

The compiler charges several statements at once where nothing can read the counter in between (runs of
call-free assignments, a loop test with the start of its body, an `if` with the first statement of the
path it takes), and falls back to charging statement by statement near the budget, the clock check or
an interrupt. None of that may be observable. For each script below, `tests/steps_equivalence.json`
holds what the statement-by-statement compiler gave (recorded before any of the merging), and this test
asserts the same today:

- the whole run: status, final steps, output, error and its span, and every loop exit (reason, clause,
  iterations, steps, snapshot), as the receipts see them;
- at every step budget from 1 to the run's total + 1: status, steps, the error's span and message, and
  how many loops had exited (stored as runs of budgets with the same outcome);
- with the clock / interrupt check every k steps (k = 1, 2, 3, 5, 8): the steps and span of every call
  to `over_limit`, the point where the clock is read (k = 1 pins nearly every single charge);
- with an interrupt requested at the n-th `print`: where the run stops and its count.

`python tests/test_steps_equivalence.py --record` rewrites the JSON; do it only for a deliberate change
of what a statement costs, never to make this test pass.

And random programs (`_Gen`: loops, calls, early returns, failing statements) give all of the above the
same with the merged charges as with the compiler's `merge=False`, where every statement and every loop
test is charged on its own.
"""

from __future__ import annotations

import functools
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from dal.core.stack import in_big_stack
from dal.eval import interpreter
from dal.eval import runtime as runtime_mod
from dal.eval.compiler import Compiler
from dal.eval.host import NullHost
from dal.eval.interpreter import Engine, check_source
from dal.eval.runtime import Runtime
from dal.eval.values import Builtin, Function

EXPECTED = Path(__file__).with_name("steps_equivalence.json")
CHECK_EVERY_VALUES = (1, 2, 3, 5, 8)

SCRIPTS: dict[str, str] = {
    # Work the items do not measure, charged by the Meter (docs/language.md, "Step accounting"): long
    # strings compared by sort, min, max, contains, find and ==, long integers written and read.
    "work": """
let a = "x"
for i in range(12) { a = a + a }
let ys = [a + "d", a + "b", a + "c", a + "a"]
let s1 = sort(ys)
print(s1[0] == ys[3], min(ys) == ys[3], max(ys) == ys[0], sort(ys, fn(y) { return y })[0] == ys[3])
print(contains(ys, a + "c"), find(ys, a + "a"), ys == [a + "d", a + "b", a + "c", a + "a"])
let b = 7
for i in range(11) { b = b * b }
let t = str(b)
print(len(t), len(str([b, b])))
print(parse_json("[" + t + "]")[0] == b, int(t) == b)
""",
    "batches": """
let a = 1
let b = a + 2
let c = [a, b]
let m = {"k": a}
m.k = b * 2
c[0] = m.k
let i = 0
let total = 0
while i < 6 {
    total = total + i % 4
    i = i + 1
}
let s = ""
let j = 0
while j < 4 {
    s = s + "x"
    j = j + 1
}
print(total, c, m, s)
""",
    "failing_batch": """
let xs = [1, 2, 3, "four", 5]
let n = 5
let i = 0
let t = 0
print("start")
while i < n {
    let v = xs[i]
    t = t + v
    i = i + 1
    print(t)
}
""",
    "failing_batch_call_cond": """
let xs = [1, 2, "three"]
let i = 0
let t = 0
while i < len(xs) {
    let v = xs[i]
    t = t + v
    i = i + 1
}
""",
    "failing_middle": """
let a = 1
let b = 2
let c = a + null
let d = 4
print(d)
""",
    "guards": """
fn fib(n) {
    if n < 2 { return n }
    return fib(n - 1) + fib(n - 2)
}
fn classify(x) {
    if x < 0 { return "neg" }
    if x == 0 { return "zero" }
    let y = x * 2
    if y > 10 { return "big" } else { y = y + 1 }
    return y
}
print(fib(6))
print(classify(-1), classify(0), classify(3), classify(9))
""",
    "loops": """
let out = []
for x in [1, 2, 3, 4, 5, 6] {
    if x == 2 { continue }
    let y = x * 10
    if y > 50 { break }
    out = append(out, y)
}
let i = 0
while true and i < 10 {
    i = i + 1
    if i % 2 == 0 { continue }
    let j = 0
    while j < i {
        j = j + 1
        if j == 3 { break }
    }
    print(i, j)
    if i > 7 { break }
}
for k in range(3) {
    let z = k + 1
    let w = z * z
}
for q in [] { print(q) }
print(out, i)
""",
    "returns_closures": """
fn find(xs, want) {
    let i = 0
    while i < len(xs) {
        if xs[i] == want { return i }
        i = i + 1
    }
    return -1
}
fn find2(xs, want) {
    let n = len(xs)
    let i = 0
    while i < n {
        let x = xs[i]
        if x == want { return i }
        i = i + 1
    }
    return -1
}
fn counter() {
    let n = 0
    fn inc() {
        n = n + 1
        return n
    }
    return inc
}
let c = counter()
c()
c()
let first = find([5, 6, 7], 7)
let missing = find2([5, 6, 7], 9)
let found = find2([5, 6, 7], 6)
print(first, missing, found, c())
""",
    "failing_conditions": """
let x = 3
let y = "s"
if x < 4 { x = x + 1 } else { x = x - 1 }
if x > 2 and y == "s" { y = y + "t" }
let z = 0
while z < 3 { z = z + 1 }
let v = 0
let lim = 4
while v < lim {
    v = v + 1
    if v == 3 { lim = "x" }
}
""",
    "failing_if": """
let x = 3
let y = "s"
print(x)
if y < 3 { print("never") }
""",
    "failing_for": """
let t = 0
for x in [1, 2, null, 4] {
    let y = x
    t = t + y
}
""",
    "calls_in_conditions": """
fn small(x) {
    let y = x * 2
    return y < 9
}
let i = 0
let t = 0
while small(i) {
    t = t + i
    i = i + 1
}
if small(t) { t = 0 } else { t = t - 1 }
let k = 0
while k < 3 and small(k) {
    let z = k
    k = z + 1
}
for x in [small(1), small(10)] {
    let w = x
}
print(i, t, k)
""",
    "chains": """
fn f(x) { return x + 1 }
let k = 0
let acc = []
while k < 8 {
    if k == 0 {
        acc = append(acc, "zero")
    } else if k % 3 == 0 {
        acc = append(acc, "three")
    } else if f(k) == 3 {
        acc = append(acc, "two")
    } else {
        let w = k * k
        acc = append(acc, w)
    }
    k = k + 1
}
if f(1) == 2 { k = 0 } else { k = 1 }
if k == 0 { k = 10 } else if k == 1 { k = 11 }
print(acc, k)
""",
    "maps_fns": """
let m = {"a": 1, "b": 2}
let total = 0
for k in keys(m) {
    let v = m[k]
    total = total + v
    m[k] = v * 2
}
let sq = fn(x) { return x * x }
let ys = []
for x in [1, 2, 3] {
    let y = sq(x)
    ys = append(ys, y)
}
fn area(w, h) {
    let a = w * h
    let p = 2 * (w + h)
    return [a, p]
}
let n = 0
while n < 3 {
    let r = area(n, n + 1)
    n = n + 1
}
let e = 0
while e < 2 { e = e + 1 }
if e == 2 { } else { e = 0 }
if e == 2 { e = 5 }
fn last(x) {
    let y = x
    if y > 1 { y = y - 1 }
}
last(3)
last(0)
while e < 5 { }
print(total, m, ys, n, e)
""",
    "article": """
let state = {"attempt": 0, "max_attempts": 4, "status": "pending", "evidence": []}
fn record(state, operation, outcome) {
    state.evidence = append(state.evidence, {"attempt": state.attempt, "operation": operation, "outcome": outcome})
    return state
}
while state.status == "pending" and state.attempt < state.max_attempts {
    state.attempt = state.attempt + 1
    state = record(state, "check_destination", "missing")
    if state.attempt == 3 {
        state.status = "verified"
    }
}
print(state.attempt, state.status)
""",
    "finish": """
let i = 0
while i < 100 {
    i = i + 1
    let j = i * 2
    if j == 8 { finish(i) }
}
""",
    "fail_in_loop": """
let i = 0
for x in range(10) {
    i = i + x
    let k = i
    if k > 6 { fail({"blocker": "too big", "at": k}) }
}
""",
    "nested_blocks": """
let a = 0
fn g(n) {
    let t = 0
    let i = 0
    while i < n {
        let j = 0
        while j < i {
            t = t + j
            j = j + 1
        }
        if t > 3 {
            let u = t
            t = u - 1
        } else {
            t = t + 1
        }
        i = i + 1
    }
    return t
}
a = g(4)
let b = a
fn h(x) {
    if x > 0 {
        if x > 5 { return "big" }
        let y = x
        return y
    } else {
        let z = 0 - x
        if z > 5 { return "small" }
    }
    return null
}
print(a, b, h(7), h(2), h(-9), h(-1))
""",
    "toolloop_builtins": """
fn size_of(f) {
    print(f.name)
    let s = f.size
    return s
}
let files = [{"name": "b", "size": 3}, {"name": "a", "size": 1}, {"name": "c", "size": 2}]
let ordered = sort(files, size_of)
let names = []
for f in ordered {
    append(names, f.name)
}
let text = "a\\nbb\\n7\\nccc\\n"
let total = 0
for line in lines(text) {
    let n = int(line, null)
    if n == null { total = total + len(line[0:2]) } else { total = total + n }
}
let m = {"x": 1}
let got = get(m, "y", 5)
sleep(0)
let shown = format("{} {} {} {}", names, total, got, round(2.5))
print(shown, min(3, 1), max([1, 4]), sum([1, 2]), find("abc", "c"), names[1:], upper(lower("Ab")))
let bad = sort([1, "x"], fn(v) { return v })
""",
    "script_args": """
param name: str = "notes.txt"
param times: int = -2
param ratio: float = 1
param loud: bool = true
let words = ["cat", name]
let i = 0
while i < 2 and loud {
    append(words, format("{}:{}", i, ratio))
    i = i + 1
}
print(len(words), times)
let r = run(["head", "-n", str(times), name])
""",
}


class _Recorder:
    def __init__(self) -> None:
        self.exits: list[list[Any]] = []

    def loop_exit(self, frame: Any, reason: str, clause: str | None, steps: int, ended_at: float,
                  snapshot: Any) -> None:
        snap = snapshot()
        self.exits.append([frame.site.span.start, reason, clause, frame.iterations, steps,
                           [[k, _stable(v)] for k, v in sorted(snap.items())]])


def _stable(v: Any) -> str:
    """A value as text without memory addresses (a function shows as its name)."""
    if isinstance(v, (Function, Builtin)):
        return f"<fn {v.name}>"
    if isinstance(v, list):
        return "[" + ", ".join(_stable(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_stable(x)}" for k, x in v.items()) + "}"
    return repr(v)


class _LoggingRuntime(Runtime):
    __slots__ = ("log",)

    def over_limit(self, span: Any) -> None:
        self.log.append([self.steps, span.start, span.end])
        super().over_limit(span)


def _span(err: Any) -> list[int] | None:
    span = getattr(err, "span", None)
    return None if span is None else [span.start, span.end]


@functools.lru_cache(maxsize=8)
def _checked(source: str) -> Any:
    checked, errors = check_source(source, "equiv.dal")
    assert checked is not None, errors
    return checked


def _run(source: str, *, max_steps: int = 10**9, interrupt_at: int = 0, logging: bool = False,
         merge: bool = True) -> dict[str, Any]:
    if not merge:
        saved = interpreter.Compiler
        interpreter.Compiler = functools.partial(Compiler, merge=False)  # type: ignore[misc]
        try:
            return _run(source, max_steps=max_steps, interrupt_at=interrupt_at, logging=logging)
        finally:
            interpreter.Compiler = saved  # type: ignore[misc]
    checked = _checked(source)
    out: list[str] = []
    prints = [0]

    def write(s: str) -> None:
        out.append(s)
        if s.endswith("\n"):
            prints[0] += 1
            if prints[0] == interrupt_at:
                rt.interrupt("TEST")

    rec = _Recorder()
    rt = (_LoggingRuntime if logging else Runtime)(max_steps=max_steps, host=NullHost(write, rec))
    if logging:
        rt.log = []
    outcome = Engine(rt).execute(checked)
    err = outcome.error
    return {
        "status": outcome.status,
        "steps": rt.steps,
        "out": "".join(out),
        "error": None if err is None else [type(err).__name__, str(err).splitlines()[0] if str(err) else ""],
        "span": _span(err),
        "result": repr(outcome.result),
        "exits": rec.exits,
        "log": rt.log if logging else None,
        "prints": prints[0],
    }


def results(source: str, merge: bool = True) -> dict[str, Any]:
    """Every run of `source` this test compares, all in one big-stack thread (starting one per run,
    as `Engine.execute` does, would take most of the time)."""

    def run_all() -> dict[str, Any]:
        saved = interpreter.in_big_stack
        interpreter.in_big_stack = lambda fn: fn()  # type: ignore[assignment]
        try:
            return _results(source, merge)
        finally:
            interpreter.in_big_stack = saved  # type: ignore[assignment]

    return in_big_stack(run_all)


def _results(source: str, merge: bool) -> dict[str, Any]:
    full = _run(source, merge=merge)
    total = full["steps"]
    budgets: list[list[Any]] = []  # runs of budgets with the same outcome: [first budget, outcome...]
    for b in range(1, total + 2):
        r = _run(source, max_steps=b, merge=merge)
        message = r["error"][1] if r["error"] else None
        if r["status"] == "exhausted":
            assert message == f"step budget exhausted: {b:,} steps used (--max-steps)", message
            message = None
        entry = [r["status"], r["steps"], r["span"], message, len(r["exits"])]
        if not budgets or budgets[-1][1:] != entry:
            budgets.append([b, *entry])
    checks = {}
    saved = runtime_mod.CHECK_EVERY
    try:
        for k in CHECK_EVERY_VALUES:
            runtime_mod.CHECK_EVERY = k
            r = _run(source, logging=True, merge=merge)
            checks[str(k)] = [r["status"], r["steps"], r["log"]]
    finally:
        runtime_mod.CHECK_EVERY = saved
    interrupts = []
    for n in range(1, full["prints"] + 1):
        r = _run(source, interrupt_at=n, merge=merge)
        interrupts.append([r["status"], r["steps"], r["span"], len(r["exits"])])
    return {"full": full, "budgets": budgets, "checks": checks, "interrupts": interrupts}


def _expected() -> dict[str, Any]:
    return json.loads(EXPECTED.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_steps_as_recorded(name: str) -> None:
    want = _expected()[name]
    got = results(SCRIPTS[name])
    assert got["full"] == want["full"]
    for g, w in zip(got["budgets"], want["budgets"], strict=False):
        assert g == w, f"budgets from {w[0]}"
    assert len(got["budgets"]) == len(want["budgets"])
    assert got["checks"] == want["checks"]
    assert got["interrupts"] == want["interrupts"]


def test_every_script_is_recorded() -> None:
    assert sorted(_expected()) == sorted(SCRIPTS)


# --- random programs: merged charges against every statement charged on its own ------------------


class _Gen:
    """A random terminating program: integer, string and list variables, straight assignments, calls,
    `if`s with and without calls in their conditions, `else if` chains, bounded `while` and `for`
    loops with `break` and `continue`, functions with early `return`s, and statements that fail (a
    type error, an index out of range) now and then."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.loops = 0
        self.fresh = 0

    def pick(self, *xs: Any) -> Any:
        return self.r.choice(xs)

    def num(self, depth: int = 0) -> str:
        r = self.r.random()
        if depth > 1 or r < 0.4:
            return self.pick("a", "b", "c", str(self.r.randint(0, 9)))
        if r < 0.5:
            return f"xs[{self.pick('0', '1', 'a % 3')}]" if self.r.random() < 0.97 else "xs[7]"
        if r < 0.55 and depth == 0:
            return self.pick("f(a)", "len(xs)", "g(b, c)")
        op = self.pick("+", "-", "*", "%")
        right = self.num(depth + 1)
        if op == "%":
            right = str(self.r.randint(1, 5))
        return f"({self.num(depth + 1)} {op} {right})"

    def cond(self, calls: bool) -> str:
        r = self.r.random()
        if calls and r < 0.3:
            return self.pick("f(a) > 3", "len(xs) < 4", "g(a, b) == 2")
        if r < 0.06:
            return self.pick("s < 3", "a")  # a type error, or a condition that is not a boolean
        c = f"{self.num(1)} {self.pick('<', '<=', '>', '>=', '==', '!=')} {self.num(1)}"
        if r < 0.25:
            c += f" and {self.pick('a', 'b')} < {self.r.randint(0, 9)}"
        return c

    def block(self, depth: int, in_loop: bool, in_fn: bool, n: int | None = None) -> list[str]:
        out: list[str] = []
        for _ in range(n if n is not None else self.r.randint(0, 4)):
            out += self.stmt(depth, in_loop, in_fn)
        if in_fn and self.r.random() < 0.3:
            out.append(f"return {self.num()}")
        return out

    def stmt(self, depth: int, in_loop: bool, in_fn: bool) -> list[str]:
        r = self.r.random()
        if depth >= 3 or r < 0.35:
            target = self.pick("a", "b", "c", "a", "b")
            if self.r.random() < 0.02:
                return [f"{target} = {target} + s"]  # fails: integer + string
            if self.r.random() < 0.15:
                self.fresh += 1
                return [f"let t{self.fresh} = {self.num()}", f"{target} = t{self.fresh}"]
            return [f"{target} = {self.num()}"]
        if r < 0.42:
            return [self.pick("s = s + \"x\"", "xs[0] = a", "print(a, b)", "xs = append(xs, c)",
                              "xs = xs[1:] + [a]", "s = s[0:2] + \"y\"", "xs = sort(xs, f)",
                              "c = c + len(format(\"{} {}\", a, xs[:1]))")]
        if r < 0.6:
            out = [f"if {self.cond(calls=True)} {{", *self.block(depth + 1, in_loop, in_fn), "}"]
            if self.r.random() < 0.3:
                out[-1] = f"}} else if {self.cond(calls=True)} {{"
                out += [*self.block(depth + 1, in_loop, in_fn), "}"]
            if self.r.random() < 0.4:
                out[-1] = "} else {"
                out += [*self.block(depth + 1, in_loop, in_fn), "}"]
            return out
        if r < 0.75:
            self.loops += 1
            w = f"w{self.loops}"
            bound = self.r.randint(0, 4)
            body = [f"{w} = {w} + 1", *self.block(depth + 1, True, in_fn)]
            if self.r.random() < 0.4:
                at = self.r.randint(1, max(1, len(body)))
                body.insert(at, f"if {self.cond(calls=False)} {{ {self.pick('break', 'continue')} }}")
            test = f"{w} < {bound}" if self.r.random() < 0.7 else f"{w} < {bound} and f({w}) > 0"
            return [f"let {w} = 0", f"while {test} {{", *body, "}"]
        if r < 0.85:
            self.loops += 1
            it = self.pick("[1, 2, 3]", "range(3)", "xs", "[]")
            body = self.block(depth + 1, True, in_fn)
            if self.r.random() < 0.3:
                body.append(f"if a > {self.r.randint(0, 9)} {{ {self.pick('break', 'continue')} }}")
            return [f"for v{self.loops} in {it} {{", f"a = a + v{self.loops}", *body, "}"]
        if in_loop and r < 0.9:
            return [f"if {self.cond(calls=False)} {{ {self.pick('break', 'continue')} }}"]
        if in_fn and r < 0.95:
            return [f"if {self.cond(calls=False)} {{ return {self.num()} }}"]
        return [f"c = h({self.num()})"]

    def program(self) -> str:
        lines = ["let a = 1", "let b = 2", "let c = 3", 'let s = "s"', "let xs = [1, 2, 3]",
                 "fn f(x) {", "    let y = x * 2", "    if y > 6 { return y - 6 }", "    return y", "}",
                 "fn g(p, q) {", "    if p > q { return 1 }", "    let d = q - p", "    return d % 3", "}",
                 "fn h(z) {", *self.block(1, False, True, n=self.r.randint(1, 4)), "    return z", "}"]
        lines += self.block(0, False, False, n=self.r.randint(3, 8))
        if self.r.random() < 0.25:
            lines.append(self.pick("if s < a { b = 1 }", "if a { b = 1 } else { b = 2 }"))  # a failing condition
        lines.append("print(a, b, c, s, xs)")
        return "\n".join(lines) + "\n"


def _full_steps(source: str) -> int:
    return in_big_stack(lambda: _run(source))["steps"]


def _random_program(seed: int) -> str:
    for k in range(100):
        source = _Gen(seed * 1000 + k).program()
        checked, errors = check_source(source, "random.dal")
        if checked is not None and _full_steps(source) <= 400:  # every budget is run: keep it short
            return source
    raise AssertionError(f"no valid program for seed {seed}")


@pytest.mark.parametrize("seed", range(30))
def test_random_programs_charge_as_statement_by_statement(seed: int) -> None:
    source = _random_program(seed)
    got, want = results(source), results(source, merge=False)
    assert got["full"] == want["full"], source
    assert got["budgets"] == want["budgets"], source
    assert got["checks"] == want["checks"], source
    assert got["interrupts"] == want["interrupts"], source


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: python tests/test_steps_equivalence.py --record")
    data = {name: results(src) for name, src in sorted(SCRIPTS.items())}
    lines = [f"{json.dumps(name)}: {json.dumps(value, separators=(',', ':'))}" for name, value in data.items()]
    EXPECTED.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    print(f"wrote {EXPECTED} ({len(data)} scripts)")
