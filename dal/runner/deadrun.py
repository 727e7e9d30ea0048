"""The receipt of a run whose process died before writing one, rebuilt from the operation's journal."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from dal.effects import PolicyError
from dal.receipts.build import artifact_of, effect_item, run_receipt
from dal.receipts.ids import utc_timestamp
from dal.receipts.retry import derive_retry
from dal.runner.inforce import (
    receipt_policy,
)
from dal.runner.spec import SpecError
from dal.runner.stored import StoredRun

if TYPE_CHECKING:
    from dal.receipts.contract import RunStore


def crashed_receipt(
    store: RunStore, prev: dict[str, Any], *, workspace: Path, blocker: str, attempts: dict[str, int] | None = None
) -> dict[str, Any]:
    """The receipt of a run whose process died before writing one, rebuilt from its journal: each effect
    with its recorded result, or `uncertain` when it started and never reported back."""
    info = store.run_row(prev["run_id"]) or {}
    try:
        started: StoredRun | None = StoredRun.of(info)
    except (PolicyError, SpecError):
        started = None
    items = []
    reached = _reached(store, prev["run_id"])
    for row in reached:
        if row["seq"] <= 0 or (row.get("detail") or {}).get("forgotten") and not row.get("result"):
            continue
        res = row.get("result") or {}
        detail = row.get("detail") or {}
        if res:
            status = res.get("status", "completed")
        elif detail.get("pending") == "approval":
            status = "pending_approval"
        else:
            status = "uncertain"
        items.append(effect_item(
            seq=row["seq"], command=row["command"], status=status,
            effect_class=row.get("class"), code=res.get("code"),
            summary=res.get("summary") or ("outcome unknown" if status == "uncertain" else "not started"),
            reason=res.get("reason") or detail.get("policy"), reads=res.get("reads", []),
            writes=res.get("writes") or detail.get("writes") or [],
            programs=res.get("programs") or detail.get("programs") or [],
            duration_ms=res.get("duration_ms", 0.0), line=detail.get("line", 0),
            column=0, loop_iteration=None, replayed=bool(detail.get("replayed")),
        ))
    sha = started.sha256 if started is not None else None
    roots = tuple(started.policy.write_roots) if started is not None and started.policy is not None else ()
    spec_ws = started.spec.workspace if started is not None and started.spec is not None else None
    legacy_ws = ((started.legacy or {}).get("launch") or {}).get("workspace") if started is not None else None
    ws = Path(spec_ws or legacy_ws or workspace)
    in_force = started.policy if started is not None else None
    done = ("completed", "failed", "timeout", "uncertain")
    external = ("uncertain" if any(i["status"] == "uncertain" and i["class"] == "external" for i in items) else
                "performed" if any(i["status"] in ("completed", "failed", "timeout") and i["class"] == "external"
                                   for i in items) else "none")
    receipt = run_receipt(
        run_id=prev["run_id"],
        operation=prev["operation"],
        key=prev.get("key"),
        script_path=prev.get("script_path") or "",
        script_sha256=sha if isinstance(sha, str) and len(sha) == 64 else "0" * 64,
        workspace=str(ws),
        status="interrupted",
        attempted_at=prev["started_at"],
        finished_at=utc_timestamp(),
        duration_ms=_journaled_for(prev["started_at"], reached),
        steps_used=0,  # not recorded: the process died with its count (the receipt says so, render.py)
        steps_budget=int((started.budget("max_steps") if started else None) or 0),
        effects_count=len(items),
        effects_budget=started.budget("max_effects") if started else None,
        items=items,
        omitted=0,
        artifacts=[
            artifact_of(ws, w, roots)
            for w in dict.fromkeys(w for i in items if i["status"] in done for w in i["writes"])
        ],
        external_effect=external,
        retry=derive_retry("interrupted", external_effect=external),
        blocker=blocker,
        error=None,
        result=None,
        loops=[],
        attempts=attempts,
        previous_run=prev.get("previous_run"),
        skipped_of=None,
        **({"policy": receipt_policy(in_force, None, [])} if in_force is not None else {}),
        # what the dead run was asked to do
        **({"args": started.spec.args} if started is not None and started.spec is not None and started.spec.args
           else {}),
    )
    return receipt


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



def _journaled_for(started_at: str, rows: list[dict[str, Any]]) -> float:
    """How long the dead run went on at least: from its start to the last entry its journal holds (0 when
    it holds none, or the times cannot be read)."""
    from datetime import datetime

    def at(text: Any) -> datetime | None:
        try:
            return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        except ValueError:
            return None

    start = at(started_at)
    ends = [t for r in rows if not (r.get("detail") or {}).get("replayed")
            for t in (at(r.get("result_at")), at(r.get("intent_at"))) if t is not None]
    if start is None or not ends:
        return 0.0
    return max(0.0, round((max(ends) - start).total_seconds() * 1000, 3))
