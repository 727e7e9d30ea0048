"""A person's decisions about a waiting run, and how to continue it: shared by the CLI (`dal approve`,
`dal deny`, `dal resolve`, `dal resume`) and the Python API (`dal.approve`, ...).

RUN is what `dal receipt show` accepts: a run id, a unique prefix of one, an operation key (its newest
run) or `latest`. The effect defaults to the one the run waits on.
"""

from __future__ import annotations

from typing import Any

import attrs

from dal.receipts.contract import RunStore
from dal.runner import journal
from dal.runner.journal import Prior, rerunnable

DECISIONS = ("approved", "denied", "resolved:done", "resolved:failed", "resolved:retry")


class DecisionRefused(Exception):
    """The decision cannot be recorded; the message names the run or effect and what to do instead."""


@attrs.frozen
class Decided:
    row: dict[str, Any]  # the stored decision: run_id, seq, decision, who, at, note
    command: str  # the effect's command
    replaced: dict[str, Any] | None  # an earlier decision on the same effect, now superseded
    applies: str = ""  # which run the decision applies to: one that is resuming now, or the next resume
    script: str | None = None  # the script of the run decided about (absolute), so the person sees whose it is


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


def held_effect(store: RunStore, run: dict[str, Any], effect: int | None, want: str, named: str | None = None,
                decision: str = "") -> Prior:
    """The effect of `run`'s operation that a decision of kind `want` (pending_approval | uncertain) is
    about, read from the operation's journal (every attempt's). `run` is the operation's newest run,
    `named` the run the person named, when another. `decision` `resolved:retry` may also be about an
    effect that failed or timed out: a person may say to run it again once its cause is fixed."""
    from dal.runner.liveness import run_alive

    rid = run["run_id"]
    if run["status"] in ("completed", "skipped", "rejected"):
        done = run.get("skipped_of") or rid
        if named and named != rid:
            raise DecisionRefused(f"run {named} was already continued by run {rid} ({run['status']}): "
                                  + (f"its operation completed in {done}, " if run["status"] != "rejected" else "")
                                  + "nothing waits for a decision")
        raise DecisionRefused(f"run {rid} is {run['status']}, not waiting for a decision")
    live = run["status"] == "running" and run_alive(run, store)
    # A run marked running whose process is gone is `died`, as the list and `receipt show` say.
    status = "died" if run["status"] == "running" and not live else run["status"]
    effects = {seq: p for seq, p in journal.load(store, rid).entries.items() if seq > 0}
    states = {seq: _state(p, rid if live else None) for seq, p in effects.items()}
    what = _LABELS[want]
    accepted = {want} | ({"failed", "timeout"} if decision == "resolved:retry" else set())
    running = [seq for seq in sorted(effects) if states[seq] == "running"]
    if running and effect in (None, running[-1]):
        seq = running[-1]
        raise DecisionRefused(f"too late: run {rid} is executing effect {seq} (`{effects[seq].command}`) right now"
                              " (it acted on the decision before this one); nothing was recorded")
    if effect is None:
        held = [seq for seq in sorted(effects) if states[seq] in _LABELS]
        if not held:
            if status == "died":
                raise DecisionRefused(f"run {rid} died (its process is gone) and no effect of it is {what}; "
                                      f"`dal resume {rid}` continues it")
            raise DecisionRefused(f"run {rid} is {status} but no effect of it is {what}")
        seq = held[-1]
    else:
        if effect not in effects:
            n = len(effects)
            raise DecisionRefused(f"run {rid} has no effect {effect} (it recorded {n} effect{'s' if n != 1 else ''})")
        seq = effect
    item, state = effects[seq], states[seq]
    if state not in accepted:
        hint = ""
        if state == "uncertain":
            hint = f"; use `dal resolve {rid} --effect {seq} --as done|failed|retry`"
        elif state == "pending_approval":
            hint = f"; use `dal approve {rid} --effect {seq}` or `dal deny`"
        elif state == "running":
            hint = f" in run {rid} right now"
        elif state == "rerun":
            hint = " but safe to run again: resuming runs it again, no decision needed"
        elif state in ("failed", "timeout") and want == "uncertain":
            hint = f"; to run it again once its cause is fixed: `dal resolve {rid} --effect {seq} --as retry`"
        label = {"rerun": "of unknown outcome"}.get(state, _LABELS.get(state, state))
        raise DecisionRefused(f"effect {seq} of run {rid} (`{item.command}`) is not {what}: it is {label}{hint}")
    return item


