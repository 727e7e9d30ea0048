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
