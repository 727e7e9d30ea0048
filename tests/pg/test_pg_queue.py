"""What the PostgreSQL store makes the database enforce, checked against a real server with real concurrency:
fencing in the journal's INSERT, claims that never hand one job to two workers, one open job per key under
concurrent submits, migrations run once by many starters, leases timed by the database's clock, a takeover
waiting for a journal write in flight, and the wake-ups on submit, decision and requeue (never per journal
write)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dal.receipts.jobs import Fence, Fenced
from dal.receipts.location import StoreLocation, open_store
from dal.receipts.pg.jobs import Waker

REPO = Path(__file__).resolve().parents[2]


def _open(url: str) -> Any:
    return open_store(StoreLocation.parse(url, "."))


def _submit(q: Any, key: str | None, **kw: Any) -> tuple[dict[str, Any], bool]:
    args: dict[str, Any] = {"spec": {"script": "/w/s.dal"}, "key": key, "queue": "default", "priority": 0,
                            "run_at": 0.0, "max_attempts": 3, "host": "h", "movable": True}
    args.update(kw)
    return q.submit(**args)


def test_a_worker_whose_lease_was_taken_over_journals_nothing(pg_url: str) -> None:
    with _open(pg_url) as s:
        q = s.jobs()
        job, _ = _submit(q, "k")
        first = q.claim(owner="w1", queues=["default"], host="h", lease=0.5)
        old = Fence(first["job_id"], first["lease_epoch"], "w1")
        s.begin_run("run_1", operation="k", key="k")
        s.journal_intent("run_1", 1, "echo a", "local", fence=old)  # the lease holds: written
        time.sleep(0.7)  # the lease ran out by the database's clock
        with pytest.raises(Fenced, match="ran out"):
            s.journal_intent("run_1", 2, "echo b", "local", fence=old)
        second = q.claim(owner="w2", queues=["default"], host="h", lease=30)
        assert second["lease_epoch"] == first["lease_epoch"] + 1 and "taken over from w1" in second["note"]
        with pytest.raises(Fenced, match="taken over by w2"):
            s.journal_intent("run_1", 2, "echo b", "local", fence=old)
        with pytest.raises(Fenced, match="taken over by w2"):
            s.journal_hold("run_1", 3, "send", "external", detail={"hold": "approval"}, fence=old)
        assert [e["seq"] for e in s.journal("run_1")] == [1]  # nothing written for the fenced worker
        assert q.heartbeat(old, 30) is False and q.route(old, "done") is None
        new = Fence(second["job_id"], second["lease_epoch"], "w2")
        s.journal_intent("run_1", 2, "echo b", "local", fence=new)
        assert [e["seq"] for e in s.journal("run_1")] == [1, 2]


def test_no_takeover_while_a_journal_write_is_in_flight_and_the_next_write_is_fenced(pg_url: str) -> None:
    """The fence's share lock: a claim passes over a job whose old holder is journaling under its lease right
    now (SKIP LOCKED), so the new holder never reads the journal before that intent; once the write is over,
    the job is taken over and the old holder's next write is fenced."""
    with _open(pg_url) as s:
        q = s.jobs()
        _submit(q, "k")
        got = q.claim(owner="w1", queues=["default"], host="h", lease=1.0)
        s.begin_run("run_1", operation="k", key="k")
    old = Fence(got["job_id"], got["lease_epoch"], "w1")
    held = psycopg.connect(pg_url)
    held.execute("SELECT 1 FROM jobs WHERE job_id = %s FOR SHARE", (old.job_id,))  # a journal write in flight
    claimed: list[Any] = []

    def take_over() -> None:
        with _open(pg_url) as other:
            claimed.append(other.jobs().claim(owner="w2", queues=["default"], host="h", lease=30))

    time.sleep(1.2)  # the lease ran out by the database's clock
    t = threading.Thread(target=take_over)
    t.start()
    t.join(10)
    assert claimed == [None]  # the lease ran out, but the row is share-locked by the write: not claimed
    held.rollback()
    held.close()
    with _open(pg_url) as s:
        again = s.jobs().claim(owner="w2", queues=["default"], host="h", lease=30)
        assert again is not None and again["lease_owner"] == "w2"
        with pytest.raises(Fenced):
            s.journal_intent("run_1", 1, "echo a", "local", fence=old)


def test_workers_claiming_at_once_never_get_the_same_job(pg_url: str) -> None:
    with _open(pg_url) as s:
        q = s.jobs()
        for i in range(60):
            _submit(q, f"k{i}")
    got: list[int] = []
    guard = threading.Lock()

    def worker(name: str) -> None:
        with _open(pg_url) as mine:
            q = mine.jobs()
            while (job := q.claim(owner=name, queues=["default"], host="h", lease=60)) is not None:
                with guard:
                    got.append(job["job_id"])

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(got) == list(range(1, 61))  # every job once


def test_concurrent_submits_of_one_key_make_one_job(pg_url: str) -> None:
    _open(pg_url).close()
    results: list[tuple[int, bool]] = []
    guard = threading.Lock()
    start = threading.Barrier(8)

    def submit() -> None:
        with _open(pg_url) as s:
            start.wait()
            job, added = _submit(s.jobs(), "only")
            with guard:
                results.append((job["job_id"], added))

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len({j for j, _ in results}) == 1 and sum(added for _, added in results) == 1


