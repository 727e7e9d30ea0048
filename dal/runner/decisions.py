"""A person's decisions about a waiting run, and how to continue it: shared by the CLI (`dal approve`,
`dal deny`, `dal resolve`, `dal resume`) and the Python API (`dal.approve`, ...).

RUN is what `dal receipt show` accepts: a run id, a unique prefix of one, an operation key (its newest
run) or `latest`. The effect defaults to the one the run waits on.
"""

from __future__ import annotations

from typing import Any

import attrs

from dal.receipts.store import Store
from dal.runner import journal
from dal.runner.effects import Prior, rerunnable

DECISIONS = ("approved", "denied", "resolved:done", "resolved:failed", "resolved:retry")


class DecisionRefused(Exception):
    """The decision cannot be recorded; the message names the run or effect and what to do instead."""


@attrs.frozen
class Decided:
    row: dict[str, Any]  # the stored decision: run_id, seq, decision, who, at, note
    command: str  # the effect's command
    replaced: dict[str, Any] | None  # an earlier decision on the same effect, now superseded
    applies: str = ""  # which run the decision applies to: one that is resuming now, or the next resume


_LABELS = {"pending_approval": "waiting for approval", "uncertain": "of unknown outcome"}


def _state(p: Prior, live_run: str | None) -> str:
    """Where effect `p` of an operation's journal stands: its result's status, pending_approval,
    uncertain (a person must say what happened), rerun (of unknown outcome, but a resume simply runs it
    again) or running (the live run of the operation is executing it now)."""
    if p.result is not None:
        return str(p.result.get("status") or "completed")
    if p.pending:
        return "pending_approval"
    if live_run is not None and p.origin == live_run and not p.detail.get("uncertain"):
        return "running"
    if rerunnable(p.effect_class, p.idempotent):
        return "rerun"
    return "uncertain"


def held_effect(store: Store, run: dict[str, Any], effect: int | None, want: str, named: str | None = None) -> Prior:
    """The effect of `run`'s operation that a decision of kind `want` (pending_approval | uncertain) is
    about, read from the operation's journal (every attempt's). `run` is the operation's newest run,
    `named` the run the person named, when another."""
    from dal.runner.runner import run_alive

    rid = run["run_id"]
    if run["status"] in ("completed", "skipped", "rejected"):
        done = run.get("skipped_of") or rid
        if named and named != rid:
            raise DecisionRefused(f"run {named} was already continued by run {rid} ({run['status']}): "
                                  + (f"its operation completed in {done}, " if run["status"] != "rejected" else "")
                                  + "nothing waits for a decision")
        raise DecisionRefused(f"run {rid} is {run['status']}, not waiting for a decision")
    live = run["status"] == "running" and run_alive(run)
    effects = {seq: p for seq, p in journal.load(store, rid).entries.items() if seq > 0}
    states = {seq: _state(p, rid if live else None) for seq, p in effects.items()}
    what = _LABELS[want]
    if effect is None:
        held = [seq for seq in sorted(effects) if states[seq] in _LABELS]
        if not held:
            raise DecisionRefused(f"run {rid} is {run['status']} but no effect of it is {what}")
        seq = held[-1]
    else:
        if effect not in effects:
            n = len(effects)
            raise DecisionRefused(f"run {rid} has no effect {effect} (it recorded {n} effect{'s' if n != 1 else ''})")
        seq = effect
    item, state = effects[seq], states[seq]
    if state != want:
        hint = ""
        if state == "uncertain":
            hint = f"; use `dal resolve {rid} --effect {seq} --as done|failed|retry`"
        elif state == "pending_approval":
            hint = f"; use `dal approve {rid} --effect {seq}` or `dal deny`"
        elif state == "running":
            hint = f" in run {rid} right now"
        elif state == "rerun":
            hint = " but safe to run again: resuming runs it again, no decision needed"
        label = {"rerun": "of unknown outcome"}.get(state, _LABELS.get(state, state))
        raise DecisionRefused(f"effect {seq} of run {rid} (`{item.command}`) is not {what}: it is {label}{hint}")
    return item


def decide(
    store: Store, ref: str, decision: str, *, effect: int | None = None, note: str | None = None,
    who: str | None = None,
) -> Decided:
    """Record `decision` (one of DECISIONS) about the effect the operation of run `ref` waits on. Raises
    DecisionRefused.

    Decisions belong to the operation's effect, not to one attempt: whichever run of the operation `ref`
    names, the decision is recorded for the operation's newest run, and the first attempt that reaches the
    effect after it uses it, once (a run resuming right now, if it has not passed the effect yet; else the
    next resume). `Decided.applies` says which."""
    from dal.runner.runner import find_run

    if decision not in DECISIONS:
        raise DecisionRefused(f"unknown decision {decision!r}: one of {', '.join(DECISIONS)}")
    want = "uncertain" if decision.startswith("resolved:") else "pending_approval"
    named = find_run(store, ref)
    newest = journal.newest_of(store, named)
    item = held_effect(store, newest, effect, want, named.get("run_id"))
    rid, seq = newest["run_id"], item.seq
    group = [d for d in DECISIONS if d.startswith("resolved:") == (want == "uncertain")]
    earlier = [r for r in journal.load(store, rid).decisions.get(seq, []) if r.get("decision") in group]
    row = store.record_approval(rid, seq, decision, who=who, note=note)
    _wake_job(store, newest)
    return Decided(row, item.command, earlier[-1] if earlier else None, _applies(store, newest, seq))


def _wake_job(store: Store, run: dict[str, Any]) -> None:
    """The job of the operation, waiting for this decision, is ready again (docs/workers.md). A store that
    refuses is not the decision's failure: it stands, and the workers' sweep wakes the job later."""
    from dal.receipts.store import StoreError

    if run.get("key") and not store.readonly:
        from dal.receipts.jobs import JobQueue

        try:
            JobQueue.of(store).wake_key(run["key"])
        except StoreError:
            pass


def _applies(store: Store, decided_on: dict[str, Any], seq: int) -> str:
    """Which run a decision just recorded about effect `seq` applies to. Read after the decision was
    committed: a run that looks for a decision at the effect and journals its hold in one transaction
    (Store.journal_hold) either saw this decision, or shows its hold here."""
    from dal.runner.runner import run_alive

    newest = journal.newest_of(store, store.run_row(decided_on["run_id"]) or decided_on)
    nid = newest["run_id"]
    if newest.get("status") == "running" and run_alive(newest):
        mine = [e for e in store.journal(nid) if e["seq"] == seq]
        detail = (mine[-1]["detail"] or {}) if mine else {}
        if mine and mine[-1]["result"] is None and (detail.get("pending") or detail.get("uncertain")):
            return (f"applies when you resume: run {nid}, resuming now, reached effect {seq} before this "
                    f"decision and stops there; then `dal resume {nid}`")
        return f"applies to run {nid}, which is resuming now"
    return f"applies when you resume: `dal resume {nid}`"
