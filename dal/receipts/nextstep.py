"""What to do next about a run or a job: the one place that says it.

Every `next:` a person or an agent reads comes from here: `dal run`'s last line, `dal receipt show`, the
receipt files, `dal job show` and `dal jobs`' notes, the worker's log, the console and MCP. What is right
depends on who continues the run, so the caller says who (`Continuer`):

- a plain run (`dal run`, the API): the person resumes it, `dal resume RUN`;
- a queued job's run: a worker continues it once what it waits for is decided (a decision makes the job
  ready again), so nobody is sent to `dal resume`, and a job that failed goes again with `dal job retry`;
- an agent over MCP: it calls the `resume` tool; only a person decides what waits for one.

A run without a key is its own operation: running its script again is a new run that runs every effect
again, never "the same operation".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from dal.receipts.render import error_place, one_line, paths_of

# The reason of an effect held because the run that was executing it lost its key lock (dal/runner/effects.py).
LOST_LOCK = "which lost its key lock while executing it"


@attrs.frozen
class Continuer:
    """Who continues a run once what it waits for is settled: `job` (the id of the queue's job the run
    belongs to: a worker) and `front` ("cli": a person at the command line; "mcp": an agent's tools)."""

    # An int, never text: it is put into suggested commands unquoted.
    job: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.instance_of(int)))
    front: str = "cli"

    @classmethod
    def of_job(cls, job: Mapping[str, Any] | None) -> Continuer:
        """The continuer of a run that belongs to `job` (a queue row; None: not a job's)."""
        jid = (job or {}).get("job_id")
        return cls(job=jid if isinstance(jid, int) and not isinstance(jid, bool) else None)

    def resume(self, rid: str) -> str:
        """How the run `rid` goes on from its journal."""
        if self.job is not None:
            return f"a worker continues job {self.job} from its journal"
        if self.front == "mcp":
            return f"call `resume` with run {rid}"
        return f"`dal resume {rid}`"

    def once_decided(self, rid: str, joiner: str = " and ") -> str:
        """What follows a person's decision about what the run waits for, `joiner` first (a job's says
        itself: nobody continues it by hand)."""
        if self.job is not None:
            return f"; the decision makes job {self.job} ready again, and a worker continues it"
        return joiner + self.resume(rid)


def _q(text: str) -> str:
    from dal.core.shellword import sh_quote  # the one quoting of suggested commands

    return sh_quote(text)


def _rerun(receipt: Mapping[str, Any]) -> str:
    """The command that runs the script again: the run's own command line (`rerun`, from its spec: every
    flag it was started with), else one built from the script and key."""
    argv = receipt.get("rerun")
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        return " ".join(_q(a) for a in argv)
    script = _q((receipt.get("script") or {}).get("path", "SCRIPT"))
    key = receipt.get("key")
    return f"dal run --key {_q(key)} {script}" if key else f"dal run {script}"