def test_many_processes_starting_on_an_empty_database_migrate_it_once(pg_url: str) -> None:
    code = ("import sys; from dal.receipts.location import StoreLocation, open_store; "
            "open_store(StoreLocation.parse(sys.argv[1], '.')).close(); print('ok')")
    procs = [subprocess.Popen([sys.executable, "-c", code, pg_url], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(5)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [o[0].strip() for o in outs] == ["ok"] * 5, [o[1] for o in outs]
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT version FROM dal_schema ORDER BY version").fetchall() == [(1,), (2,)]


def test_leases_are_timed_by_the_database_clock_whatever_the_workers_clock_says(pg_url: str) -> None:
    with _open(pg_url) as s, psycopg.connect(pg_url) as c:
        q = s.jobs()
        _submit(q, "k")
        skewed = time.time() - 3600  # a worker whose clock is an hour behind
        job = q.claim(owner="w", queues=["default"], host="h", lease=30, now=skewed)
        db_now = c.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]
        assert abs(job["lease_until"] - (db_now + 30)) < 2
        fence = Fence(job["job_id"], job["lease_epoch"], "w")
        s.begin_run("run_1", operation="k", key="k")
        s.journal_intent("run_1", 1, "echo", "read", fence=fence)  # not fenced by its own clock's skew
        assert q.heartbeat(fence, 30, now=skewed)
        assert q.claim(owner="w2", queues=["default"], host="h", lease=30, now=time.time() + 3600) is None


def test_wakeups_come_on_submit_decision_and_requeue_but_not_on_journal_writes(pg_url: str) -> None:
    with _open(pg_url) as s:
        waker = Waker(pg_url)
        try:
            assert waker.fileno() >= 0 and waker.drain() == 0
            job, _ = _submit(s.jobs(), "k")
            assert waker.wait(5) is True  # submit
            claimed = s.jobs().claim(owner="w", queues=["default"], host="h", lease=30)
            fence = Fence(claimed["job_id"], claimed["lease_epoch"], "w")
            s.begin_run("run_1", operation="k", key="k")
            for seq in range(1, 6):
                s.journal_intent("run_1", seq, "echo", "read", fence=fence)
                s.journal_result("run_1", seq, {"status": "completed"})
            assert waker.wait(0.5) is False  # journal writes wake nobody
            assert s.jobs().route(fence, "resume") == "ready"
            assert waker.wait(5) is True  # requeue
            s.record_approval("run_1", 2, "approve", who="ops")
            assert waker.wait(5) is True  # decision
        finally:
            waker.close()


def test_a_value_jsonb_cannot_hold_comes_back_whole(pg_url: str) -> None:
    with _open(pg_url) as s:
        s.begin_run("run_1", operation="k", policy={"note": "nul\x00 and \ud83d alone"})
        s.journal_intent("run_1", 1, "printf", "read", detail={"arg": "a\x00b"})
        s.journal_result("run_1", 1, {"status": "completed", "stdout": "bin\x00ary \udcff\n"})
        row = s.journal("run_1")[0]
        assert row["detail"] == {"arg": "a\x00b"} and row["result"]["stdout"] == "bin\x00ary \udcff\n"
        assert s.run_row("run_1")["policy"] == {"note": "nul\x00 and \ud83d alone"}
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT jsonb_typeof(detail) FROM effects").fetchone() == ("object",)


def test_two_workers_firing_one_schedule_slot_make_one_job(pg_url: str) -> None:
    pytest.importorskip("cronsim")
    import json

    from dal.worker.schedules import fire_due

    now = time.time()
    row = {"name": "nightly", "cron": "* * * * *", "tz": "UTC", "state": "active",
           "spec": json.dumps({"script": "/w/s.dal"}), "queue": "default", "priority": 0, "max_attempts": 3,
           "host": "h", "movable": 1, "next_at": now - 120, "missed": 0, "created_at": now, "updated_at": now}
    with _open(pg_url) as s:
        s.jobs().add_schedule(row)
    made: list[Any] = []
    start = threading.Barrier(2)

    def fire() -> None:
        with _open(pg_url) as mine:
            start.wait()
            made.extend(fire_due(mine.jobs(), now))

    threads = [threading.Thread(target=fire) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    with _open(pg_url) as s:
        jobs = s.jobs().list(limit=None)
        sched = s.jobs().schedules()[0]
    assert len(made) == 1 and len(jobs) == 1 and jobs[0]["schedule"] == "nightly"
    assert json.loads(jobs[0]["spec"]) == {"script": "/w/s.dal"} and sched["next_at"] > now


def test_jobs_are_counted_by_state_and_queue(pg_url: str) -> None:
    """What the worker's metrics show (dal_worker_jobs{state, queue}), as the SQLite store counts them."""
    with _open(pg_url) as s:
        q = s.jobs()
        _submit(q, "a1", queue="a")
        _submit(q, "a2", queue="a")
        _submit(q, "b1", queue="b")
        assert q.claim(owner="w1", queues=["b"], host="h", lease=30) is not None
        assert q.counts_by_queue() == {("ready", "a"): 2, ("running", "b"): 1}
