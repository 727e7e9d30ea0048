"""Script arguments (issue 16): `param` declarations, given on the command line (`dal run s.dal name=value`),
through the API (`dal.run(path, args={...})`) and the queue (`dal submit s.dal name=value`); checked before
anything runs, stored with the run's spec, restored on resume, recorded in the receipt, and part of the
operation: a later invocation of the same key with other values is refused with nothing run.

Every test runs real scripts through the real runner and counts what their commands did (marker files).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dal
from dal.syntax.parser import parse
from dal.worker.keys import KeyProblem, literal_key

SEND = """\
param to: str
param times: int = 1
param loud: bool = false
param ratio: float = 0.5
operation("send-" + to)
let text = format("to {} x{} ({})", to, times, ratio)
if loud {
    text = upper(text)
}
print(text)
run(["touch", "sent-" + to])
"""


def _dal(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    return subprocess.run([sys.executable, "-m", "dal", *argv], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "dal.toml").write_text('[run]\nallow = ["touch"]\n')
    (w / "send.dal").write_text(SEND)
    return w


def test_the_command_line_gives_typed_arguments_and_the_receipt_records_them(ws: Path) -> None:
    p = _dal(ws, "run", "--unsandboxed-as-root", "send.dal", "to=ann", "times=3", "loud=true", "--json")
    assert p.returncode == 0, p.stderr
    assert "TO ANN X3 (0.5)" in p.stderr  # the script's output goes to stderr with --json
    receipt = json.loads(p.stdout)
    assert receipt["args"] == {"to": "ann", "times": 3, "loud": True, "ratio": 0.5}
    assert receipt["operation"] == "send-ann"
    assert receipt["rerun"][-4:] == ["to=ann", "times=3", "loud=true", "ratio=0.5"]
    assert (ws / "sent-ann").exists()


@pytest.mark.parametrize(("words", "message", "line"), [
    (["to=ann", "times=x"], "argument `times` is int: expected an integer, got \"x\"", 2),
    (["to=ann", "loud=yes"], "argument `loud` is bool: expected true or false, got \"yes\"", 3),
    (["to=ann", "ratio=nan"], "argument `ratio` is float: expected a finite number", 4),
    (["to=ann", "tims=2"], "this script takes no argument `tims`", 1),
    ([], "argument `to` was not given, and it has no default", 1),
])
def test_a_bad_argument_rejects_the_run_with_a_located_error_and_nothing_runs(
        ws: Path, words: list[str], message: str, line: int) -> None:
    p = _dal(ws, "run", "--unsandboxed-as-root", "send.dal", *words)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr
    assert f"--> send.dal:{line}:1" in p.stderr and "^" in p.stderr
    assert "dal: rejected" in p.stderr
    assert not list(ws.glob("sent-*"))


def test_a_word_that_is_not_name_value_is_a_usage_error(ws: Path) -> None:
    p = _dal(ws, "run", "send.dal", "ann")
    assert p.returncode == 2 and "'ann' is not a script argument" in p.stderr
    p = _dal(ws, "run", "send.dal", "to=a", "to=b")
    assert p.returncode == 2 and "given twice" in p.stderr
    assert not list(ws.glob("sent-*")) and not (ws / ".dal" / "dal.db").exists()


def test_the_api_takes_typed_values_or_text(ws: Path) -> None:
    r = dal.run(ws / "send.dal", workspace=ws, args={"to": "bo", "times": 2, "ratio": 1}, unsandboxed_as_root=True)
    assert r.status == "completed", r.error
    assert r.args == {"to": "bo", "times": 2, "loud": False, "ratio": 1.0}
    assert r.output == "to bo x2 (1.0)\n"
    bad = dal.run(ws / "send.dal", workspace=ws, args={"to": "cy", "times": True}, unsandboxed_as_root=True)
    assert bad.status == "rejected" and "expected an integer, got True" in bad.error["message"]
    with pytest.raises(dal.DalUsageError, match="not a string, a number or a boolean"):
        dal.run(ws / "send.dal", workspace=ws, args={"to": ["x"]})
    assert sorted(p.name for p in ws.glob("sent-*")) == ["sent-bo"]


def test_the_same_key_with_other_values_is_refused_and_runs_nothing(ws: Path) -> None:
    (ws / "k.dal").write_text('param n: int = 1\nrun(["touch", "done-" + str(n)])\n')
    first = dal.run(ws / "k.dal", workspace=ws, key="job-1", args={"n": 1}, unsandboxed_as_root=True)
    assert first.status == "completed"
    assert dal.run(ws / "k.dal", workspace=ws, key="job-1", unsandboxed_as_root=True).status == "skipped"  # default 1
    with pytest.raises(dal.DalUsageError, match=r"operation 'job-1' was started with n=1 .* this run gives n=2"):
        dal.run(ws / "k.dal", workspace=ws, key="job-1", args={"n": 2}, unsandboxed_as_root=True)
    assert sorted(p.name for p in ws.glob("done-*")) == ["done-1"]
    again = dal.run(ws / "k.dal", workspace=ws, key="job-1", args={"n": 2}, new_attempt=True,
                    unsandboxed_as_root=True)
    assert again.status == "completed" and again.args == {"n": 2}
    assert sorted(p.name for p in ws.glob("done-*")) == ["done-1", "done-2"]


def test_a_key_built_from_an_argument_keeps_values_apart(ws: Path) -> None:
    for to in ("ann", "bob", "ann"):
        r = dal.run(ws / "send.dal", workspace=ws, args={"to": to}, unsandboxed_as_root=True)
        assert r.operation == f"send-{to}"
    assert r.status == "skipped"
    with pytest.raises(dal.DalUsageError, match="this run gives to=\"ann\", times=5"):
        dal.run(ws / "send.dal", workspace=ws, args={"to": "ann", "times": 5}, unsandboxed_as_root=True)


def test_a_resume_runs_with_the_stored_arguments(ws: Path) -> None:
    (ws / "dal.toml").write_text('[run]\nallow = ["touch"]\nrequire_approval = ["touch"]\n')
    r = dal.run(ws / "send.dal", workspace=ws, args={"to": "dee", "times": "4"}, unsandboxed_as_root=True)
    assert r.status == "waiting" and r.args["times"] == 4
    dal.approve(r.run_id, workspace=ws)
    done = dal.resume(r.run_id, workspace=ws, unsandboxed_as_root=True)
    assert done.status == "completed", done.error
    assert done.args == r.args and done.output == "to dee x4 (0.5)\n"
    assert sorted(p.name for p in ws.glob("sent-*")) == ["sent-dee"]


def test_submit_stores_the_arguments_in_the_job_and_the_worker_runs_with_them(ws: Path) -> None:
    p = _dal(ws, "submit", "send.dal", "to=eve", "times=2")
    assert p.returncode == 0, p.stderr
    assert "key send-eve" in p.stdout  # the key built from the argument is known before the job runs
    p = _dal(ws, "submit", "send.dal", "to=eve", "times=3")
    assert p.returncode == 2 and "other script arguments" in p.stderr
    p = _dal(ws, "submit", "send.dal", "to=eve", "times=zz")
    assert p.returncode == 2 and "expected an integer" in p.stderr
    p = _dal(ws, "worker", "--until-idle")
    assert p.returncode == 0, p.stderr
    assert "to eve x2 (0.5)" in p.stdout + p.stderr
    receipt = dal.receipt("send-eve", workspace=ws)
    assert receipt.args == {"to": "eve", "times": 2, "loud": False, "ratio": 0.5}


def test_check_knows_arguments_and_refuses_misuse(tmp_path: Path) -> None:
    cases = {
        'print(1)\nparam x: int\n': "`param` declarations come before the script's first statement",
        'param x: list\n': "unknown argument type `list`",
        'param x: int = "3"\n': "the default of `x` must be an integer, got a string",
        'param x: str = "a" + "b"\n': "an argument's default must be a literal",
        'param x: int = 1\nx = 2\n': "cannot assign to `x`: it is the script's argument",
        'param x: int\nparam x: str\n': "`x` is already declared",
    }
    for source, message in cases.items():
        (tmp_path / "c.dal").write_text(source)
        p = _dal(tmp_path, "check", "c.dal")
        assert p.returncode == 2 and message in p.stderr, (source, p.stderr)
    (tmp_path / "c.dal").write_text(SEND)
    p = _dal(tmp_path, "check", "c.dal")
    assert p.returncode == 0 and "c.dal: ok, arguments: to (str), times (int, default 1), loud (bool" in p.stderr


def test_the_key_a_job_gets_is_the_one_the_run_builds() -> None:
    prog = parse(SEND)
    assert literal_key(prog, {"to": "ann"}) == "send-ann"
    with pytest.raises(KeyProblem):
        literal_key(prog)  # not bound: the key cannot be known
    shadowed = parse('param to: str\nif true {\n    let to = "x"\n    operation("k-" + to)\n}\n')
    with pytest.raises(KeyProblem):
        literal_key(shadowed, {"to": "ann"})
    assert literal_key(parse('param n: int\noperation("poll-" + str(n))\n'), {"n": 7}) == "poll-7"


KILLED = """\
param to: str
param times: int = 1
operation("mk-" + to)
let made = run(["mkdir", "made-" + to])
print("made", made.status)
sleep(60)
print(format("{} x{}", to, times))
"""


def test_a_killed_run_continues_with_its_own_arguments(ws: Path) -> None:
    # kill -9 while the script sleeps after its first effect: the next invocation of the same key must
    # resume with the stored values (the mkdir replayed, not run again), and other values are refused.
    import signal
    import time

    (ws / "dal.toml").write_text('[run]\nallow = ["mkdir"]\n')
    (ws / "k.dal").write_text(KILLED)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    proc = subprocess.Popen([sys.executable, "-m", "dal", "run", "--unsandboxed-as-root", "k.dal", "to=zed",
                             "times=3"], cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 60
    while not (ws / "made-zed").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (ws / "made-zed").is_dir()
    time.sleep(0.5)  # the effect's result is journaled before the script goes on to sleep
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    p = _dal(ws, "run", "--unsandboxed-as-root", "k.dal", "to=zed", "times=4")
    assert p.returncode == 2 and "was started with to=\"zed\", times=3" in p.stderr and "No effect ran" in p.stderr
    (ws / "k.dal").write_text(KILLED.replace("sleep(60)", "sleep(0)"))  # the same effects, no long wait
    dead = dal.receipt("mk-zed", workspace=ws)  # rebuilt from the journal: it died before its receipt
    assert dead.args == {"to": "zed", "times": 3}
    # `dal resume` runs only the text the run ran (docs/durability.md), so the changed script is run by
    # name: the next invocation of the key continues the operation from its journal.
    with pytest.raises(dal.DalUsageError, match="changed since run"):
        dal.resume(dead.run_id, workspace=ws, unsandboxed_as_root=True)
    done = dal.run(ws / "k.dal", workspace=ws, args={"to": "zed", "times": 3}, unsandboxed_as_root=True)
    assert done.status == "completed", done.error
    assert done.previous_run == dead.run_id
    assert done.args == {"to": "zed", "times": 3} and done.output.endswith("zed x3\n")
    item = done.effects["items"][0]
    assert item["replayed"] and item["status"] == "completed"  # not a second mkdir (which would fail)


def test_submit_refuses_a_key_that_ran_with_other_values(ws: Path) -> None:
    assert dal.run(ws / "send.dal", workspace=ws, args={"to": "fay"}, unsandboxed_as_root=True).status == "completed"
    p = _dal(ws, "submit", "send.dal", "to=fay", "times=9")
    assert p.returncode == 2 and "was started with other script arguments (to=\"fay\", times=1" in p.stderr
    p = _dal(ws, "submit", "send.dal", "to=fay")
    assert p.returncode == 0 and "already completed" in p.stdout


@pytest.mark.parametrize("source", [
    'param a: str = "x y"\nparam b: int = -3\nparam c: float = 2.0\nparam d: bool\nprint(a)\n',
    "param n: int\n",
])
def test_fmt_keeps_param_declarations(source: str) -> None:
    from dal.syntax.format import format_source

    assert format_source(source, "f.dal") == source
    assert parse(format_source(source, "f.dal")) == parse(source)


def test_argument_values_read_back_from_their_command_line_text() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from dal.eval.args import from_text
    from dal.runner.spec import arg_text

    @given(st.one_of(st.tuples(st.just("int"), st.integers()),
                     st.tuples(st.just("float"), st.floats(allow_nan=False, allow_infinity=False)),
                     st.tuples(st.just("bool"), st.booleans()),
                     st.tuples(st.just("str"), st.text().filter(lambda t: "\x00" not in t))))
    def round_trip(case: tuple[str, object]) -> None:
        kind, value = case
        assert from_text(kind, arg_text(value)) == value

    round_trip()


def test_a_schedule_checks_and_keeps_its_arguments(ws: Path) -> None:
    pytest.importorskip("cronsim")
    (ws / "poll.dal").write_text('param target: str\nprint("poll " + target)\n')
    p = _dal(ws, "schedule", "add", "p", "--cron", "*/5 * * * *", "poll.dal")
    assert p.returncode == 2 and "argument `target` was not given" in p.stderr
    p = _dal(ws, "schedule", "add", "p", "--cron", "*/5 * * * *", "poll.dal", "target=db")
    assert p.returncode == 0, p.stderr
    import sqlite3

    with sqlite3.connect(ws / ".dal" / "dal.db") as db:
        spec = json.loads(db.execute("SELECT spec FROM schedules").fetchone()[0])
    assert spec["extensions"]["args"] == {"target": "db"}


def test_arguments_and_flags_mix_after_the_script(ws: Path) -> None:
    p = _dal(ws, "run", "send.dal", "to=gus", "--unsandboxed-as-root", "times=2", "--quiet", "loud=true")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "TO GUS X2 (0.5)\n" and p.stderr == ""
    p = _dal(ws, "run", "send.dal", "to=gus", "--quiet", "--bogus", "stray")
    assert p.returncode == 2 and "unrecognized arguments: --bogus stray" in p.stderr
    p = _dal(ws, "receipts", "to=gus")  # a command that takes no script arguments
    assert p.returncode == 2 and "unrecognized arguments: to=gus" in p.stderr


def test_a_damaged_stored_argument_map_is_a_clear_error() -> None:
    from dal.runner.spec import RunSpec, SpecError

    with pytest.raises(SpecError, match="extensions.args"):
        RunSpec.from_json({"version": 1, "extensions": {"args": ["to", "ann"]}})