def run_next(
    receipt: Mapping[str, Any], decisions: Sequence[Mapping[str, Any]] = (), continued_by: str | None = None,
    *, job: Mapping[str, Any] | None = None, by: Continuer | None = None,
) -> str:
    """The suggested next move about the run of `receipt`, as a concrete command or check (the `next:`
    line). `decisions`: the rows Store.approvals() holds for the run (once a person decided about the
    effect a waiting run stopped at, the next move is to continue it); `job`: the queue's job the run
    belongs to (a worker continues it); `by`: who continues it, when not the person at the command line."""
    by = by if by is not None else Continuer.of_job(job)
    rid = receipt["run_id"]
    status = receipt["status"]
    retry = receipt.get("retry")
    blocker = receipt.get("blocker")
    error = receipt.get("error") if isinstance(receipt.get("error"), Mapping) else None
    items = (receipt.get("effects") or {}).get("items") or []
    pending = [e for e in items if e.get("status") == "pending_approval"]
    # A read whose outcome is unknown is simply run again on resume: only other effects need a person.
    uncertain = [e for e in items if e.get("status") == "uncertain" and e.get("class") != "read"]

    continued_by = continued_by or receipt.get("continued_by")  # the store's link, or the receipt's own
    if continued_by:
        return f"nothing here: run {continued_by} continued this one (`dal receipt show {continued_by}`)"
    if status == "skipped":
        done = receipt.get("skipped_of")
        return f"nothing to do: the operation already completed in {done} (`dal receipt show {done}`)"
    held = (pending or uncertain)[-1:] if status == "waiting" else []
    decided = [d for d in decisions if held and d.get("seq") == held[0]["seq"]]
    if decided:
        d = decided[-1]
        said = f"effect {d['seq']} was {d.get('decision')} by {d.get('who')}"
        if by.job is not None:
            return f"nothing to do: {said}, so job {by.job} is ready again and a worker continues it"
        return f"{by.resume(rid)} ({said})"
    if pending and status in ("completed", "rejected"):
        # A completed run takes no decision and no resume (a REPL session that ended with an effect
        # held): naming `dal approve` here would send a person to a command that refuses.
        e = pending[-1]
        return (f"nothing to resume: `{e['command']}` was held for approval when the run ended ({status}) and "
                "never ran; run it again (a new run or session) to ask for approval again")
    if pending:
        e = pending[-1]
        who = "a person reviews" if by.front == "mcp" else "review"
        return (
            f"{who} `{e['command']}`, then `dal approve {rid} --effect {e['seq']}` "
            f"(or `dal deny {rid} --effect {e['seq']}`){by.once_decided(rid)}"
        )
    if uncertain and LOST_LOCK in str(uncertain[-1].get("reason") or ""):
        e = uncertain[-1]  # a run that lost its key lock may still be executing it
        return (
            f"make sure the run named in the blocker no longer executes `{e['command']}` (its host down or "
            f"restarted, its process ended); then, if it took effect, `dal resolve {rid} --effect {e['seq']} "
            f"--as done`, else `--as failed|retry --old-run-gone`{by.once_decided(rid, ', and ')}. Once that run "
            f"records its result, {by.resume(rid)} takes it"
        )
    if uncertain:
        e = uncertain[-1]
        return (
            f"check whether `{e['command']}` took effect, then "
            f"`dal resolve {rid} --effect {e['seq']} --as done|failed|retry`{by.once_decided(rid)}"
        )
    if retry == "none" or (retry is None and status == "completed"):
        return "nothing to do"
    # A failed or timed-out effect the journal replays (one that must not run twice, or a read that came
    # before one) fails the next attempt the same way: a person says to run it again.
    again = [e for e in items if e.get("replayed") and e.get("status") in ("failed", "timeout")]
    if status == "failed" and again and not (error is not None and error.get("kind") == "divergence"):
        e = again[-1]
        jid = by.job  # an int (Continuer checks it)
        then = f"; then `dal job retry {jid}`" if jid is not None else f" on {by.resume(rid)}"
        return (
            f"effect {e['seq']} (`{e['command']}`) {e['status'] if e['status'] == 'failed' else 'timed out'} in an "
            f"earlier attempt, and the journal replays that result: once its cause is fixed, "
            f"`dal resolve {rid} --effect {e['seq']} --as retry` runs it again{then}"
        )
    if retry == "resume":
        return by.resume(rid)
    if retry == "replay":
        if receipt.get("key"):
            return f"`{_rerun(receipt)}` (same operation, same key)"
        return f"`{_rerun(receipt)}` (a new run: without a key it is a new operation, and every effect runs again)"
    if retry == "escalate":
        why = blocker or "the outcome of an external effect is uncertain"
        return f"a person must decide: {why}"
    if retry == "repair":
        if error is not None:
            ran = "nothing ran; " if status == "rejected" else ""
            return (
                f"{ran}fix the script at {error_place(error)} "
                f"({error.get('kind')}: {one_line(error.get('message'))}),"
                f" then `{_rerun(receipt)}`"
            )
        target = ", ".join(paths_of(receipt)[:3]) or "the script"
        return f"repair {target}" + (f" ({blocker})" if blocker else "") + f", then `{_rerun(receipt)}`"
    # inspect, and anything unknown: look before acting.
    if error is not None and "diverg" in str(error.get("kind", "")).lower():
        return (
            f"inspect: the script no longer matches the journal at {error_place(error)} "
            f"({one_line(error.get('message'))}); see `dal receipt show {rid} --json`"
        )
    if error is not None and error.get("kind") == "internal":
        return (
            f"DAL itself failed ({one_line(error.get('message'))}); inspect the evidence and report the bug "
            f"with `dal receipt show {rid} --json`"
        )
    artifacts = receipt.get("artifacts") or []
    if status == "exhausted":
        why = f"{one_line(error.get('message'))} at {error_place(error)}" if error else "a budget ran out"
        named = re.search(r"\((--[a-z-]+)[ )]", (error or {}).get("message") or "")
        flag = named.group(1) if named else "--max-steps"
        look = ", ".join(_q(a["path"]) for a in artifacts[:3])
        return (
            f"inspect {look + ' and ' if look else ''}the evidence ({why}); if the work is legitimate, "
            f"`dal resume {rid} {flag} N` continues it from its journal with a bigger budget; else fix the loop, "
            f"then `{_rerun(receipt)}`"
        )
    if artifacts:
        shown = ", ".join(f"inspect {_q(a['path'])} ({a['state']})" for a in artifacts[:3])
        return shown + (f": {blocker}" if blocker else "")
    # Not "above": this line is also a worker's log line and a job's note, where nothing stands above it.
    return (f"inspect the run's receipt and effects (`dal receipt show {rid} --json`)"
            + (f": {blocker}" if blocker else ""))


def decided_job(job: Mapping[str, Any], seq: int) -> str:
    """Which run a decision about effect `seq` of `job`'s operation applies to: the job's next, which a
    worker starts (the decision made it ready again)."""
    jid = job.get("job_id")
    return (f"applies when job {jid} next reaches effect {seq}: the decision makes the job ready again, and a "
            f"worker continues it from its journal (`dal job show {jid}`)")


def job_next(job: Mapping[str, Any], receipt: Mapping[str, Any] | None, *, when: Any = str) -> str:
    """The next move about `job` (a queue row) whose last run ended with `receipt` (None: no run yet);
    `when` renders a time of the queue's clock."""
    state, jid = job["state"], job["job_id"]
    run = job.get("last_run_id")
    if state == "ready":
        return "waits for a worker (`dal worker`)"
    if state == "running":
        return f"run by worker {job.get('lease_owner')}, lease until {when(job.get('lease_until'))}"
    if state == "scheduled":
        return (f"runs at {when(job.get('run_at'))} (attempt {int(job.get('failures') or 0) + 1} of "
                f"{job.get('max_attempts')})")
    if state == "waiting":
        what = (run_next(receipt, job=job) if receipt
                else f"a person decides (`dal receipt show {run}`); the decision makes job {jid} ready again")
        return f"{what} (or `dal job retry {jid}`)"
    if state in ("parked", "dead"):
        return (f"inspect `dal receipt show {run}`" if run else "read the note above") + \
            f", fix what it names, then `dal job retry {jid}`"
    return "nothing to do"
