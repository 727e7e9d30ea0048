"""What `dal receipt show` renders for a run, gathered in one place so that every front end that shows a
receipt (the CLI, the console) shows the same thing: the receipt, the decisions people recorded (with
those of the run it continues), and the run that continued it. A run with no receipt yet is either still
running (a line saying so) or died (the receipt its journal gives, with status `died`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dal.core.records import FrozenRecord
from dal.receipts.contract import RunStore
from dal.receipts.store import RunNotFound


class Shown(FrozenRecord):
    """A receipt to render (None while the run is still running: `running` says so instead), its
    decisions, the run that continued it, and the queue's open job of its operation (whose worker
    continues it), if any."""

    __slots__ = ("receipt", "decisions", "continued_by", "running", "job")

    def __init__(self, receipt: dict[str, Any] | None, decisions: list[dict[str, Any]], continued_by: str | None,
                 running: str | None = None, job: dict[str, Any] | None = None) -> None:
        init = object.__setattr__
        init(self, "receipt", receipt)
        init(self, "decisions", decisions)
        init(self, "continued_by", continued_by)
        init(self, "running", running)
        init(self, "job", job)


def shown(store: RunStore, ref: str, workspace: Path | None = None) -> Shown:
    """What `dal receipt show REF` shows. Raises RunNotFound when `ref` names no run. `workspace`: where
    a died run's artifacts are looked for (the current directory by default)."""
    try:
        receipt: dict[str, Any] | str | None = store.find(ref)
    except RunNotFound:
        receipt = unfinished(store, ref, workspace)
        if receipt is None:
            raise
        if isinstance(receipt, str):  # still running: say so, show nothing as final
            return Shown(None, [], None, receipt)
    assert isinstance(receipt, dict)
    decisions = store.approvals(receipt["run_id"])
    if receipt.get("previous_run"):
        # A resumed run acts on the decisions people recorded on the run it continues: say who.
        seen = {d.get("id") for d in decisions}
        earlier = [d for d in store.approvals(receipt["previous_run"]) if d.get("id") not in seen]
        decisions = earlier + decisions
    row = store.run_row(receipt["run_id"]) or {}
    job = None
    if receipt.get("key") and receipt.get("status") not in ("completed", "skipped"):
        from dal.runner.decisions import open_job

        job = open_job(store, receipt["key"])
    return Shown(receipt, decisions, row.get("resumed_by"), job=job)


def running_on(store: RunStore, run: dict[str, Any]) -> str | None:
    """The machine a keyed run marked running executes on, when its process is not this machine's to see: the
    host its key's lock holder recorded (RunStore.key_holder; the PostgreSQL store's locks name it). None when
    its process runs here, when nobody holds the key for it, or when the store does not say (SQLite)."""
    from dal.receipts.store import StoreError
    from dal.runner.liveness import row_verdict

    key = run.get("key")
    if not key or row_verdict(run) == "alive":
        return None
    try:
        holder = store.key_holder(key)
    except StoreError:
        return None
    host = (holder or {}).get("host")
    return host if isinstance(host, str) and host and holder.get("run_id") == run.get("run_id") else None


def unfinished(store: RunStore, ref: str, workspace: Path | None = None) -> dict[str, Any] | str | None:
    """A run with no receipt yet: a line saying it is still running, or, when its process is gone, the
    receipt its journal gives, with status `died` (the next invocation records it as `interrupted`). None
    when `ref` names no run."""
    from dal.runner.deadrun import crashed_receipt
    from dal.runner.liveness import run_alive

    try:
        rows = store.list_runs(limit=1) if ref.strip() == "latest" else [store.find_run(ref)]
    except RunNotFound:
        return None
    if not rows or not rows[0]:
        return None
    run = store.run_row(rows[0]["run_id"]) or rows[0]
    if run.get("status") != "running":
        return None
    rid, pid = run["run_id"], run.get("pid")
    journal = [r for r in store.journal(rid) if r["seq"] > 0]
    if run_alive(run, store):
        host = running_on(store, run)
        where = f"process {pid} on {host}" if host else f"process {pid}"
        return (f"running  {rid}  ({where}, started {run['started_at']}, {len(journal)} effect"
                f"{'s' if len(journal) != 1 else ''} journaled so far): no receipt until it ends")
    receipt = crashed_receipt(
        store, run, workspace=workspace or Path.cwd(),
        blocker=f"the process running it ({pid}) died before writing its receipt (killed?); its journal "
                "says what ran. The next `dal resume` (or a run with its key) records this receipt as "
                "interrupted and continues from the journal",
    )
    return {**receipt, "status": "died"}
