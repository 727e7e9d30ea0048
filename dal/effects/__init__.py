"""Shell effects for `run()`: a deny-by-default policy, DAL's own executor, and bubblewrap as a second wall.

    policy = Policy.load(workspace)
    decision = check_command("ls -l docs", policy)     # static gate, never raises
    result = run_effect("ls -l docs", EffectContext(policy=policy))

A denied command never executes. A command needing approval is not executed by `run_effect` either: it
returns status "pending_approval", and `execute_checked` runs it once approved.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from dal.effects.check import Decision, check_command
from dal.effects.executor import EffectCancelled, execute_plan
from dal.effects.policy import EFFECT_CLASSES, TRUSTED_PATH, Policy, PolicyError
from dal.effects.result import EffectResult
from dal.effects.sandbox import sandbox_status

__all__ = [
    "Decision",
    "EFFECT_CLASSES",
    "EffectCancelled",
    "EffectContext",
    "EffectResult",
    "Policy",
    "PolicyError",
    "TRUSTED_PATH",
    "check_command",
    "execute_checked",
    "run_effect",
    "sandbox_status",
]


@attrs.frozen
class EffectContext:
    """How to run effects: the policy and the limits.

    `use_sandbox` wraps programs in bubblewrap when it works; `require_sandbox` turns its absence into a
    denied result (status "denied", reason naming why bubblewrap is unavailable) instead of running unwalled.
    """

    policy: Policy
    timeout: float = 30.0
    max_output: int = 1 << 20
    require_sandbox: bool = False
    use_sandbox: bool = True
    # Polled while a command runs: when it returns True (Ctrl-C, SIGTERM) the command's process group is
    # killed and execute_checked raises EffectCancelled, leaving the effect's outcome unknown.
    cancel: Callable[[], bool] | None = attrs.field(default=None, eq=False)


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
