"""Check a command and run it: the static gate, then DAL's own executor, inside the wall in force (kind.py)."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
    return execute_checked(command, decision, ctx, _started=started,
                           recheck=lambda: check_command(command, ctx.policy))


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
    on_start: Callable[[], None] | None = None, recheck: Callable[[], Decision] | None = None,
) -> EffectResult:
    """Execute a command whose `decision` allowed it (for example once its approval was granted).

    The plan inside `decision` is what runs; `command` is only recorded. A denied decision is not run.
    `on_start` is called once before any of the command's programs may start: inside bubblewrap at the
    wall's release point, once every stage's sandbox is set up (executor._release); not at all when none
    started (denied, refused, or the wall did not come up). What it raises stops the command unstarted.
    `recheck` checks the command again; without a wall it is called under the roots' locks, and the command
    runs only if it gives the same plan (see below).
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
    if kind.name != "none" or recheck is None:
        return _execute(command, decision, ctx, kind.name, started, on_start)
    # Without a wall the check is the only barrier, and it read names another DAL process in the same roots
    # may change before this program opens them (a file swapped for a symlink to dal.toml). So every unwalled
    # command holds its roots' locks from a second check to its end, and runs only if that check, made while
    # no other DAL command can change the roots, gives the same plan.
    with _roots_held(ctx.policy):
        again = walled_only(recheck(), ctx)
        if not again.allowed or again.plan != decision.plan:
            why = again.reason if not again.allowed else "it would now run another command"
            return _result(command, "denied", attrs.evolve(
                decision, allowed=False,
                reason=f"the workspace changed between the command's check and its start: {why}"), started)
        return _execute(command, decision, ctx, kind.name, started, on_start)


@contextmanager
def _roots_held(policy: object) -> Iterator[None]:
    """An exclusive flock on the workspace and each write root (folders, in one order, so that two DAL
    processes never wait on each other crosswise); a root that cannot be opened is passed over."""
    roots = sorted({str(getattr(policy, "workspace", "")), *getattr(policy, "write_roots", ())} - {""})
    fds: list[int] = []
    try:
        for root in roots:
            try:
                fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in fds:
            os.close(fd)  # closing the descriptor releases its lock


def _execute(command: str, decision: Decision, ctx: EffectContext, kind: str, started: float,
             on_start: Callable[[], None] | None) -> EffectResult:
    outcome = execute_plan(
        decision, ctx.policy, timeout=ctx.timeout, max_output=ctx.max_output, sandbox=kind != "none",
        cancel=ctx.cancel, kind=kind, on_start=on_start,
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
        wall=kind,
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
