"""Loop receipts: one at every exit of every loop, whatever ends it, with the reason and the clause."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import dal
from dal.eval.host import NullHost
from dal.eval.interpreter import Engine, check_source
from dal.eval.runtime import Runtime
from dal.runner.recorder import LoopRecorder


def loops_of(source: str, tmp_path: Path, **kw: Any) -> tuple[Any, list[dict[str, Any]]]:
    r = dal.run(source, workspace=tmp_path, **kw)
    return r, r.loops


def test_condition_exit_names_the_false_clause(tmp_path: Path) -> None:
    src = 'let s = {"status": "pending", "attempt": 0, "max": 3}\n' \
          'while s.status == "pending" and s.attempt < s.max { s.attempt = s.attempt + 1 }\n'
    r, loops = loops_of(src, tmp_path)
    (loop,) = loops
    assert loop["exit"] == "condition"
    assert loop["clause"] == "s.attempt < s.max"
    assert loop["iterations"] == 3
    assert loop["snapshot"]["s"]["attempt"] == 3
    assert loop["source"] == 'while s.status == "pending" and s.attempt < s.max'
    assert loop["line"] == 2 and loop["kind"] == "while"


def test_every_exit_kind_gives_exactly_one_receipt(tmp_path: Path) -> None:
    cases = {
        "end": ("for x in [1, 2] { }", "completed"),
        "break": ("let i = 0\nwhile i < 9 { i = i + 1 if i == 2 { break } }", "completed"),
        "return": ("fn f() { for x in [1, 2] { return x } }\nf()", "completed"),
        "error": ('for x in [1] { let y = x + "a" }', "failed"),
        "finish": ("for x in [1] { finish(x) }", "completed"),
        "fail": ('for x in [1] { fail("no") }', "failed"),
        "budget": ("let n = 0\nwhile n >= 0 { n = n + 1 }", "exhausted"),
    }
    for reason, (src, status) in cases.items():
        r, loops = loops_of(src, tmp_path, max_steps=500)
        assert r.status == status, (reason, r.status)
        assert [lp["exit"] for lp in loops] == [reason], (reason, loops)
        assert loops[0]["clause"] is None


def test_waiting_exit(tmp_path: Path) -> None:
    r, loops = loops_of('for f in ["a", "b"] { run("touch " + f) }', tmp_path, policy={"require_approval": ["touch"]})
    assert r.status == "waiting"
    assert [lp["exit"] for lp in loops] == ["waiting"]


def test_interrupt_exit() -> None:
    recorder = LoopRecorder()
    rt = Runtime(max_steps=10**12, host=NullHost(lambda s: None, recorder))
    checked, errors = check_source("let n = 0\nwhile n >= 0 { n = n + 1 }\n", "t.dal")
    assert not errors
    threading.Timer(0.3, rt.interrupt, args=("SIGINT",)).start()
    outcome = Engine(rt).execute(checked)
    assert outcome.status == "interrupted"
    assert [lp["exit"] for lp in recorder.receipts()] == ["interrupted"]


def test_nested_loops_exit_inner_first_and_outer_sees_inner_evidence(tmp_path: Path) -> None:
    src = (
        'let st = {"attempt": 0, "evidence": []}\n'
        "for i in range(2) {\n"
        "  st.attempt = i\n"
        '  for j in range(2) { st = record(st, "inner", str(j)) }\n'
        "}\n"
    )
    _, loops = loops_of(src, tmp_path)
    assert [lp["line"] for lp in loops] == [4, 4, 2]
    assert len(loops[-1]["evidence"]) == 4  # the outer loop's evidence includes its inner loops' records
    assert [e["outcome"] for e in loops[0]["evidence"]] == ["0", "1"]


def test_hot_loop_site_is_aggregated_and_bounded(tmp_path: Path) -> None:
    src = "fn inner() { let k = 0 while k < 1 { k = k + 1 } }\nfor i in range(20000) { inner() }\n"
    r, loops = loops_of(src, tmp_path)
    assert r.status == "completed"
    inner = [lp for lp in loops if lp["line"] == 1]
    assert sum(lp["exits"] for lp in inner) == 20000
    assert len(inner) <= 10 and any(lp["aggregated"] for lp in inner)


# --- property: as many loop receipts (counting aggregated exits) as loop exits --------------------

@st.composite
def programs(draw: Any, depth: int = 0) -> str:
    """Loops (while with a bound, for over a range) nested in each other and in a function, with
    random break / continue / return / fail / errors; `entered` counts loop entries."""
    parts = []
    for _ in range(draw(st.integers(1, 2))):
        n = draw(st.integers(0, 3))
        var = f"v{depth}_{len(parts)}"
        body = draw(programs(depth + 1)) if depth < 2 and draw(st.booleans()) else ""
        exit_stmt = draw(st.sampled_from(["", "break", "continue", "return 1", "fail(\"x\")", "let e = 1 + \"a\""]))
        guard = f"if {var} == {draw(st.integers(0, 3))} {{ {exit_stmt} }}" if exit_stmt else ""
        if draw(st.booleans()):
            parts.append(f"entered = entered + 1\nfor {var} in range({n}) {{ {body} {guard} }}")
        else:
            parts.append(
                f"entered = entered + 1\nlet {var} = 0\nwhile {var} < {n} {{ {var} = {var} + 1 {body} {guard} }}"
            )
    return "\n".join(parts)


@settings(max_examples=60, deadline=None)
@given(programs())
def test_one_receipt_per_loop_exit(body: str) -> None:
    source = f"let entered = 0\nfn main() {{\n{body}\n}}\nmain()\n"
    checked, errors = check_source(source, "p.dal")
    assert not errors, errors
    recorder = LoopRecorder()
    rt = Runtime(max_steps=200_000, host=NullHost(lambda s: None, recorder))
    engine = Engine(rt)
    engine.execute(checked)
    exits = sum(lp["exits"] for lp in recorder.receipts())
    assert exits == engine.globals["entered"]
