"""The job queue's store (dal/receipts/jobs.py) on a real SQLite store: the transition table edge by edge,
one open job per key, the claiming statement, leases and fencing of the journal."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest

from dal.receipts.jobs import (
    STATES,
    TRANSITIONS,
    Fence,
    Fenced,
    IllegalTransition,
    JobQueue,
    target,
)
from dal.receipts.store import Store, StoreError

HOST = "host-a/0123"
SPEC = {"v": 1, "script": "/nowhere.dal"}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "dal.db")
    yield s
    s.close()


def add(q: JobQueue, key: str | None = "k", **kw: object) -> dict:
    fields = {"spec": SPEC, "key": key, "queue": "default", "priority": 0, "run_at": 100.0, "max_attempts": 3,
              "host": HOST, "movable": False, "now": 100.0}
    fields.update(kw)
    job, _ = q.submit(**fields)  # type: ignore[arg-type]
    return job


def claim(q: JobQueue, owner: str = "w1", now: float = 100.0, **kw: object) -> dict | None:
    args = {"owner": owner, "queues": ["default"], "host": HOST, "lease": 10.0, "now": now}
    args.update(kw)
    return q.claim(**args)  # type: ignore[arg-type]


def fence_of(job: dict) -> Fence:
    return Fence(job["job_id"], job["lease_epoch"], job["lease_owner"])


def test_every_edge_of_the_transition_table_and_no_other() -> None:
    for event, (sources, to) in TRANSITIONS.items():
        assert to in STATES and sources <= set(STATES)
        for state in STATES:
            if state in sources:
                assert target(event, state) == to
            else:
                with pytest.raises(IllegalTransition):
                    target(event, state)
    # Terminal states are left only by an operator's retry; nothing leaves `done`.
    assert not any("done" in sources for sources, _ in TRANSITIONS.values())
    assert {e for e, (s, _) in TRANSITIONS.items() if "dead" in s or "cancelled" in s} == {"retry"}


def test_each_routing_event_moves_a_running_job_and_only_under_its_fence(store: Store) -> None:
    q = JobQueue.of(store)
    for i, event in enumerate(("done", "resume", "backoff", "dead", "park", "wait", "drain")):
        job = add(q, f"k{i}")
        got = claim(q)
        assert got is not None and got["job_id"] == job["job_id"] and got["state"] == "running"
        stale = Fence(got["job_id"], got["lease_epoch"] - 1, "w1")
        assert q.route(stale, event, now=101.0) is None  # an old epoch changes nothing
        assert q.route(Fence(got["job_id"], got["lease_epoch"], "w2"), event, now=101.0) is None
        assert q.route(fence_of(got), event, run_at=101.0 if event != "backoff" else 1e9, now=101.0,
                       run={"run_id": f"run_{i}", "status": "x", "retry": "y"}) == TRANSITIONS[event][1]
        row = q.get(job["job_id"])
        assert row["state"] == TRANSITIONS[event][1] and row["lease_owner"] is None and row["last_run_id"] == f"run_{i}"
        assert q.route(fence_of(got), event, now=101.0) is None  # routed once: the lease is gone
        if row["state"] != "ready":
            continue
        assert claim(q, now=102.0)["job_id"] == job["job_id"]  # ready again: claimable at once
        q.route(fence_of(q.get(job["job_id"])), "done", now=102.0)


def test_operator_moves_follow_the_table(store: Store) -> None:
    q = JobQueue.of(store)
    job = add(q)
    with pytest.raises(IllegalTransition, match="a ready job cannot retry"):
        q.retry(job["job_id"], now=101.0)
    got = claim(q)
    q.route(fence_of(got), "park", now=101.0)
    assert q.retry(job["job_id"], now=102.0)["state"] == "ready"
    got = claim(q, now=103.0)
    cancelled = q.cancel(job["job_id"], now=104.0)  # running: cancelled, and its lease epoch moves on
    assert cancelled["state"] == "cancelled" and cancelled["lease_epoch"] == got["lease_epoch"] + 1
    assert q.heartbeat(fence_of(got), 10.0, now=104.5) is False
    with pytest.raises(IllegalTransition):
        q.cancel(job["job_id"])
    # A terminal job comes back only while its key has no other open job.
    other = add(q, "k", now=105.0)
    assert other["job_id"] != job["job_id"]
    with pytest.raises(StoreError, match="has an open job already"):
        q.retry(job["job_id"])
    with pytest.raises(StoreError, match="no job 999"):
        q.retry(999)


def test_one_open_job_per_key(store: Store) -> None:
    q = JobQueue.of(store)
    first, made = q.submit(spec=SPEC, key="report", queue="default", priority=0, run_at=0.0, max_attempts=3,
                           host=HOST, movable=False)
    again, made_again = q.submit(spec=SPEC, key="report", queue="other", priority=9, run_at=0.0, max_attempts=3,
                                 host=HOST, movable=False)
    assert made and not made_again and again["job_id"] == first["job_id"] and again["queue"] == "default"
    # The partial unique index holds even against a writer that skips the check.
    with pytest.raises(sqlite3.IntegrityError):
        store._conn.execute(  # noqa: SLF001
            "INSERT INTO jobs (queue, key, spec, state, run_at, max_attempts, host, created_at, updated_at)"
            " VALUES ('q', 'report', '{}', 'parked', 0, 1, 'h', 0, 0)")
    got = claim(q, now=1.0)
    q.route(fence_of(got), "done", now=2.0)
    later, made_later = q.submit(spec=SPEC, key="report", queue="default", priority=0, run_at=0.0, max_attempts=3,
                                 host=HOST, movable=False)
    assert made_later and later["job_id"] != first["job_id"]
    anonymous = add(q, None)
    assert anonymous["key"] == f"job:{anonymous['job_id']}"


def test_claim_takes_the_best_due_job_of_its_queues_and_host(store: Store) -> None:
    q = JobQueue.of(store)
    low = add(q, "low", priority=0, run_at=50.0)
    high = add(q, "high", priority=5, run_at=90.0)
    later = add(q, "later", priority=9, run_at=500.0)  # scheduled: not before its time
    assert later["state"] == "scheduled"
    elsewhere = add(q, "elsewhere", priority=9, host="host-b/9999")
    moves = add(q, "moves", priority=1, host="host-b/9999", movable=True)
    other_queue = add(q, "mail", priority=9, queue="mail")
    order = [claim(q, now=100.0)["job_id"] for _ in range(3)]
    assert order == [high["job_id"], moves["job_id"], low["job_id"]]
    assert claim(q, now=100.0) is None  # `elsewhere` is not movable, `later` not due, `mail` not our queue
    assert claim(q, now=500.0)["job_id"] == later["job_id"]
    assert claim(q, now=500.0, queues=["mail", "default"])["job_id"] == other_queue["job_id"]
    assert claim(q, now=500.0, host="host-b/9999")["job_id"] == elsewhere["job_id"]


def test_claim_some_takes_the_best_jobs_at_once_each_with_its_own_fence(store: Store) -> None:
    q = JobQueue.of(store)
    low = add(q, "low", priority=0, run_at=50.0)
    high = add(q, "high", priority=5, run_at=90.0)
    mid = add(q, "mid", priority=1, run_at=95.0)
    add(q, "elsewhere", priority=9, host="host-b/9999")  # not movable: never ours
    two = q.claim_some(owner="w1", queues=["default"], host=HOST, lease=10.0, limit=2, now=100.0)
    assert [j["job_id"] for j in two] == [high["job_id"], mid["job_id"]]
    assert all(j["state"] == "running" and j["lease_owner"] == "w1" and j["lease_epoch"] == 1 for j in two)
    rest = q.claim_some(owner="w2", queues=["default"], host=HOST, lease=10.0, limit=5, now=100.0)
    assert [j["job_id"] for j in rest] == [low["job_id"]]  # the two taken are not taken again
    assert q.claim_some(owner="w2", queues=["default"], host=HOST, lease=10.0, limit=0, now=100.0) == []
    # Each fence is its own: routing one leaves the other running under w1.
    assert q.route(fence_of(two[0]), "done", now=101.0) == "done"
    assert q.get(two[1]["job_id"])["state"] == "running"
    assert q.heartbeat(fence_of(two[1]), 10.0, now=101.0)


def test_a_lease_that_runs_out_is_taken_over_with_the_next_epoch(store: Store) -> None:
    q = JobQueue.of(store)
    add(q)
    mine = claim(q, owner="w1", now=100.0)
    assert claim(q, owner="w2", now=105.0) is None  # the lease holds until 110
    assert q.heartbeat(fence_of(mine), 10.0, now=108.0)  # ... and now until 118
    assert q.set_holder(fence_of(mine), {"pid": 4242, "start": 7, "boot": "b"})
    assert claim(q, owner="w2", now=117.0) is None
    theirs = claim(q, owner="w2", now=118.5)
    assert theirs["lease_epoch"] == mine["lease_epoch"] + 1 and theirs["lease_owner"] == "w2"
    assert theirs["stale_since"] == 118.0 and '"pid": 4242' in theirs["took_over"] and theirs["holder"] is None
    assert theirs["attempts"] == 2
    assert not q.heartbeat(fence_of(mine), 10.0, now=119.0)  # w1 lost it
    assert q.route(fence_of(mine), "done", now=119.0) is None


def test_the_journal_refuses_an_intent_once_the_lease_is_lost(store: Store) -> None:
    q = JobQueue.of(store)
    add(q, "k", now=0.0, run_at=0.0)
    import time

    now = time.time()
    mine = claim(q, owner="w1", now=now, lease=30.0)
    fence = fence_of(mine)
    store.begin_run("run_20260101T000000000Z_aaaaaa", operation="k", key="k")
    store.journal_intent("run_20260101T000000000Z_aaaaaa", 1, "echo a >> f", "local", fence=fence)
    store.journal_result("run_20260101T000000000Z_aaaaaa", 1, {"status": "completed"})
    # Another worker takes it over (the lease is made to run out): the old worker's next intent is fenced.
    store._conn.execute("UPDATE jobs SET lease_until = ?", (now - 1,))  # noqa: SLF001
    theirs = claim(q, owner="w2", now=now, lease=30.0)
    assert theirs is not None
    with pytest.raises(Fenced, match="taken over by w2"):
        store.journal_intent("run_20260101T000000000Z_aaaaaa", 2, "echo b >> f", "local", fence=fence)
    with pytest.raises(Fenced):
        store.journal_hold("run_20260101T000000000Z_aaaaaa", 2, "echo b | tee -a out", "external", fence=fence)
    assert [e["seq"] for e in store.journal("run_20260101T000000000Z_aaaaaa")] == [1]
    # The new holder journals; a lease of its own that ran out fences it too, and so does a cancel.
    store.journal_intent("run_20260101T000000000Z_aaaaaa", 2, "echo b >> f", "local", fence=fence_of(theirs))
    store._conn.execute("UPDATE jobs SET lease_until = ?", (now - 5,))  # noqa: SLF001
    with pytest.raises(Fenced, match="ran out"):
        store.journal_intent("run_20260101T000000000Z_aaaaaa", 3, "echo c >> f", "local", fence=fence_of(theirs))
    q.cancel(theirs["job_id"])
    with pytest.raises(Fenced, match="cancelled"):
        store.journal_intent("run_20260101T000000000Z_aaaaaa", 3, "echo c >> f", "local", fence=fence_of(theirs))
    assert [e["seq"] for e in store.journal("run_20260101T000000000Z_aaaaaa")] == [1, 2]


def test_wait_goes_ready_at_once_when_the_decision_came_first(store: Store) -> None:
    q = JobQueue.of(store)
    for i, decided in enumerate((False, True)):
        add(q, f"k{i}", now=0.0, run_at=0.0)
        got = claim(q, now=1.0)
        rid = f"run_2026010{i}T000000000Z_aaaaaa"
        if decided:
            store.record_approval(rid, 2, "approved", who="alice")
        to = q.route(fence_of(got), "wait", run={"run_id": rid, "status": "waiting", "retry": "escalate"},
                     waits_on=[2], now=2.0)
        assert to == ("ready" if decided else "waiting")
    assert q.wake_key("k0", now=3.0) == 1 and q.get(1)["state"] == "ready"
    assert q.wake_key("k0", now=3.0) == 0


def test_the_states_of_many_claims_never_overlap(store: Store, tmp_path: Path) -> None:
    """Two plain connections claiming from the same store take each job once (BEGIN IMMEDIATE)."""
    q = JobQueue.of(store)
    for i in range(40):
        add(q, f"k{i}", now=0.0, run_at=0.0)
    a, b = JobQueue.open(tmp_path / "dal.db"), JobQueue.open(tmp_path / "dal.db")
    got: list[int] = []
    for conn in itertools.islice(itertools.cycle((a, b)), 45):
        job = claim(conn, owner=str(id(conn)), now=1.0)
        if job:
            got.append(job["job_id"])
    a.close()
    b.close()
    assert sorted(got) == list(range(1, 41))