def _shown(store: RunStore, run_id: str) -> dict[int, tuple[str, str]]:
    """What run `run_id` showed a person: seq -> (command, status) of each effect its receipt lists (or,
    for a run with no receipt, its own journal)."""
    receipt = store.get_run(run_id)
    if receipt is not None:
        return {i["seq"]: (i["command"], i["status"]) for i in (receipt.get("effects") or {}).get("items") or []}
    out = {}
    for row in store.journal(run_id):
        detail = row.get("detail") or {}
        status = (row.get("result") or {}).get("status") or (
            "pending_approval" if detail.get("pending") else "uncertain")
        out[row["seq"]] = (row["command"], status)
    return out


def decide(
    store: RunStore, ref: str, decision: str, *, effect: int | None = None, note: str | None = None,
    who: str | None = None, old_run_gone: bool = False,
) -> Decided:
    """Record `decision` (one of DECISIONS) about the effect the operation of run `ref` waits on. Raises
    DecisionRefused.

    Decisions belong to the operation's effect, not to one attempt: the decision is recorded for the
    operation's newest run, and the first attempt that reaches the effect after it uses it, once (a run
    resuming right now, if it has not passed the effect yet; else the next resume). `Decided.applies` says
    which. A decision is bound to what the person was shown: the command (it applies to no other command
    at that number), and, when `ref` names a run, that run's journal — a run of an attempt the operation
    started over since (`--new-attempt`) is refused, and so is an effect other than the one the named run
    showed (its own held effect by default).

    An effect that a run which lost its key lock was executing (its hold names it: `lost_lock`) may still be
    under way in that run: `resolved:retry` and `resolved:failed` (after which the script may run it again
    itself) are refused unless the person says that run is gone (`old_run_gone`, `--old-run-gone`)."""
    from dal.receipts.store import DecisionTooLate
    from dal.runner.liveness import run_alive

    if decision not in DECISIONS:
        raise DecisionRefused(f"unknown decision {decision!r}: one of {', '.join(DECISIONS)}")
    want = "uncertain" if decision.startswith("resolved:") else "pending_approval"
    named = store.find_run(ref)
    newest = journal.newest_of(store, named)
    rid, nid = named.get("run_id"), newest["run_id"]
    if rid != nid and ref.strip().startswith("run_") and newest["status"] not in ("completed", "skipped", "rejected"):
        effect = _as_shown(store, named, newest, effect)
    item = held_effect(store, newest, effect, want, rid, decision)
    seq = item.seq
    lost = item.detail.get("lost_lock") if item.result is None else None
    if isinstance(lost, dict) and decision in ("resolved:retry", "resolved:failed") and not old_run_gone:
        raise DecisionRefused(_lost_refusal(item, lost, ref, decision))
    group = [d for d in DECISIONS if d.startswith("resolved:") == (want == "uncertain")]
    earlier = [r for r in journal.load(store, nid).decisions.get(seq, []) if r.get("decision") in group]
    live = newest.get("status") == "running" and run_alive(newest, store)
    try:
        row = store.record_approval(nid, seq, decision, who=who, note=note, command=item.command,
                                    unless_acted_by=nid if live else None)
    except DecisionTooLate as e:
        raise DecisionRefused(
            f"too late: {e}, so this decision about effect {seq} (`{item.command}`) was not recorded; "
            f"see `dal receipt show {nid}` once it ends") from None
    _wake_job(store, newest)
    return Decided(row, item.command, earlier[-1] if earlier else None, _applies(store, newest, seq),
                   _script_as_given(store.run_row(nid) or newest))


