"""A cancel request stops a running command (its whole pipeline) promptly and says so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dal.effects import EffectCancelled, EffectContext, Policy, check_command, execute_checked


@pytest.mark.parametrize("sandbox", [False, True])
def test_cancel_kills_the_pipeline(tmp_path: Path, sandbox: bool) -> None:
    policy = Policy.load(tmp_path)
    command = "sleep 30 | cat && touch after"
    decision = check_command(command, policy)
    assert decision.allowed, decision.reason
    started = time.monotonic()
    ctx = EffectContext(policy=policy, timeout=60, use_sandbox=sandbox,
                        cancel=lambda: time.monotonic() - started > 0.3)
    with pytest.raises(EffectCancelled):
        execute_checked(command, decision, ctx)
    assert time.monotonic() - started < 5
    assert not (tmp_path / "after").exists()


def test_no_cancel_request_runs_to_the_end(tmp_path: Path) -> None:
    policy = Policy.load(tmp_path)
    decision = check_command("echo hi", policy)
    result = execute_checked("echo hi", decision, EffectContext(policy=policy, cancel=lambda: False))
    assert result.ok and result.stdout == "hi\n"


@pytest.mark.parametrize("sandbox", [False, True])
def test_cancel_stops_a_command_that_closed_its_output_and_keeps_running(tmp_path: Path, sandbox: bool) -> None:
    # Its output pipes reach end of file at once; DAL then waits for the process itself to exit.
    policy = Policy.load(tmp_path)
    command = "sleep 30 > /dev/null 2>&1"
    decision = check_command(command, policy)
    started = time.monotonic()
    ctx = EffectContext(policy=policy, timeout=60, use_sandbox=sandbox,
                        cancel=lambda: time.monotonic() - started > 0.3)
    with pytest.raises(EffectCancelled):
        execute_checked(command, decision, ctx)
    assert time.monotonic() - started < 5


def test_timeout_stops_a_command_that_closed_its_output_and_keeps_running(tmp_path: Path) -> None:
    policy = Policy.load(tmp_path)
    command = "sleep 30 > /dev/null 2>&1"
    started = time.monotonic()
    result = execute_checked(command, check_command(command, policy), EffectContext(policy=policy, timeout=0.5))
    assert result.status == "timeout" and str(result) == "command timed out after 0.5s"
    assert time.monotonic() - started < 3


def test_a_fast_command_that_exits_after_closing_its_output_is_reaped_with_its_status(tmp_path: Path) -> None:
    policy = Policy.load(tmp_path)
    command = "sleep 0.3 > /dev/null && false"
    result = execute_checked(command, check_command(command, policy), EffectContext(policy=policy, timeout=10))
    assert result.status == "failed" and result.code == 1
