"""The receipt of a run whose process died before writing one, rebuilt from the operation's journal."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from dal.effects import PolicyError
from dal.receipts.build import dead_run_receipt
from dal.runner.inforce import receipt_policy
from dal.runner.spec import SpecError
from dal.runner.stored import StoredRun

if TYPE_CHECKING:
    from dal.receipts.contract import RunStore


def crashed_receipt(
    store: RunStore, prev: dict[str, Any], *, workspace: Path, blocker: str, attempts: dict[str, int] | None = None
) -> dict[str, Any]:
    """The receipt of a run whose process died before writing one, rebuilt from its journal (the entries it
    reached, with those of the operation it replayed) and what was stored when it began: each effect with
    its recorded result, or `uncertain` when it started and never reported back (dal.receipts.build)."""
    info = store.run_row(prev["run_id"]) or {}
    try:
        started: StoredRun | None = StoredRun.of(info)
    except (PolicyError, SpecError):
        started = None
    spec = started.spec if started is not None else None
    legacy_ws = ((started.legacy or {}).get("launch") or {}).get("workspace") if started is not None else None
    in_force = started.policy if started is not None else None
    return dead_run_receipt(
        prev, _reached(store, prev["run_id"]),
        workspace=Path((spec.workspace if spec is not None else None) or legacy_ws or workspace),
        write_roots=tuple(in_force.write_roots) if in_force is not None else (),
        script_sha256=started.sha256 if started is not None else None,
        steps_budget=int((started.budget("max_steps") if started else None) or 0),
        effects_budget=started.budget("max_effects") if started else None,
        policy=receipt_policy(in_force, None, []) if in_force is not None else None,
        args=spec.args if spec is not None and spec.args else None,  # what the dead run was asked to do
        blocker=blocker, attempts=attempts,
    )


def _reached(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """The journal entries a run that died reached, in order: its own, and before the last of them the
    operation's entries it replayed (a replayed result is not copied into the replaying run's journal),
    marked `replayed`."""
    own = store.journal(run_id)
    last = max((r["seq"] for r in own if r["seq"] > 0), default=0)
    if not last:
        return own
    from dal.runner import journal

    mine = {r["seq"] for r in own}
    earlier = [
        {"seq": p.seq, "command": p.command, "class": p.effect_class, "result": p.result,
         "detail": {**p.detail, "replayed": True}}
        for p in journal.load(store, run_id).entries.values()
        if 0 < p.seq < last and p.seq not in mine and p.origin != run_id
    ]
    return sorted(own + earlier, key=lambda r: r["seq"])
