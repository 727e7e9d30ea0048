"""Check a command and run it: the static gate, then DAL's own executor (inside bubblewrap when it works)."""

from __future__ import annotations

import time

import attrs

from dal.effects.check import Decision, check_command
from dal.effects.context import EffectContext
from dal.effects.executor import execute_plan
from dal.effects.result import EffectResult
from dal.effects.sandbox import sandbox_status


def run_effect(command: str, ctx: EffectContext) -> EffectResult:
    """Check `command` and run it if allowed. Denials, failures and timeouts are results, not exceptions."""
    started = time.perf_counter()
    decision = check_command(command, ctx.policy)
    if not decision.allowed:
        return _result(command, "denied", decision, started)
    if decision.approval_required:
        return _result(command, "pending_approval", decision, started)
    return execute_checked(command, decision, ctx, _started=started)


def execute_checked(
    command: str, decision: Decision, ctx: EffectContext, *, _started: float | None = None
) -> EffectResult:
    """Execute a command whose `decision` allowed it (for example once its approval was granted).

    The plan inside `decision` is what runs; `command` is only recorded. A denied decision is not run.
    """
    started = time.perf_counter() if _started is None else _started
    if not decision.allowed or decision.plan is None:
        return _result(command, "denied", decision, started)
    sandbox = False
    if ctx.use_sandbox or ctx.require_sandbox:
        available, why = sandbox_status()
        if available:
            sandbox = True
        elif ctx.require_sandbox:
            blocked = attrs.evolve(decision, allowed=False, reason=f"sandbox required but unavailable: {why}")
            return _result(command, "denied", blocked, started)
    outcome = execute_plan(
        decision, ctx.policy, timeout=ctx.timeout, max_output=ctx.max_output, sandbox=sandbox, cancel=ctx.cancel
    )
    return EffectResult(
        command=command,
        status=outcome.status,
        code=outcome.code,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        decision=decision,
        duration_ms=(time.perf_counter() - started) * 1000,
        stdout_truncated=outcome.stdout_truncated,
        stderr_truncated=outcome.stderr_truncated,
        timeout_s=ctx.timeout,
    )


def _result(command: str, status: str, decision: Decision, started: float) -> EffectResult:
    return EffectResult(
        command=command,
        status=status,
        code=None,
        stdout="",
        stderr="",
        decision=decision,
        duration_ms=(time.perf_counter() - started) * 1000,
    )
