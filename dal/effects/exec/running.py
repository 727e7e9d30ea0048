"""Check a command and run it: the static gate, then DAL's own executor (inside bubblewrap when it works)."""

from __future__ import annotations

import os
import time

import attrs

from dal.effects.classify.check import Decision, check_command
from dal.effects.context import EffectContext
from dal.effects.exec.executor import execute_plan
from dal.effects.result import EffectResult
from dal.effects.wall.sandbox import sandbox_status

__all__ = ["run_effect", "execute_checked", "wall_in_force"]

UNSANDBOXED_FLAG = "--unsandboxed-as-root"
# The operator may choose the wall's kind: bubblewrap, landlock (even where bubblewrap works), none (no
# wall, as where none can be had); unset or empty: bubblewrap where it starts.
WALL_ENV = "DAL_WALL"
WALL_KINDS = ("", "bubblewrap", "landlock", "none")


def run_effect(command: str, ctx: EffectContext) -> EffectResult:
    """Check `command` and run it if allowed. Denials, failures and timeouts are results, not exceptions."""
    started = time.perf_counter()
    decision = check_command(command, ctx.policy)
    if not decision.allowed:
        return _result(command, "denied", decision, started)
    if decision.approval_required:
        return _result(command, "pending_approval", decision, started)
    return execute_checked(command, decision, ctx, _started=started)


def wall_in_force(ctx: EffectContext) -> dict[str, str | None]:
    """How commands run under `ctx`, for the run receipt: {"wall": "bubblewrap" | "none", "reason": ...,
    "refused": why commands are refused instead, or None}. On a machine without a seccomp table the reason
    says that programs run without the set-user-ID filter."""
    how = _wall_in_force(ctx)
    from dal.effects.wall import seccomp

    note = seccomp.missing()
    if note is not None and how["refused"] is None:
        how["reason"] = f"{how['reason']}; {note}"
    return how


def _wall_in_force(ctx: EffectContext) -> dict[str, str | None]:
    if not ctx.use_sandbox and not ctx.require_sandbox:
        return {"wall": "none", "reason": "the wall was turned off by the caller (EffectContext(use_sandbox=False))",
                "refused": None}
    forced = os.environ.get(WALL_ENV, "")
    if forced not in WALL_KINDS:
        return {"wall": "none", "reason": f"{WALL_ENV}={forced!r}",
                "refused": f"{WALL_ENV} names no wall kind ({', '.join(k for k in WALL_KINDS if k)}), so none runs"}
    if forced == "none":
        return _no_wall(ctx, f"no wall: {WALL_ENV}=none", f"the operator turned the wall off ({WALL_ENV}=none)")
    available, why = sandbox_status() if forced != "landlock" else (False, f"{WALL_ENV}=landlock")
    if available:
        return {"wall": "bubblewrap", "reason": why, "refused": None}
    if forced == "landlock":  # not yet the fallback where bubblewrap cannot start: only when asked for
        from dal.effects.wall import landlock_wall

        no_landlock = landlock_wall.missing()
        if no_landlock is None:
            return {"wall": "landlock", "reason": f"Landlock ABI {landlock_wall.landlock.abi()} and seccomp ({why})",
                    "refused": None}
        why = f"{why}; no Landlock wall either: {no_landlock}"
    return _no_wall(ctx, why, why)


def _no_wall(ctx: EffectContext, why: str, unavailable: str) -> dict[str, str | None]:
    if ctx.require_sandbox:
        return {"wall": "none", "reason": why, "refused": f"sandbox required but unavailable: {unavailable}"}
    if os.geteuid() == 0 and not ctx.unsandboxed_as_root:
        return {"wall": "none", "reason": why,
                "refused": f"running as root without a working sandbox ({why}); commands would run with every "
                f"capability, so none runs unless the operator passes {UNSANDBOXED_FLAG}"}
    if os.geteuid() == 0:
        return {"wall": "none", "reason": f"{why}; running as root, allowed by {UNSANDBOXED_FLAG}", "refused": None}
    return {"wall": "none", "reason": why, "refused": None}


def execute_checked(
    command: str, decision: Decision, ctx: EffectContext, *, _started: float | None = None
) -> EffectResult:
    """Execute a command whose `decision` allowed it (for example once its approval was granted).

    The plan inside `decision` is what runs; `command` is only recorded. A denied decision is not run.
    """
    started = time.perf_counter() if _started is None else _started
    if not decision.allowed or decision.plan is None:
        return _result(command, "denied", decision, started)
    how = wall_in_force(ctx)
    if how["refused"]:
        return _result(command, "denied", attrs.evolve(decision, allowed=False, reason=how["refused"]), started)
    outcome = execute_plan(
        decision, ctx.policy, timeout=ctx.timeout, max_output=ctx.max_output, sandbox=how["wall"] != "none",
        cancel=ctx.cancel, kind=how["wall"] or "none",
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
