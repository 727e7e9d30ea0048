"""The check of one command is bounded, and so is what reaches bubblewrap:
a command too long or a program with too many arguments is denied with a reason; an early exit of
bubblewrap is the stage's failure, never DAL's; the newline scan is linear; the tree-walk budget is per
command, not per operand."""

from __future__ import annotations

import io
import time
from pathlib import Path
from unittest import mock

import pytest

from dal.effects import Decision, EffectContext, Policy, check_command, execute_checked, sandbox_status
from dal.effects.classify import check
from dal.effects.classify.check import MAX_COMMAND_BYTES, MAX_WORDS, find_program
from dal.effects.exec import executor
from dal.effects.plan.shell import parse_command
from dal.runner.build import build_spec
from dal.runner.runner import execute
from dal.runner.spec import RunHooks

HAVE_BWRAP = sandbox_status()[0]
WALLS = [pytest.param(False, id="no-wall"),
         pytest.param(True, id="wall", marks=pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable"))]


def test_a_program_with_too_many_arguments_is_denied_before_it_starts(tmp_path: Path) -> None:
    d = check_command("echo " + "ab " * (MAX_WORDS + 10), Policy.load(tmp_path))
    assert not d.allowed and f"at most {MAX_WORDS}" in d.reason
    assert check_command("echo " + "ab " * (MAX_WORDS - 10), Policy.load(tmp_path)).allowed


def test_a_command_too_long_is_denied_before_it_is_parsed(tmp_path: Path) -> None:
    d = check_command("echo '" + "x" * MAX_COMMAND_BYTES + "'", Policy.load(tmp_path))
    assert not d.allowed and f"at most {MAX_COMMAND_BYTES}" in d.reason


@pytest.mark.parametrize("wall", WALLS)
def test_the_finding_script_ends_with_a_denied_result_not_an_internal_error(tmp_path: Path, wall: bool) -> None:
    script = tmp_path / "s.dal"
    script.write_text('let s = "ab "\nfor i in range(14) { s = s + s }\nlet r = run("echo " + s)\n'
                      'print("STATUS", r.status)\n')
    buf = io.StringIO()
    report = execute(build_spec(script, workspace=tmp_path, use_sandbox=wall),
                     RunHooks(write=buf.write, handle_signals=False))  # fmt: skip
    assert "STATUS denied" in buf.getvalue()
    assert report.receipt["status"] == "completed", report.receipt


def _bypassed(command: str) -> Decision:
    plan = parse_command(command)
    return Decision(True, "bypassed in a test", "read", plan=plan, executables=(("echo", find_program("echo")),))


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable")
def test_bubblewrap_exiting_early_is_a_failed_stage(tmp_path: Path) -> None:
    """Past the check (bypassed here), bubblewrap itself refuses more than 9000 arguments and exits at once:
    DAL says so and the command fails; before, writing its block descriptor raised BrokenPipeError."""
    command = "echo " + "ab " * 9500
    ctx = EffectContext(policy=Policy.load(tmp_path), timeout=10)
    r = execute_checked(command, _bypassed(command), ctx)
    assert r.status == "failed" and "the wall takes at most 9000 arguments" in r.stderr
    with mock.patch.object(executor, "_BWRAP_MAX_ARGS", 10**6):  # let it reach bubblewrap
        r = execute_checked(command, _bypassed(command), ctx)
    assert r.status == "failed"
    assert "bubblewrap) exited before the program started" in r.stderr and "9000" in r.stderr


def test_many_quoted_newlines_parse_in_linear_time(tmp_path: Path) -> None:
    """40,000 quoted strings holding a newline: the old scan compared every newline with every string
    (minutes); now one pass (well under a second alone; the bound is loose for a loaded machine)."""
    command = "cat " + "'a\nb' " * 40_000 + " ../denied-anyway"
    started = time.monotonic()
    plan = parse_command(command)
    assert time.monotonic() - started < 20
    assert len(plan.simple_commands()[0].argv) == 40_002
    d = check_command(command, Policy.load(tmp_path))
    assert not d.allowed and "40002 arguments" in d.reason
    for bad, why in (("echo 'a\nb' x\ny", "newline separator"), ("echo 'a' \\\nb", "line continuation")):
        d = check_command(bad, Policy.load(tmp_path))
        assert not d.allowed and why in d.reason, d.reason
    assert check_command("echo \"a\nb\" 'c\nd'", Policy.load(tmp_path)).allowed


def test_the_tree_walk_budget_is_per_command_not_per_operand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "d").mkdir()
    for i in range(30):
        (tmp_path / "d" / f"f{i}").write_text("x")
    monkeypatch.setattr(check, "_TREE_LIMIT", 100)
    policy = Policy.load(tmp_path)
    assert check_command("grep -r x d d d", policy).allowed  # 90 entries
    d = check_command("grep -r x d d d d", policy)  # the same 30 entries, walked four times: 120
    assert not d.allowed and "more than 100 entries to check in one command" in d.reason
    assert check_command("grep -r x d d d", policy).allowed  # the budget starts again for each command
    d = check_command("grep -r x d d && grep -r x d d", policy)
    assert not d.allowed, "two list members are one command"


def test_paths_are_checked_once_each_and_bounded_per_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check, "_PATH_LIMIT", 50)
    policy = Policy.load(tmp_path)
    assert check_command("cat " + "a " * 3000, policy).allowed  # one path, named 3000 times
    assert check_command(" && ".join(["cat " + " ".join(f"n{i}" for i in range(40))] * 3), policy).allowed
    d = check_command("cat " + " ".join(f"n{i}" for i in range(60)), policy)
    assert not d.allowed and "more than 50 paths to check in one command" in d.reason


def test_a_redirection_is_checked_against_the_tree_at_open_time_not_the_cache(tmp_path: Path) -> None:
    """The per-command cache must not answer the check made when DAL opens a redirection: a symlink that
    appeared since the command was checked is seen there."""
    import os

    (tmp_path / "out").mkdir()
    policy = Policy.load(tmp_path)
    assert check_command("echo x > out/f", policy).allowed
    os.rename(tmp_path / "out", tmp_path / "out.old")
    os.symlink("/etc", tmp_path / "out")
    assert check.check_redirect_target("out/f", True, policy) is None
