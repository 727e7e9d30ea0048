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
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from dal.eval import runtime as runtime_mod
from dal.eval.interpreter import Engine, check_source
from dal.eval.runtime import Runtime
from dal.eval.values import Builtin, Function

EXPECTED = Path(__file__).with_name("steps_equivalence.json")
CHECK_EVERY_VALUES = (1, 2, 3, 5, 8)

SCRIPTS: dict[str, str] = {
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


def _run(source: str, *, max_steps: int = 10**9, interrupt_at: int = 0, logging: bool = False) -> dict[str, Any]:
    checked, errors = check_source(source, "equiv.dal")
    assert checked is not None, errors
    out: list[str] = []
    prints = [0]
    rt = (_LoggingRuntime if logging else Runtime)(max_steps=max_steps, write=out.append)
    if logging:
        rt.log = []

    def write(s: str) -> None:
        out.append(s)
        if s.endswith("\n"):
            prints[0] += 1
            if prints[0] == interrupt_at:
                rt.interrupt("TEST")

    rt.write = write
    rec = _Recorder()
    rt.recorder = rec
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


def results(source: str) -> dict[str, Any]:
    full = _run(source)
    total = full["steps"]
    budgets: list[list[Any]] = []  # runs of budgets with the same outcome: [first budget, outcome...]
    for b in range(1, total + 2):
        r = _run(source, max_steps=b)
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
            r = _run(source, logging=True)
            checks[str(k)] = [r["status"], r["steps"], r["log"]]
    finally:
        runtime_mod.CHECK_EVERY = saved
    interrupts = []
    for n in range(1, full["prints"] + 1):
        r = _run(source, interrupt_at=n)
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


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: python tests/test_steps_equivalence.py --record")
    data = {name: results(src) for name, src in sorted(SCRIPTS.items())}
    lines = [f"{json.dumps(name)}: {json.dumps(value, separators=(',', ':'))}" for name, value in data.items()]
    EXPECTED.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    print(f"wrote {EXPECTED} ({len(data)} scripts)")
