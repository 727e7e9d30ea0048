"""Budgets that bind (issue 13, item 6): no single step can build an unbounded value or take unbounded
time, the deadline and the memory budget are enforced by a watchdog that stops the script at its next
step however slow its steps are, and every such stop is `exhausted`, names its budget and points at the
line that caused it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import dal as dalapi

pytestmark = pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")

# With --max-memory 64M: strings of at most 8,388,608 characters, lists of 4,194,304 items, 524,288 new
# values at once (dal.eval.values.Limits).
M64 = "64M"
# 4,194,305 characters: just over half of what one string may hold with 64M
BIG = 'let s = "x"\nwhile len(s) < 4000000 { s = s + s }\ns = s + "y"\n'


def run64(src: str, tmp_path: Path, **kw: Any) -> Any:
    return dalapi.run(src, workspace=tmp_path, max_memory=M64, **kw)


def assert_memory_budget(r: Any, line: int, what: str) -> None:
    assert r.status == "exhausted", (r.status, r.error)
    assert r.error["kind"] == "budget"
    assert r.error["message"].startswith("memory budget exhausted: "), r.error["message"]
    assert what in r.error["message"] and "(--max-memory 64M)" in r.error["message"]
    assert r.error["line"] == line and r.error["column"] > 0
    assert r.retry == "inspect"


@pytest.mark.parametrize("line4, what", [
    ("s = s + s", "`+` would make a string of 8,388,610 characters"),  # the in-place `s = s + x` path
    ("let t = s + s + s", "`+` would make a string of 8,388,610 characters"),  # a statement's own operator
    ('print("" + (s + s))', "`+` would make a string of 8,388,610 characters"),  # an expression
    ('let t = join([s, s], "")', "`join` would make a string of 8,388,610 characters"),
    ('let t = replace(s, "x", "yy")', "`replace` would make a string of 8,388,609 characters"),
    ("let t = str([s, s])", "`str` would make a string of more than 8,388,608 characters"),
    ("let t = json([s, s])", "`json` would make a string of more than 8,388,608 characters"),
    ("print(s, s)", "`print` would make a string of 8,388,612 characters"),
    ("print([s, s])", "`print` would make a string of more than 8,388,608 characters"),
    ('let t = split(s, "x")', "`split` would make 4,194,305 new values at once"),
    ("for c in s { }", "`for` over a string would make 4,194,305 new values at once"),
    ("let v = parse_json(s)", "`parse_json` would make 4,194,305 new values at once"),
    ("let r = range(600000)", "`range` would make 600,000 new values at once"),
])
def test_each_operation_is_refused_before_it_builds_the_value(tmp_path: Path, line4: str, what: str) -> None:
    t0 = time.monotonic()
    r = run64(BIG + line4 + "\n", tmp_path, max_steps=10_000_000)
    assert time.monotonic() - t0 < 10
    assert_memory_budget(r, 4, what)
    ok = run64(BIG.replace('s = s + "y"', 's = s + ""') + line4.replace("s + s + s", "s + s") + "\n", tmp_path,
               max_steps=10_000_000)
    if "new values" not in what and "more than" not in what and not line4.startswith("print"):
        assert ok.status == "completed", ok.error  # one character less: at the limit, not over it


@pytest.mark.parametrize("line4, what", [
    ('let t = format("{0}{0}", s)', "`format` would make a string of 8,388,610 characters"),
    ('let t = upper(s + "\u00e9")', "`upper` would make a string of 12,582,918 characters"),
    ('let t = lines(replace(s, "x", "\\n"))', "`lines` would make 4,194,305 new values at once"),
    ("let xs = [1]\nwhile len(xs) < 600000 { xs = xs + xs }\nlet t = sort(xs)",
     "`sort` would make 1,048,576 new values at once"),
])
def test_the_builtins_of_issue_16_are_refused_before_they_build(tmp_path: Path, line4: str, what: str) -> None:
    t0 = time.monotonic()
    r = run64(BIG + line4 + "\n", tmp_path, max_steps=10_000_000)
    assert time.monotonic() - t0 < 10
    assert_memory_budget(r, 4 + line4.count("\n"), what)


def test_lists_double_only_to_their_limit(tmp_path: Path) -> None:
    r = run64("let xs = [1]\nwhile true { xs = xs + xs }\n", tmp_path)
    assert_memory_budget(r, 2, "`+` would make a list of 8,388,608 items; one list may hold 4,194,304")


def test_append_stops_at_the_list_limit(tmp_path: Path) -> None:
    r = dalapi.run("let xs = []\nwhile true { append(xs, 1) }\n", workspace=tmp_path, max_memory="16M",
                   max_steps=50_000_000)
    assert r.status == "exhausted" and r.error["line"] == 2
    assert "`append` would make a list of 1,048,577 items" in r.error["message"]


def test_the_string_doubling_of_the_issue_stops_early_and_small(tmp_path: Path) -> None:
    """It reached 3 GB under --timeout 5, and its error pointed at s.dal:0:0."""
    (tmp_path / "s.dal").write_text('let s = "x"\nwhile true {\n    s = s + s\n}\n')
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "dal", "run", "--timeout", "5", "s.dal"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()  # type: ignore[union-attr]
    assert os.waitstatus_to_exitcode(status) == 4, err
    assert time.monotonic() - t0 < 10
    assert usage.ru_maxrss < 1024 * 1024  # KB: under 1 GB (the default budget)
    assert "error[budget]: memory budget exhausted: `+` would make a string of 268,435,456 characters" in err
    assert " --> s.dal:3:9" in err and "Traceback" not in err


INT_CASES = [
    ("let y = 7\nfor i in range(40) { y = y * y }\n", 2, "y * y"),  # the issue's 18-minute loop
    ("let n = 1\nwhile true { n = n + n }\n", 2, "n + n"),
    ('let n = int("9" * 1)\nlet m = int("' + "9" * 10_000 + '")\nprint(m + 1)\n', 3, "m + 1"),
    ('let m = int("' + "9" * 10_000 + '")\nlet k = -m - 1\n', 2, "-m - 1"),
    ('let m = int("' + "9" * 10_000 + '")\nlet k = 0 - m\nk = k * 10\n', 3, "k * 10"),
    ('print(int("' + "1" * 10_001 + '"))\n', 1, "int("),
    ('print(parse_json("[' + "1" * 10_001 + ']"))\n', 1, "parse_json("),
]


@pytest.mark.parametrize("src, line, text", INT_CASES)
def test_integers_have_at_most_10000_digits(tmp_path: Path, src: str, line: int, text: str) -> None:
    src = src.replace('int("9" * 1)', "9")
    t0 = time.monotonic()
    r = dalapi.run(src, workspace=tmp_path)
    assert time.monotonic() - t0 < 10
    assert r.status == "failed" and r.error["kind"] == "runtime", r.error
    assert r.error["message"] == "integer overflow: the result would have more than 10,000 digits"
    assert r.error["line"] == line and text in r.error["source_line"]


def test_integers_up_to_10000_digits_work(dal_engine) -> None:
    nines = "9" * 10_000
    out = dal_engine(f'let m = int("{nines}")\nprint(len(str(m)), len(str(-m)), m - 1 < m, m * 1 == m)\n'
                     f'print(int("000{"0" * 20_000}42"), parse_json("-{nines}") == -m)\n'
                     'let f = 1\nfor i in range(1, 3000) { f = f * i }\nprint(len(str(f)))\n')
    assert out == "10000 10001 true true\n42 true\n9128\n"


SLOW_STEPS = {
    # each `==` of two million-item lists takes tens of milliseconds: 20,000 steps take minutes
    "eq.dal": "let a = range(1000000)\nlet b = range(1000000)\nlet n = 0\nwhile n >= 0 {\n"
              "    let e = a == b\n    n = n + 1\n}\n",
    # one step: the text of a value that shares itself 2^60 times (json walks it, within the string limit)
    "json.dal": "let a = [1]\nfor i in range(60) { a = [a, a] }\nprint(len(json(a)))\n",
    # one step: comparing two such values that do not share their parts
    "dag.dal": "let a = [1]\nlet b = [1]\nfor i in range(300) { a = [a, a] b = [b, b] }\n"
               "let c = []\nfor i in range(200000) { append(c, a) }\nlet d = []\n"
               "for i in range(200000) { append(d, b) }\nprint(contains([c, c], d))\n",
}


@pytest.mark.parametrize("name, line", [("eq.dal", 5), ("json.dal", 3)])
def test_the_timeout_binds_however_slow_one_step_is(tmp_path: Path, dal, name: str, line: int) -> None:
    (tmp_path / name).write_text(SLOW_STEPS[name])
    t0 = time.monotonic()
    p = dal.cli("run", "--timeout", "2", name, cwd=tmp_path, timeout=60)
    assert time.monotonic() - t0 < 10
    assert p.returncode == 4, p.stderr
    assert "error[budget]: time budget exhausted: the run took longer than 2s (--timeout)" in p.stderr
    assert f" --> {name}:{line}:" in p.stderr and "Traceback" not in p.stderr


def test_a_comparison_of_shared_values_costs_their_distinct_parts(dal_engine) -> None:
    """Two values with 2^300 paths each, compared without a timeout: each pair of parts is compared once."""
    t0 = time.monotonic()
    out = dal_engine(SLOW_STEPS["dag.dal"], max_steps=10_000_000)
    assert out == "true\n"
    assert time.monotonic() - t0 < 30


def test_ctrl_c_stops_a_long_step(tmp_path: Path) -> None:
    (tmp_path / "json.dal").write_text(SLOW_STEPS["json.dal"])
    p = subprocess.Popen([sys.executable, "-m", "dal", "run", "json.dal"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # well inside the one long step
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert time.monotonic() - t0 < 10
    assert p.returncode == 130, err
    assert "error[interrupted]: interrupted by SIGINT" in err and " --> json.dal:3:" in err


def test_the_watchdog_bounds_what_all_values_hold(tmp_path: Path) -> None:
    """Each value is well within its size, but together they pass the budget: the run stops at the next
    step once the process holds more than --max-memory more than it did at the start."""
    src = ('let s = "x"\nwhile len(s) < 4000000 { s = s + s }\nlet xs = []\n'
           "while true {\n    append(xs, s + str(len(xs)))\n}\n")
    (tmp_path / "m.dal").write_text(src)
    p = subprocess.Popen([sys.executable, "-m", "dal", "run", "--max-memory", "256M", "m.dal"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()  # type: ignore[union-attr]
    assert os.waitstatus_to_exitcode(status) == 4, err
    assert "error[budget]: memory budget exhausted: the run holds more than 256M of memory (--max-memory)" in err
    assert " --> m.dal:4:" in err or " --> m.dal:5:" in err  # the step after the one that crossed it
    assert usage.ru_maxrss < 700 * 1024  # KB: the budget, what DAL itself holds, and one step's overshoot


def test_max_memory_is_checked_as_a_size(tmp_path: Path, dal) -> None:
    (tmp_path / "s.dal").write_text('print("hi")\n')
    p = dal.cli("run", "--max-memory", "1K", "s.dal", cwd=tmp_path)
    assert p.returncode == 2 and "--max-memory: must be at least 16M" in p.stderr
    p = dal.cli("run", "--max-memory", "lots", "s.dal", cwd=tmp_path)
    assert p.returncode == 2 and "expected a size such as 512M or 2G" in p.stderr
    with pytest.raises(dalapi.DalUsageError, match="max_memory"):
        dalapi.run('print("hi")', workspace=tmp_path, max_memory="1K")
    assert dalapi.run('print("hi")', workspace=tmp_path, max_memory=2 << 30).status == "completed"


def test_resume_keeps_the_memory_budget(tmp_path: Path, dal) -> None:
    (tmp_path / "s.dal").write_text('run("echo hi")\nlet s = "x"\nwhile true { s = s + s }\n')
    p = dal.cli("run", "--key", "k", "--require-approval", "echo", "--max-memory", "64M", "s.dal", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert dal.cli("approve", "k", cwd=tmp_path).returncode == 0
    p = dal.cli("resume", "k", cwd=tmp_path)
    assert p.returncode == 4, p.stderr
    assert "(--max-memory 64M)" in p.stderr and " --> s.dal:3:" in p.stderr


def test_step_counts_do_not_depend_on_the_memory_budget(dal_engine) -> None:
    src = 'let s = ""\nlet i = 0\nwhile i < 1000 { s = s + "ab" i = i + 1 }\nprint(len(s))\n'
    from dal.eval.host import NullHost
    from dal.eval.interpreter import Engine, check_source
    from dal.eval.runtime import Runtime

    counts = set()
    for mem in (16 << 20, 1 << 30, 1 << 40):
        checked, _ = check_source(src, "t.dal")
        rt = Runtime(max_memory=mem, host=NullHost(lambda s: None))
        assert Engine(rt).execute(checked).status == "completed"  # type: ignore[arg-type]
        counts.add(rt.steps)
    assert len(counts) == 1


@pytest.mark.parametrize("exc, status, kind", [
    (MemoryError, "exhausted", "budget"), (RecursionError, "failed", "runtime"), (ValueError, "failed", "internal"),
])
def test_errors_python_raises_are_located_at_the_statement(exc: type, status: str, kind: str) -> None:
    """What used to point at file:0:0: the machine out of memory, a stack overflow outside any call, a
    bug in DAL. The place comes from the innermost compiled statement or expression."""
    from dal.eval.builtins import BUILTINS
    from dal.eval.host import NullHost
    from dal.eval.interpreter import Engine, check_source
    from dal.eval.runtime import Runtime
    from dal.eval.values import Builtin

    def boom(rt: Any, args: list[Any], span: Any) -> None:
        raise exc("boom")

    table = {**BUILTINS, "boom": Builtin("boom", boom, 0, 0, "boom()", "")}
    checked, errors = check_source('let x = 1\nlet i = 0\nwhile i < 3 {\n    i = i + 1\n    let y = [boom()]\n}\n',
                                   "t.dal", builtins=table)
    assert not errors
    outcome = Engine(Runtime(host=NullHost(lambda s: None)), builtins=table).execute(checked)  # type: ignore[arg-type]
    assert outcome.status == status and outcome.error.kind == kind
    assert (outcome.error.span.line, outcome.error.span.column) == (5, 14)