def _script_as_given(row: dict[str, Any]) -> str | None:
    """The script of the run in `row` as the operator named it (absolute): a job's or a schedule's run runs
    a kept copy of the text it was submitted with (.dal/scripts/sha256-....dal), never the name to show."""
    import os

    from dal.receipts.queries import script_of

    spec = (row.get("policy") or {}).get("spec")
    named, cwd = (spec.get("filename"), spec.get("cwd")) if isinstance(spec, dict) else (None, None)
    if isinstance(named, str) and named:
        return os.path.join(cwd, named) if isinstance(cwd, str) and cwd and not os.path.isabs(named) else named
    return script_of(row)


def open_job(store: RunStore, key: str | None) -> dict[str, Any] | None:
    """The queue's open job of operation `key` (a worker continues its runs), or None."""
    from dal.receipts.store import StoreError

    if not key:
        return None
    try:
        return store.jobs().open_job(key)
    except StoreError:
        return None


def _lost_refusal(item: Prior, lost: dict[str, Any], ref: str, decision: str) -> str:
    """Why `decision` about an effect a run that lost its key lock was executing needs the person's word that
    that run is gone (a frozen host thaws and finishes it; a retry now makes it twice)."""
    from dal.core.shellword import sh_quote

    outcome, seq = decision.split(":", 1)[1], item.seq
    host, pid, old = lost.get("host"), lost.get("pid"), lost.get("run_id")
    return (
        f"effect {item.seq} (`{item.command}`) was being executed by run {old} on host {host} (process {pid}) "
        "when that run lost its key lock, and that run may still be executing it: "
        + ("running it again now could make it happen twice" if outcome == "retry"
           else "the script may run it again on a failed result")
        + f"; nothing was recorded. Make sure host {host} is down or has restarted, or process {pid} there has "
        f"ended, or that run has recorded its result (`dal receipt show {sh_quote(old)}`; a resume then takes it), "
        f"then say so: `dal resolve {sh_quote(ref)} --effect {seq} --as {sh_quote(outcome)} --old-run-gone`. If it "
        "took effect, `--as done` needs no such word"
    )


def _wake_job(store: RunStore, run: dict[str, Any]) -> None:
    """The job of the operation, waiting for this decision, is ready again (docs/workers.md). A store that
    refuses is not the decision's failure: it stands, and the workers' sweep wakes the job later."""
    from dal.receipts.store import StoreError

    if run.get("key") and not store.readonly:
        try:
            store.jobs().wake_key(run["key"])
        except StoreError:
            pass


def _as_shown(store: RunStore, named: dict[str, Any], newest: dict[str, Any], effect: int | None) -> int:
    """`ref` named run `named`, which a later run continued: the decision is about what `named` showed.
    Returns the effect number; DecisionRefused when that is not what the operation now waits on."""
    rid, nid = named["run_id"], newest["run_id"]
    if rid not in {r["run_id"] for r in journal.chain(store, nid)}:
        raise DecisionRefused(
            f"run {rid} belongs to an attempt of its operation that was started over since (--new-attempt): "
            f"what it proposed no longer applies. The operation's newest run is {nid}: review what it waits "
            f"on (`dal receipt show {nid}`), then decide about {nid}")
    shown = _shown(store, rid)
    if effect is None:
        held = [seq for seq, (_c, status) in sorted(shown.items()) if status in _LABELS]
        if not held:
            raise DecisionRefused(f"run {rid} waits on no effect; the operation's newest run is {nid} "
                                  f"(`dal receipt show {nid}`)")
        effect = held[-1]
    if effect not in shown:
        raise DecisionRefused(
            f"run {rid} did not reach effect {effect}; run {nid} continued the operation since: review what it "
            f"waits on (`dal receipt show {nid}`), then decide about {nid}")
    now = journal.load(store, nid).entries.get(effect)
    if now is not None and shown[effect][0] != now.command:
        raise DecisionRefused(
            f"effect {effect} of run {rid} was `{shown[effect][0]}`, but the operation now holds "
            f"`{now.command}` at effect {effect} (run {nid}): review it, then decide about {nid}")
    state = _state(now, None) if now is not None else None
    if state is not None and state not in _LABELS and state not in ("failed", "timeout"):
        from dal.runner.liveness import run_alive

        live = newest.get("status") == "running" and run_alive(newest, store)
        held = [s for s, p in sorted(journal.load(store, nid).entries.items())
                if s > 0 and _state(p, nid if live else None) in _LABELS]
        waits = (f"it now waits on effect {held[-1]} of run {nid}: review it (`dal receipt show {nid}`), "
                 f"then decide about {nid}" if held else f"see `dal receipt show {nid}`")
        raise DecisionRefused(
            f"effect {effect} of run {rid} (`{now.command}`) is {_LABELS.get(state, state)} now: run {nid} "
            f"continued the operation; {waits}")
    return effect


