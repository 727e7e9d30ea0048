"""Connections to the PostgreSQL store are opened once per process and kept (issue 31): the worker's loop, each
job process's store and its key locks open none per job in steady state; a kept connection the server ended is
replaced, with the behaviour the store contract states (the schema checked again, the lock taken afresh)."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from dal.receipts.location import StoreLocation, open_store
from dal.receipts.pg import schema
from dal.receipts.store import StoreError
from tests.pg.world import World


def _open(url: str) -> Any:
    return open_store(StoreLocation.parse(url, "."))


def _counts(url: str) -> tuple[int, int]:
    """(sessions opened, transactions committed) in the database so far."""
    name = url.split("?", 1)[0].rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT pg_stat_clear_snapshot()")
        row = c.execute("SELECT sessions, xact_commit FROM pg_stat_database WHERE datname = %s", (name,)).fetchone()
    return int(row[0]), int(row[1])


def _lock_backend(url: str, key: str) -> int | None:
    from dal.receipts.pg.lock import lock_id

    with psycopg.connect(url, autocommit=True) as c:
        row = c.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
                        " AND classid = ((%s::bigint >> 32) & 4294967295)::bigint::oid"
                        " AND objid = (%s::bigint & 4294967295)::bigint::oid", (lock_id(key), lock_id(key))).fetchone()
    return row[0] if row else None


def _end_backend(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()[0]


def test_a_worker_running_many_jobs_opens_no_connection_per_job(world: World) -> None:
    world.write("job.dal", 'run("echo ran >> out.txt")\n')
    keys = [f"k{i}" for i in range(12)]
    world.submit_many("job.dal", keys, lambda _key: {})
    before = _counts(world.url)
    w = world.worker("--concurrency", "1", "--until-idle")
    assert w.wait(120) == 0, world.logs()
    assert world.lines("out.txt") == ["ran"] * len(keys)
    after = _counts(world.url)
    # The worker's check at its start, its loop's store and its waker, the job process's store and its key
    # lock (and this test's own look): a few, whatever the count of jobs. Each job opened two of its own
    # before (the loop's turn and the key lock): 24 and more here.
    opened = after[0] - before[0]
    assert opened <= 8, opened
    # docs/scale.md, "What a job commits": about 15 a job (30 before), start-up included.
    assert (after[1] - before[1]) / len(keys) <= 20, after[1] - before[1]


def test_a_process_keeps_its_key_lock_connection_and_replaces_one_the_server_ended(pg_url: str) -> None:
    with _open(pg_url) as store:
        first = store.operation_lock("k")
        first.acquire("run_20261201T100000000Z_aaaaaa", 0)
        backend = _lock_backend(pg_url, "k")
        first.release()
        assert _lock_backend(pg_url, "k") is None
        again = store.operation_lock("k2")
        again.acquire("run_20261201T100001000Z_bbbbbb", 0)
        assert _lock_backend(pg_url, "k2") == backend  # the same session, lent to one lock at a time
        # While it is lent, another lock of this process gets a session of its own: they still exclude.
        other = store.operation_lock("k3")
        other.acquire("run_20261201T100002000Z_cccccc", 0)
        assert _lock_backend(pg_url, "k3") not in (None, backend)
        other.release()
        again.release()
        assert backend is not None
        _end_backend(pg_url, backend)  # the kept session ends while idle (a restart, an administrator)
        third = store.operation_lock("k")
        third.acquire("run_20261201T100003000Z_dddddd", 0)
        now = _lock_backend(pg_url, "k")
        assert now is not None and now != backend
        assert (store.key_holder("k") or {}).get("run_id") == "run_20261201T100003000Z_dddddd"
        store.begin_run("run_20261201T100003000Z_dddddd", operation="k", key="k")
        store.journal_intent("run_20261201T100003000Z_dddddd", 1, "true", "read")  # fenced by the live lock
        third.release()


def test_a_connection_opened_again_checks_the_schema_again(pg_url: str) -> None:
    with _open(pg_url) as store:
        assert store.list_runs() == []
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute("INSERT INTO dal_schema (version) VALUES (%s)", (schema.SCHEMA_VERSION + 1,))
            mine = c.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                             " AND pid <> pg_backend_pid() AND application_name = 'dal'").fetchall()
            for (pid,) in mine:
                c.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        with pytest.raises(StoreError):
            store.list_runs()  # the statement that finds the connection gone
        with pytest.raises(StoreError, match="newer DAL"):
            store.list_runs()  # the new connection's first check, before its first use


def test_the_key_lock_row_names_the_holder_after_a_kept_connection_took_the_lock(pg_url: str) -> None:
    with _open(pg_url) as store:
        for n in range(3):
            lock = store.operation_lock("k")
            lock.acquire(f"run_20261201T10000{n}000Z_aaaaaa", 0)
            assert lock.lost_holder is None  # each let go on purpose: no lost holder however often reused
            with psycopg.connect(pg_url, autocommit=True) as c:
                row = c.execute("SELECT run_id, holder FROM key_locks WHERE key = 'k'").fetchone()
            assert row[0] == f"run_20261201T10000{n}000Z_aaaaaa"
            assert isinstance(row[1], dict) and row[1]  # where it runs: what the runner weighs if it is lost
            lock.release()


def test_normal_durability_is_the_sessions_once_and_full_each_commits_while_asked_for(pg_url: str) -> None:
    with _open(pg_url) as store:
        def commits_with() -> str:
            with store._write("looking") as c:  # noqa: SLF001 - the setting a commit of the store's has
                return str(c.execute("SHOW synchronous_commit").fetchone()[0])

        assert commits_with() == "on"  # FULL until the runner says otherwise
        store.set_synchronous("NORMAL")
        assert commits_with() == "off"
        store.set_synchronous("FULL")
        assert commits_with() == "on" and commits_with() == "on"
        store.set_synchronous("NORMAL")
        assert commits_with() == "off"


def test_the_queue_clock_is_the_databases_whatever_this_process_clock_says(pg_url: str,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with _open(pg_url) as store, psycopg.connect(pg_url, autocommit=True) as c:
        q = store.jobs()
        first = q.clock()
        monkeypatch.setattr(time, "time", lambda: 4_000_000_000.0)  # this process's wall clock stepped
        later = q.clock()
        db = float(c.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0])
        assert first <= later and abs(later - db) < 1.0


def test_closing_the_store_closes_the_lock_connections_its_process_kept(pg_url: str) -> None:
    def dal_sessions() -> int:
        with psycopg.connect(pg_url, autocommit=True) as c:
            return int(c.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                 " AND application_name = 'dal'").fetchone()[0])

    store = _open(pg_url)
    for key in ("a", "b"):
        lock = store.operation_lock(key)
        lock.acquire("run_20261201T100000000Z_aaaaaa", 0)
        lock.release()
    assert dal_sessions() == 2  # the store's, and the one lock connection kept for the next lock
    store.close()
    deadline = time.monotonic() + 5  # a closed session's backend leaves pg_stat_activity as it exits
    while dal_sessions() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dal_sessions() == 0
