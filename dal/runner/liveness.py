"""Whether a run still runs: its row's process, judged by dal.core.liveness, or the lock it holds.

A pid says nothing of another machine's processes, nor of another pid namespace's, so a run is also taken
for live while its key's lock is held for it (`run:<run_id>` for a run without a key), or, once that lock's
database session ended under it, while the lock row it left names a process that still runs or cannot be
seen from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dal.core.liveness import Verdict, elsewhere, verdict
from dal.receipts.store import StoreError

if TYPE_CHECKING:
    from dal.receipts.contract import RunStore


def row_verdict(row: dict[str, Any]) -> Verdict:
    """Whether the process that began the run in `row` (a Store.run_row()) still runs. A run's row keeps
    the pid, its start time and the boot id (None in rows written before DAL recorded them)."""
    boot = row.get("boot_id")
    return verdict(row.get("pid"), row.get("pid_start"), {"boot": boot} if boot else None)


def run_alive(row: dict[str, Any], store: RunStore | None = None) -> bool:
    """Whether the run in `row` may still run: its process provably does (row_verdict), or, given the
    `store`, its lock is held for it — its key's, or `run:<run_id>` for a run without a key
    (RunStore.key_holder: a run on another host, or in another pid namespace), or, when that lock's session
    ended under it, the lock row it left names a process of another pid namespace of this machine that
    still runs or cannot be seen from here."""
    if row_verdict(row) == "alive":
        return True
    # A run without a key holds `run:<its id>` for its life (operation.RunState.hold_own_lock); a resume of it holds
    # that lock too, under its own run id, so the holder's run id says which run the lock is held for.
    key = row.get("key") or (f"run:{row['run_id']}" if row.get("run_id") else None)
    if not key or store is None or row.get("status", "running") != "running":
        return False
    try:
        holder = store.key_holder(key)
        if holder:
            return bool(holder.get("run_id") == row.get("run_id"))
        lost = store.lost_key_holder(key)
    except StoreError:
        return False  # unknown: read as its pid says (the callers' own reads fail on such a store too)
    return _lost_holder_alive(lost, row)


def _lost_holder_alive(lost: dict[str, Any] | None, row: dict[str, Any]) -> bool:
    """Whether the run in `row`, whose key lock's session ended while it held it (`lost`: the lock row it
    left), may still run on this machine in another pid namespace: its pid there is not this namespace's,
    so only that namespace's processes say; one this process cannot see counts as running."""
    where = (lost or {}).get("where")
    if not isinstance(where, dict) or (lost or {}).get("run_id") != row.get("run_id") or elsewhere(where) != "pidns":
        return False
    return verdict((lost or {}).get("pid"), (lost or {}).get("start"), where) != "gone"


def lost_holder_verdict(lost: dict[str, Any], row: dict[str, Any]) -> tuple[str | None, Verdict]:
    """Where the holder that never let go of a key's lock (`lost`: its lock row) ran, as
    dal.core.liveness.elsewhere says, and whether it still runs. A lock row an older DAL wrote records no
    place: the run's own row says where it began."""
    ident = lost.get("holder")
    pid = lost.get("pid", row.get("pid"))
    if isinstance(ident, dict) and isinstance(ident.get("where"), dict):
        return elsewhere(ident["where"]), verdict(pid, ident.get("start"), ident["where"])
    place = {"boot": row["boot_id"]} if row.get("boot_id") else None
    how = elsewhere(place)
    return how, (row_verdict(row) if how is None else "unknown")
