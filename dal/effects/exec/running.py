"""Check a command and run it: the static gate, then DAL's own executor, inside the wall in force (kind.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from dal.effects.classify.check import Decision, check_command
from dal.effects.context import EffectContext
from dal.effects.exec.executor import execute_plan
from dal.effects.result import EffectResult
from dal.effects.wall.kind import UNSANDBOXED_FLAG, wall_kind, walled_only

__all__ = ["run_effect", "execute_checked", "wall_in_force", "UNSANDBOXED_FLAG"]


def run_effect(command: str, ctx: EffectContext) -> EffectResult:
    """Check `command` and run it if allowed. Denials, failures and timeouts are results, not exceptions."""
    started = time.perf_counter()
    # without a wall, a program beyond the default toolset is denied before anyone is asked to approve it
    decision = walled_only(check_command(command, ctx.policy), ctx)
    if not decision.allowed:
        return _result(command, "denied", decision, started)
    if decision.approval_required:
        return _result(command, "pending_approval", decision, started)
    return execute_checked(command, decision, ctx, _started=started)


def wall_in_force(ctx: EffectContext) -> dict[str, str | None]:
    """How commands run under `ctx`, for the run receipt: {"wall": "bubblewrap" | "landlock" | "none", "reason": ...,
    "refused": why commands are refused instead, or None}. On a machine without a seccomp table the reason
    says that programs run without the set-user-ID filter."""
    how = _wall_in_force(ctx)
    from dal.effects.wall import seccomp

    note = seccomp.missing()
    if note is not None and how["refused"] is None:
        how["reason"] = f"{how['reason']}; {note}"
    return how


def _wall_in_force(ctx: EffectContext) -> dict[str, str | None]:
    kind = wall_kind(ctx)
    return {"wall": kind.name, "reason": kind.reason, "refused": kind.refused}


def execute_checked(
    command: str, decision: Decision, ctx: EffectContext, *, _started: float | None = None,
    on_start: Callable[[], None] | None = None,
) -> EffectResult:
    """Execute a command whose `decision` allowed it (for example once its approval was granted).

    The plan inside `decision` is what runs; `command` is only recorded. A denied decision is not run.
    `on_start` is called once before any of the command's programs may start: inside bubblewrap at the
    wall's release point, once every stage's sandbox is set up (executor._release); not at all when none
    started (denied, refused, or the wall did not come up). What it raises stops the command unstarted.
    """
    started = time.perf_counter() if _started is None else _started
    if not decision.allowed or decision.plan is None:
        return _result(command, "denied", decision, started)
    kind = wall_kind(ctx)
    if kind.refused:
        return _result(command, "denied", attrs.evolve(decision, allowed=False, reason=kind.refused), started)
    unwalled = walled_only(decision, ctx)
    if not unwalled.allowed:
        return _result(command, "denied", unwalled, started)
    outcome = execute_plan(
        decision, ctx.policy, timeout=ctx.timeout, max_output=ctx.max_output, sandbox=kind.name != "none",
        cancel=ctx.cancel, kind=kind.name, on_start=on_start,
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
        limit=outcome.limit,
        wall=kind.name,
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
