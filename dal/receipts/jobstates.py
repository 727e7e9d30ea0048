"""A job's life in the queue, the same for every backend (SQLite: dal/receipts/jobs.py; PostgreSQL:
dal/receipts/pg/jobs.py): its states, the one table of the events that move it, and the fence a worker's run
carries down to the journal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from dal.receipts.errors import IllegalTransition, StoreError

# Job states that no longer hold their key: a new job of the key may be submitted (the partial unique index
# jobs_open_key of either store's schema leaves them out).
TERMINAL = ("done", "dead", "cancelled")

STATES = ("ready", "scheduled", "running", "waiting", "parked", "done", "dead", "cancelled")
OPEN_STATES = tuple(s for s in STATES if s not in TERMINAL)

# The job's life, written once: event -> (the states it may leave from, the state it goes to). Every
# UPDATE of a job's state is guarded by the from-states of its event (tests/worker/test_transitions.py
# walks every edge).
TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "claim": (frozenset({"ready", "scheduled"}), "running"),  # scheduled: once its run_at has come
    "takeover": (frozenset({"running"}), "running"),  # its lease ran out: another worker takes it
    "done": (frozenset({"running"}), "done"),  # retry none: completed, or skipped as a duplicate
    "resume": (frozenset({"running"}), "ready"),  # retry resume: at once (interrupted, died)
    "backoff": (frozenset({"running"}), "scheduled"),  # resume again after a crash loop; replay; busy key
    "dead": (frozenset({"running"}), "dead"),  # replay, and max attempts reached
    "park": (frozenset({"running"}), "parked"),  # inspect, repair, rejected: for an operator
    "wait": (frozenset({"running"}), "waiting"),  # escalate: approval or an uncertain effect
    "drain": (frozenset({"running"}), "ready"),  # the worker was stopped (SIGTERM): not an attempt lost
    "wake": (frozenset({"waiting"}), "ready"),  # a decision exists (dal approve, deny, resolve)
    "retry": (frozenset({"parked", "waiting", "scheduled", "dead", "cancelled"}), "ready"),  # dal job retry
    "cancel": (frozenset({"ready", "scheduled", "waiting", "parked", "running"}), "cancelled"),  # dal job cancel
}


class Fence(NamedTuple):
    """What a worker's run passes down to the journal: the job, the lease epoch it was claimed with, and
    the worker that claimed it."""

    job_id: int
    epoch: int
    owner: str


def target(event: str, state: str) -> str:
    """The state `event` moves a job in `state` to; IllegalTransition when it may not."""
    sources, to = TRANSITIONS[event]
    if state not in sources:
        raise IllegalTransition(f"a {state} job cannot {event.replace('_', ' ')} (from: {', '.join(sorted(sources))})")
    return to


def operator_target(job: dict[str, Any] | None, job_id: int, event: str, path: Any,
                    open_job_of: Callable[[str], dict[str, Any] | None]) -> str:
    """The state an operator's `event` (`dal job retry`, `dal job cancel`) moves `job` (its row, read for
    update; None when there is none) to: StoreError when there is no such job, IllegalTransition when its state
    may not leave by `event`, and StoreError when it would reopen a key that has an open job already
    (`open_job_of(key)`: that job's job_id and state)."""
    if job is None:
        raise StoreError(f"no job {job_id} in {path} (list jobs with `dal jobs`)", path)
    try:
        to = target(event, job["state"])
    except IllegalTransition as e:
        raise IllegalTransition(f"job {job_id}: {e}", path) from None
    if to in OPEN_STATES and job["state"] in TERMINAL:
        other = open_job_of(job["key"])
        if other:
            raise StoreError(f"job {job_id}: its key {job['key']!r} has an open job already (job "
                             f"{other['job_id']}, {other['state']})", path)
    return to