def _applies(store: RunStore, decided_on: dict[str, Any], seq: int) -> str:
    """Which run a decision just recorded about effect `seq` applies to. Read after the decision was
    committed: a run that looks for a decision at the effect and journals its hold in one transaction
    (Store.journal_hold) either saw this decision, or shows its hold here."""
    from dal.receipts.nextstep import decided_job
    from dal.runner.liveness import run_alive

    newest = journal.newest_of(store, store.run_row(decided_on["run_id"]) or decided_on)
    nid = newest["run_id"]
    if newest.get("status") == "running" and run_alive(newest, store):
        # The run reads decisions at the effect, in the transaction that journals what it does there: no
        # entry yet means it has not reached the effect, and will see this decision.
        mine = [e for e in store.journal(nid) if e["seq"] == seq]
        detail = (mine[-1]["detail"] or {}) if mine else {}
        if mine and mine[-1]["result"] is None and (detail.get("pending") or detail.get("uncertain")):
            return (f"applies when you resume: run {nid}, resuming now, reached effect {seq} before this "
                    f"decision and stops there; then `dal resume {nid}`")
        if mine:
            return (f"applies when you resume: run {nid}, resuming now, passed effect {seq} before this "
                    f"decision (it replayed the earlier result); once it ends, `dal resume {nid}`")
        return f"applies to run {nid}, which is resuming now"
    job = open_job(store, newest.get("key"))
    if job is not None:
        return decided_job(job, seq)
    who = _starting(store, newest.get("key"))
    if who is not None:
        # An invocation of the key holds its lock but has not recorded its run yet: it reads decisions when
        # it reaches the effect, so it will see this one.
        return (f"applies to the run {who} is starting now for this operation, when it reaches effect "
                f"{seq}; if it stops before, `dal resume {nid}`")
    # Nothing runs the operation as far as the store can tell; a resume starting this very moment (its lock
    # not taken yet) would still take the decision at the effect, so say so rather than promise otherwise.
    return (f"applies when the operation next reaches effect {seq}: `dal resume {nid}` (or a resume of it "
            "starting right now)")


def _starting(store: RunStore, key: str | None) -> str | None:
    """The process that holds the lock of `key` (`process 4711`, with its machine when the store names it),
    asked of the store without taking the lock (RunStore.key_holder); None when nobody holds it, or the
    store cannot say."""
    from dal.receipts.store import StoreError

    if not key:
        return None
    try:
        holder = store.key_holder(key)
    except StoreError:
        return None
    if not holder:
        return None
    pid, host = holder.get("pid"), holder.get("host")
    who = f"process {pid}" if isinstance(pid, int) and not isinstance(pid, bool) else "a process"
    return who + (f" on {host}" if isinstance(host, str) and host else "")
