"""Where a finished run sends its job: by the receipt's retry class (docs/workers.md, "Routing").

| the run | event | the job |
|---|---|---|
| retry `none` (completed; skipped: the key had completed) | done | done |
| retry `resume` after SIGTERM, SIGINT or SIGHUP (a worker draining) | drain | ready, nothing counted |
| retry `resume` (interrupted), or its process died | resume | ready; RESUME_BURST in a row: backoff |
| the store refused as the run began or ran (disk full, read-only, locked) | backoff | scheduled (backoff), no failure |
| retry `replay`, or `resume` of a failed run (fail()) | backoff / dead | scheduled (backoff); dead after max attempts |
| retry `inspect` or `repair` (failed, exhausted, rejected) | park | parked until `dal job retry` |
| retry `escalate` (an approval, an uncertain effect, the script's own) | wait | waiting until a decision exists |
| the key is busy (another process runs it) | backoff | scheduled after one backoff step |
| the run could not start (no script, unreadable spec, a policy file) | park | parked, the reason in its note |

A worker never decides for a person: nothing here approves, denies or resolves.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

RESUME_BURST = 3  # immediate resumes in a row before a crash loop backs off
BACKOFF_CAP = 3600.0  # seconds: the longest wait between two attempts


class Route(NamedTuple):
    event: str  # a key of dal.receipts.jobs.TRANSITIONS
    run_at: float | None = None
    failures: int | None = None
    streak: int | None = None
    note: str | None = None
    waits_on: tuple[int, ...] = ()


def backoff(base: float, n: int, rng: random.Random | None = None) -> float:
    """Seconds before attempt n+1 after n failures: base * 2**(n-1), capped, with equal jitter (half of it
    fixed, half random), so that jobs that failed together do not all come back together."""
    d = min(BACKOFF_CAP, base * (2 ** max(0, n - 1)))
    return d / 2 + (rng or random).uniform(0, d / 2)


def _resume(job: dict[str, Any], now: float, base: float, note: str) -> Route:
    streak = int(job.get("streak") or 0) + 1
    if streak <= RESUME_BURST:
        return Route("resume", run_at=now, streak=streak, note=note)
    wait = backoff(base, streak - RESUME_BURST)
    return Route("backoff", run_at=now + wait, streak=streak,
                 note=f"{note}; {streak} resumes in a row: the next in {wait:.1f} s")


def for_store_fault(what: str, job: dict[str, Any], now: float, base: float) -> Route:
    """The route of a run the store refused as it began or while it ran (a disk full for a few seconds, a
    read-only moment, a lock held past the busy timeout): nothing past the refusal ran, and the next run
    continues from the journal. Back to ready after a backoff that grows with the refusals (and resumes)
    in a row, as the worker's own loop waits out a refusing store; never parked, and not a failed attempt
    (--max-attempts does not count it): the store, not the script, was at fault."""
    streak = int(job.get("streak") or 0) + 1
    wait = backoff(base, streak)
    return Route("backoff", run_at=now + wait, streak=streak,
                 note=f"{what}; the run store refused, so it is tried again in {wait:.1f} s ({streak} in a row)")


def for_receipt(receipt: dict[str, Any], job: dict[str, Any], now: float, base: float, *,
                signal_name: str | None = None, store_problem: str | None = None,
                store_fault: str | None = None) -> Route:
    """The route of a run that ended with `receipt` (stored, or only in its files: `store_problem`);
    `store_fault`: the store's refusal that stopped it (its error of kind `store`)."""
    retry, status = receipt.get("retry"), receipt.get("status")
    what = f"run {receipt.get('run_id')} {status}"
    if store_problem:
        return for_store_fault(f"{what}, but the store did not record its end ({store_problem})", job, now, base)
    if store_fault:
        if status == "interrupted":
            return for_store_fault(f"{what}: {store_fault}", job, now, base)
        what = f"{what}: {store_fault}"
    if retry == "none":
        return Route("done", note=what, streak=0)
    if retry == "resume" and status in ("interrupted", "waiting"):
        if status == "interrupted" and signal_name in ("SIGTERM", "SIGINT", "SIGHUP"):
            return Route("drain", run_at=now, note=f"{what} ({signal_name}): ready again")
        return _resume(job, now, base, what)
    if retry in ("replay", "resume"):
        # Only an interruption is not a failure. A run that failed and asks for `resume` (the script's own
        # fail({"retry": "resume"})) is a failed attempt like a replay: --max-attempts binds whatever the
        # script says.
        failures = int(job.get("failures") or 0) + 1
        if failures >= int(job.get("max_attempts") or 1):
            return Route("dead", failures=failures, streak=0,
                         note=f"{what}, retry {retry}: {failures} of {job.get('max_attempts')} attempts failed")
        wait = backoff(base, failures)
        return Route("backoff", run_at=now + wait, failures=failures, streak=0,
                     note=f"{what}, retry {retry}: attempt {failures + 1} of {job.get('max_attempts')} in {wait:.1f} s")
    from dal.receipts.nextstep import run_next  # what a person reads in `dal jobs`

    if retry == "escalate":
        held = tuple(int(i["seq"]) for i in (receipt.get("effects") or {}).get("items") or []
                     if i.get("status") in ("pending_approval", "uncertain"))
        return Route("wait", streak=0, waits_on=held, note=f"{what}: {run_next(receipt, job=job)}")
    return Route("park", streak=0, note=f"{what}, retry {retry}: {run_next(receipt, job=job)}")


def for_runner_error(message: str, exit_code: int, job: dict[str, Any], now: float, base: float, *,
                     store_fault: bool = False) -> Route:
    """The route of a run that did not start (RunnerError); `store_fault`: because the store refused."""
    message = message.rstrip().rstrip(".")  # a clause of the note: the log line goes on after it
    if exit_code == 3:  # the key is busy: someone else runs the operation right now
        wait = backoff(base, 1)
        return Route("backoff", run_at=now + wait, note=f"{message}; again in {wait:.1f} s")
    if store_fault:
        return for_store_fault(f"the run could not start: {message}", job, now, base)
    return Route("park", streak=0, note=f"the run could not start: {message}")


def for_crash(job: dict[str, Any], how: str, now: float, base: float) -> Route:
    """The route of a job whose process died before it routed it (kill -9, a crash of DAL itself)."""
    return _resume(job, now, base, f"the process running it {how}; the next run continues from its journal")
