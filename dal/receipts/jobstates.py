"""A job's life in the queue, the same for every backend (SQLite: dal/receipts/jobs.py; PostgreSQL:
dal/receipts/pg/jobs.py): its states, the one table of the events that move it, and the fence a worker's run
carries down to the journal."""

from __future__ import annotations

from typing import NamedTuple

from dal.receipts.errors import IllegalTransition

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
