"""A person's decisions about a waiting run, and how to continue it: shared by the CLI (`dal approve`,
`dal deny`, `dal resolve`, `dal resume`) and the Python API (`dal.approve`, ...).

RUN is what `dal receipt show` accepts: a run id, a unique prefix of one, an operation key (its newest
run) or `latest`. The effect defaults to the one the run waits on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from dal.receipts.store import Store

DECISIONS = ("approved", "denied", "resolved:done", "resolved:failed", "resolved:retry")


class DecisionRefused(Exception):
    """The decision cannot be recorded; the message names the run or effect and what to do instead."""


@attrs.frozen
class Decided:
    row: dict[str, Any]  # the stored decision: run_id, seq, decision, who, at, note
    command: str  # the effect's command
    replaced: dict[str, Any] | None  # an earlier decision on the same effect, now superseded


def held_effect(store: Store, run: dict[str, Any], effect: int | None, want: str) -> dict[str, Any]:
    """The effect item of `run` that a decision of kind `want` (pending_approval | uncertain) is about."""
    from dal.runner.runner import RESUMABLE

    rid = run["run_id"]
    if run.get("resumed_by"):
        raise DecisionRefused(f"run {rid} was already continued by run {run['resumed_by']}: decide on that one")
    if run["status"] not in RESUMABLE:
        raise DecisionRefused(f"run {rid} is {run['status']}, not waiting for a decision")
    receipt = store.get_run(rid) or {}
    items = (receipt.get("effects") or {}).get("items") or []
    held = [i for i in items if i.get("status") in ("pending_approval", "uncertain")]
    what = "waiting for approval" if want == "pending_approval" else "of unknown outcome"
    if effect is None:
        if not held:
            raise DecisionRefused(f"run {rid} is {run['status']} but no effect of it is {what}")
        item = held[-1]
    else:
        found = [i for i in items if i.get("seq") == effect]
        if not found:
            raise DecisionRefused(
                f"run {rid} has no effect {effect} (it recorded {len(items)} effect{'s' if len(items) != 1 else ''})"
            )
        item = found[-1]
    if item.get("status") != want:
        state = item.get("status")
        label = {"pending_approval": "waiting for approval", "uncertain": "of unknown outcome"}.get(state, state)
        hint = ""
        if state == "uncertain":
            hint = f"; use `dal resolve {rid} --effect {item['seq']} --as done|failed|retry`"
        elif state == "pending_approval":
            hint = f"; use `dal approve {rid} --effect {item['seq']}` or `dal deny`"
        raise DecisionRefused(
            f"effect {item['seq']} of run {rid} (`{item['command']}`) is not {what}: it is {label}{hint}"
        )
    return item


def decide(
    store: Store, ref: str, decision: str, *, effect: int | None = None, note: str | None = None,
    who: str | None = None,
) -> Decided:
    """Record `decision` (one of DECISIONS) about the effect run `ref` waits on. Raises DecisionRefused."""
    from dal.runner.runner import find_run

    if decision not in DECISIONS:
        raise DecisionRefused(f"unknown decision {decision!r}: one of {', '.join(DECISIONS)}")
    want = "uncertain" if decision.startswith("resolved:") else "pending_approval"
    run = find_run(store, ref)
    item = held_effect(store, run, effect, want)
    rid, seq = run["run_id"], item["seq"]
    earlier = [r for r in store.approvals(rid) if r.get("seq") == seq]
    row = store.record_approval(rid, seq, decision, who=who, note=note)
    return Decided(row, item["command"], earlier[-1] if earlier else None)


@attrs.frozen
class Launch:
    """How a run was started, so that resuming it runs the same script under the same policy."""

    script: Path | None
    workspace: Path | None
    policy_args: dict[str, Any]  # the policy flags, as `dal run` took them
    policy: Any  # the Policy in force stored with the run (None: an older DAL stored only the flags)
    max_steps: int | None
    max_effects: int | None
    timeout: float | None


def launch_of(run: dict[str, Any]) -> Launch:
    """Read back what the store kept of a run's start (`run_row(...)["policy"]`). Raises ValueError when
    the stored policy cannot be read."""
    from dal.effects.policy import PolicyError
    from dal.runner.inforce import stored_policy

    try:
        in_force = stored_policy(run)
    except PolicyError as e:
        raise ValueError(f"run {run.get('run_id')}: {e}; start a new operation") from None
    policy = run.get("policy") or {}
    stored = dict(policy.get("args") or {})
    launch = policy.get("launch") or {}
    cwd = Path(launch.get("cwd") or ".")

    def here(p: str | None) -> Path | None:
        return None if not p else Path(p) if Path(p).is_absolute() or Path.cwd() == cwd else cwd / p

    script = here(run.get("script_path"))
    if launch.get("script") and (script is None or Path.cwd() != cwd or not script.exists()):
        script = Path(launch["script"])  # the same file, named as the run named it when that still works
    workspace = Path(in_force.workspace) if in_force is not None else (
        here(stored.get("workspace")) or here(launch.get("workspace")))
    if stored.get("policy"):
        stored["policy"] = here(stored["policy"])
    return Launch(
        script=script,
        workspace=workspace,
        policy_args=stored,
        policy=in_force,
        max_steps=int(launch["max_steps"]) if launch.get("max_steps") else None,
        max_effects=int(launch["max_effects"]) if launch.get("max_effects") else None,
        timeout=float(launch["timeout"]) if launch.get("timeout") else None,
    )
