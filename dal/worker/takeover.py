"""A job taken over from a worker whose lease ran out: its key's lock may still be held.

The key's flock (dal/receipts/oplock.py, the store's operation lock) keeps one runner per key on a
machine. A worker that was paused (SIGSTOP, a debugger, a VM frozen) or hung still holds it after its
lease ran out; its next journal write
is fenced, so when it continues it stops and lets go. So the worker that took the job over waits for the
lock. If the stale holder has not let go one more lease period later (by this worker's monotonic clock:
it took the job over only after seeing its lease unrenewed for a whole lease), and it is exactly the
process recorded for the earlier claim (pid, start time, boot id: the same process on this machine, not
a later one that got its pid), it is killed with SIGKILL. Killing it is safe: it could journal no new
effect anyway, and the journal decides what runs again (an effect it had under way with no journaled
result runs again only if it is a read or idempotent, else it waits for `dal resolve`). A holder that is
not that process (an operator's own `dal run --key`) is never killed: the run then finds the key busy.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _try(lock: Any) -> dict[str, Any] | None:
    """None when the key's lock is free (taken and let go at once), else who holds it."""
    from dal.receipts.oplock import KeyBusy

    try:
        lock.acquire("(a worker checking the key)", 0)
    except KeyBusy as e:
        return e.holder
    lock.release()
    return None


def wait_for_key(store: Path | Any, job: dict[str, Any], patience: float, say: Callable[[str], Any]) -> None:
    """Return once the key of `job` (claimed by a takeover) is free, or after killing its stale holder as
    described above, or after giving up (the run then finds the key busy). `store`: the store's file or its
    StoreLocation; the key's lock is the store's own (`operation_lock`: a flock file, or PostgreSQL's
    advisory lock, whose holder on another machine is never killed: its boot id is not this one's)."""
    from dal.receipts.location import StoreLocation, open_store

    where = store if isinstance(store, StoreLocation) else StoreLocation("sqlite", os.fspath(store))
    # Read-only: it takes no write lock (a stale holder paused inside a transaction may hold SQLite's).
    with open_store(where, readonly=True) as s:
        _wait_for_key(s.operation_lock(job["key"]), job, patience, say)


def _wait_for_key(lock: Any, job: dict[str, Any], patience: float, say: Callable[[str], Any]) -> None:
    from dal.core.liveness import elsewhere, verdict

    stale = json.loads(job.get("took_over") or "null") or {}
    # One more lease period of this worker's own (monotonic) clock: the claim was made only after this
    # worker saw the lease go a whole lease unrenewed (Worker._stale), never by comparing wall clocks.
    deadline = time.monotonic() + patience
    holder = _try(lock)
    while holder is not None and time.monotonic() < deadline:
        time.sleep(0.05)
        holder = _try(lock)
    if holder is None:
        return
    pid = stale.get("pid")
    # Its pid is a number of the pid namespace it runs in: killed only when the lock's holder says it runs in
    # this one (a holder that records no place is an older DAL's, judged here) and it is the claim's process.
    where = holder.get("where", {"boot": stale.get("boot")})
    ours = (isinstance(pid, int) and holder.get("pid") == pid and holder.get("start", stale.get("start")) ==
            stale.get("start") and stale.get("boot") is not None
            and elsewhere(where) is None and elsewhere({"boot": stale.get("boot")}) is None
            and verdict(pid, stale.get("start"), where) == "alive")
    if not ours:
        return
    say(f"job {job['job_id']}: process {pid}, which had it, still holds its key: its lease went unrenewed for "
        f"{2 * patience:g} s as this worker measured: killing it (it can journal no new effect; the journal "
        "decides what runs again)")
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    end = time.time() + 5.0
    while _try(lock) is not None and time.time() < end:
        time.sleep(0.02)
