"""The job queue in the run store: jobs, their leases and fencing, workers, schedules (docs/workers.md).

A job queue is a few tables, one partial unique index and one claiming statement:

- one open job per operation key (the unique index `jobs_open_key`), so `dal submit` of a key that has
  an open job returns that job;
- a claim is one `UPDATE ... WHERE job_id = (SELECT ...) RETURNING *` under `BEGIN IMMEDIATE`: it takes
  the best job whose time has come (a ready or scheduled job, or a running one whose lease expired) and
  adds one to its lease epoch;
- every state change is one guarded UPDATE whose allowed from-states come from TRANSITIONS, the one table
  of the job's life;
- fencing: a journal write of an effect's intent (Store.journal_intent, journal_hold) given a Fence checks,
  in its own transaction, that the job is still running under that epoch and owner with a lease that has
  not run out (check_fence); otherwise it raises Fenced and writes nothing.

The operations take a raw sqlite3 connection (a worker opens one per loop turn and closes it before it
forks: a connection must never cross fork()) or a Store (the commands), through JobQueue.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from dal.receipts import storefile
from dal.receipts.errors import Fenced, IllegalTransition, StoreError  # noqa: F401 - names in use
from dal.receipts.jobstates import (  # noqa: F401 - names in use
    OPEN_STATES,
    STATES,
    TERMINAL,
    TRANSITIONS,
    Fence,
    operator_target,
    target,
)
from dal.receipts.store import Store, busy_timeout, describe_error

T = TypeVar("T")

def _in(states: frozenset[str] | Sequence[str]) -> str:
    return "(" + ", ".join(f"'{s}'" for s in sorted(states)) + ")"


def check_fence(conn: sqlite3.Connection, fence: Fence, now: float | None = None) -> None:
    """Inside a write transaction: raise Fenced unless job `fence.job_id` is running under `fence.epoch`
    and `fence.owner` with a lease that has not run out at `now`."""
    now = time.time() if now is None else now
    row = conn.execute(
        "SELECT state, lease_epoch, lease_owner, lease_until FROM jobs WHERE job_id = ?", (fence.job_id,)
    ).fetchone()
    if row is None:
        raise Fenced(f"job {fence.job_id} is not in the run store: this worker no longer runs it")
    state, epoch, owner, until = row
    if state == "cancelled":
        raise Fenced(f"job {fence.job_id} was cancelled: this worker stops running it")
    if epoch != fence.epoch or owner != fence.owner:
        raise Fenced(f"job {fence.job_id} was taken over by {owner or 'another worker'} (lease epoch {epoch}; "
                     f"this worker held epoch {fence.epoch}): this worker no longer runs it, and the job goes on "
                     "from its journal where it runs now")
    if state != "running":
        raise Fenced(f"job {fence.job_id} is {state}: this worker no longer runs it")
    if until is None or until < now:
        raise Fenced(f"the lease of job {fence.job_id} ran out {now - (until or now):.1f} s ago and was not "
                     "renewed (the worker was paused or cut off): this worker starts no new effect of it; another "
                     "worker takes it over and goes on from its journal")


def record_holder(conn: sqlite3.Connection, fence: Fence, holder: dict[str, Any]) -> bool:
    """Inside a write transaction: record `holder` (pid, start time, boot id, worker) as the process that runs
    job `fence.job_id`, if it still runs under that fence; whether it did."""
    cur = conn.execute(
        "UPDATE jobs SET holder = ? WHERE job_id = ? AND lease_epoch = ? AND lease_owner = ? AND state = 'running'",
        (json.dumps(holder), fence.job_id, fence.epoch, fence.owner),
    )
    return cur.rowcount == 1


def _dicts(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def connect(path: str | os.PathLike[str], *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """A plain connection to a store that a Store has already opened (checked, migrated) once. Workers use
    it for their short transactions and close it before every fork()."""
    conn = sqlite3.connect(str(path), timeout=busy_timeout(), isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout() * 1000)}")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    return conn


class JobQueue:
    """The queue's operations over one connection: `JobQueue(conn, path)` for a plain connection,
    `JobQueue.of(store)` for a Store (its lock and its read-only handling)."""

    def __init__(self, conn: sqlite3.Connection | None, path: Path, store: Store | None = None) -> None:
        self.conn = conn
        self.path = Path(path)
        self._store = store
        self._lock = threading.RLock()
        self._held: tuple[int, int] | None = None  # storefile.hold(): this process has the store open

    @classmethod
    def of(cls, store: Store) -> JobQueue:
        return cls(None, store.path, store)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> JobQueue:
        p = Path(path)
        try:
            q = cls(connect(p), p)
        except sqlite3.Error as e:
            raise describe_error(e, p, "opening it") from None
        try:
            q.conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone()  # type: ignore[union-attr]
        except sqlite3.Error:
            return q  # its first real statement says what is wrong
        q._held = storefile.hold(p)  # it holds the -shm file's DMS lock from now on
        return q

    def close(self) -> None:
        if self.conn is not None:
            storefile.let_go(self._held)
            self._held = None
            self.conn.close()
            self.conn = None

    def __enter__(self) -> JobQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def clock(self) -> float:
        """The time that decides what is due: this machine's, the only one an embedded store's workers share."""
        return time.time()

    # -- plumbing ------------------------------------------------------------------------------------

    @contextmanager
    def _tx(self, doing: str) -> Iterator[sqlite3.Connection]:
        if self._store is not None:
            with self._store._write(doing) as c:  # noqa: SLF001 - the store's one write path
                yield c
            return
        assert self.conn is not None, "the queue's connection is closed"
        with self._lock:
            conn = self.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise describe_error(e, self.path, doing) from None

    def _read(self, doing: str, fn: Callable[[sqlite3.Connection], T], empty: T) -> T:
        def guarded(c: sqlite3.Connection) -> T:
            has = c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").fetchone()
            return fn(c) if has else empty  # a store from before the queue (read-only: never migrated)

        if self._store is not None:
            return self._store._read(doing, guarded)  # noqa: SLF001
        assert self.conn is not None, "the queue's connection is closed"
        with self._lock:
            try:
                return guarded(self.conn)
            except sqlite3.Error as e:
                raise describe_error(e, self.path, doing) from None

    # -- submitting ----------------------------------------------------------------------------------

    def open_job(self, key: str) -> dict[str, Any] | None:
        """The open job of `key`, if any."""
        return self._read(
            f"looking up the job of {key!r}",
            lambda c: next(iter(_dicts(c.execute(
                f"SELECT * FROM jobs WHERE key = ? AND state IN {_in(OPEN_STATES)}", (key,)))), None),
            None,
        )

    def submit(
        self,
        *,
        spec: dict[str, Any],
        key: str | None,
        queue: str,
        priority: int,
        run_at: float,
        max_attempts: int,
        host: str,
        movable: bool,
        schedule: str | None = None,
        now: float | None = None,
        conn: sqlite3.Connection | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Add a job (state ready, or scheduled when `run_at` is later than `now`). Returns (job, True), or
        (the open job of `key`, False) when the key already has one. Without a key the job's key is
        `job:<job id>`."""
        now = time.time() if now is None else now

        def add(c: sqlite3.Connection) -> tuple[dict[str, Any], bool]:
            if key is not None:
                have = _dicts(c.execute(f"SELECT * FROM jobs WHERE key = ? AND state IN {_in(OPEN_STATES)}", (key,)))
                if have:
                    return have[0], False
            state = "scheduled" if run_at > now else "ready"
            cur = c.execute(
                "INSERT INTO jobs (queue, key, spec, state, priority, run_at, max_attempts, host, movable, schedule,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (queue, key if key is not None else f"job:pending:{os.urandom(8).hex()}", json.dumps(spec), state,
                 priority, run_at, max_attempts, host, int(movable), schedule, now, now),
            )
            job_id = cur.lastrowid
            if key is None:
                c.execute("UPDATE jobs SET key = ? WHERE job_id = ?", (f"job:{job_id}", job_id))
            return _dicts(c.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)))[0], True

        if conn is not None:
            return add(conn)
        with self._tx("submitting a job") as c:
            return add(c)

    # -- reading -------------------------------------------------------------------------------------

    def get(self, job_id: int) -> dict[str, Any] | None:
        return self._read(
            f"reading job {job_id}",
            lambda c: next(iter(_dicts(c.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)))), None),
            None,
        )

    def list(self, *, state: str | None = None, queue: str | None = None, key: str | None = None,
             limit: int | None = 100) -> list[dict[str, Any]]:
        """Jobs, newest first."""
        clauses, args = [], []
        for col, val in (("state", state), ("queue", queue), ("key", key)):
            if val is not None:
                clauses.append(f"{col} = ?")
                args.append(val)
        sql = "SELECT * FROM jobs" + (" WHERE " + " AND ".join(clauses) if clauses else "") + " ORDER BY job_id DESC"
        if limit is not None:
            sql += f" LIMIT {max(0, int(limit))}"
        return self._read("listing jobs", lambda c: _dicts(c.execute(sql, args)), [])

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state."""
        return self._read(
            "counting jobs",
            lambda c: {s: n for s, n in c.execute("SELECT state, count(*) FROM jobs GROUP BY state")},
            {},
        )

    def counts_by_queue(self) -> dict[tuple[str, str], int]:
        """How many jobs are in each (state, queue)."""
        return self._read(
            "counting jobs",
            lambda c: {(s, q): n for s, q, n in c.execute(
                "SELECT state, queue, count(*) FROM jobs GROUP BY state, queue")},
            {},
        )

    # -- claiming, leases, fencing -------------------------------------------------------------------

    def running_leases(self, queues: Sequence[str], host: str) -> list[tuple[int, int, float, str | None]]:
        """(job_id, lease_epoch, lease_until, lease_owner) of the running jobs a worker of `queues` on `host`
        could take over: what a worker watches to see a lease go unrenewed (dal/worker/worker.py)."""
        marks = ", ".join("?" * len(queues))
        return self._read("watching the leases", lambda c: [tuple(r) for r in c.execute(
            f"SELECT job_id, lease_epoch, lease_until, lease_owner FROM jobs WHERE state = 'running'"
            f" AND queue IN ({marks}) AND (movable = 1 OR host = ?)", (*queues, host)).fetchall()], [])

    def claim(self, *, owner: str, queues: Sequence[str], host: str, lease: float,
              now: float | None = None,
              stale: Sequence[tuple[int, int, float]] | None = None) -> dict[str, Any] | None:
        """The best job whose time has come, claimed (claim_some with a limit of one), or None."""
        got = self.claim_some(owner=owner, queues=queues, host=host, lease=lease, limit=1, now=now, stale=stale)
        return got[0] if got else None

    def claim_some(self, *, owner: str, queues: Sequence[str], host: str, lease: float, limit: int,
                   now: float | None = None,
                   stale: Sequence[tuple[int, int, float]] | None = None) -> list[dict[str, Any]]:
        """Take up to `limit` of the best jobs whose time has come, best first, in one statement (a worker
        with room for several claims them in one transaction: one turn of the write lock). Each claimed job
        gets its own lease epoch, its fence. The best job: the highest priority, then the earliest
        run_at; a ready or scheduled job, or a running one whose lease ran out (a takeover: took_over and
        stale_since keep who had it). A job that is not movable is only claimed on the host that submitted
        it. Returns the claimed jobs (each one's new lease_epoch is its fence), best first.

        `stale`: the (job_id, lease_epoch, lease_until) of running jobs the caller itself saw go unrenewed
        for a whole lease of its own monotonic clock; only those are taken over, and only while their lease
        is still exactly as seen (a renewal in between keeps the job where it is). A worker always passes
        it, so that no worker judges a lease by comparing its wall clock with the holder's (a clock stepped
        ahead would take over live jobs). None: the lease's end compared with `now` (tests of the table)."""
        now = time.time() if now is None else now
        marks = ", ".join("?" * len(queues))
        if stale is None:
            running, running_args = "lease_until < ?", [now]
        elif stale:
            running = "(" + " OR ".join(["(job_id = ? AND lease_epoch = ? AND lease_until = ?)"] * len(stale)) + ")"
            running_args = [v for triple in stale for v in triple]
        else:
            running, running_args = "0 = 1", []
        sql = (
            "UPDATE jobs SET state = 'running', lease_owner = ?, lease_until = ?, lease_epoch = lease_epoch + 1,"
            " attempts = attempts + 1, updated_at = ?,"
            " took_over = CASE WHEN state = 'running' THEN holder END,"
            " stale_since = CASE WHEN state = 'running' THEN lease_until END,"
            " note = CASE WHEN state = 'running' THEN 'taken over from ' || COALESCE(lease_owner, '?')"
            " || ' (its lease ran out)' ELSE note END,"
            " holder = NULL"
            " WHERE job_id IN (SELECT job_id FROM jobs WHERE"
            f" ((state IN {_in(TRANSITIONS['claim'][0])} AND run_at <= ?) OR (state = 'running' AND {running}))"
            f" AND queue IN ({marks}) AND (movable = 1 OR host = ?)"
            " ORDER BY priority DESC, run_at, job_id LIMIT ?)"
            " RETURNING *"
        )
        if limit < 1:
            return []
        with self._tx("claiming a job" if limit == 1 else "claiming jobs") as c:
            # (the order of the rows RETURNING gives is SQLite's: sorted here as the subquery chose them)
            order = _dicts(c.execute(sql, (owner, now + lease, now, now, *running_args, *queues, host, int(limit))))
        # run_at as it was claimed: a takeover keeps its run_at, a ready job's was at most `now`
        return sorted(order, key=lambda j: (-j["priority"], j["run_at"], j["job_id"]))

    def heartbeat(self, fence: Fence, lease: float, now: float | None = None) -> bool:
        """Extend the lease of a job this worker runs; False when it is no longer this worker's (taken over,
        cancelled, routed)."""
        now = time.time() if now is None else now
        with self._tx(f"renewing the lease of job {fence.job_id}") as c:
            cur = c.execute(
                "UPDATE jobs SET lease_until = ? WHERE job_id = ? AND lease_epoch = ? AND lease_owner = ?"
                " AND state = 'running'",
                (now + lease, fence.job_id, fence.epoch, fence.owner),
            )
            return cur.rowcount == 1

    def set_holder(self, fence: Fence, holder: dict[str, Any]) -> bool:
        """Record the process that runs the job now (pid, start time, boot id); False when fenced. A
        worker's run records it with the run instead (Store.begin_run's `fence`, record_holder)."""
        with self._tx(f"recording who runs job {fence.job_id}") as c:
            return record_holder(c, fence, holder)

    def route(
        self,
        fence: Fence,
        event: str,
        *,
        run_at: float | None = None,
        failures: int | None = None,
        streak: int | None = None,
        run: dict[str, Any] | None = None,
        waits_on: Sequence[int] = (),
        note: str | None = None,
        now: float | None = None,
    ) -> str | None:
        """Move a job this worker ran by `event` (done, resume, backoff, dead, park, wait, drain), with the
        facts of its last run (`run`: run_id, status, retry). Guarded by the fence: returns the new state,
        or None when the job is no longer this worker's (nothing changes then).

        `wait` checks, in the same transaction, whether a person already decided about an effect the run
        waits on (recorded for that run): then the job goes to ready at once. `dal approve` wakes a waiting
        job after it records its decision (wake_key), so either side sees the other."""
        now = time.time() if now is None else now
        to = TRANSITIONS[event][1]
        run = run or {}
        with self._tx(f"routing job {fence.job_id}") as c:
            mark = None
            if event == "wait":
                mark = c.execute("SELECT max(id) FROM approvals").fetchone()[0] or 0
                seqs = [int(s) for s in waits_on]
                if run.get("run_id") and seqs and c.execute(
                    f"SELECT 1 FROM approvals WHERE run_id = ? AND seq IN ({', '.join('?' * len(seqs))}) LIMIT 1",
                    (run["run_id"], *seqs),
                ).fetchone():
                    to, note = "ready", (note or "") + "; a decision was already recorded: ready again"
            cur = c.execute(
                "UPDATE jobs SET state = ?, run_at = COALESCE(?, run_at), failures = COALESCE(?, failures),"
                " streak = COALESCE(?, streak), last_run_id = COALESCE(?, last_run_id),"
                " last_status = COALESCE(?, last_status), last_retry = COALESCE(?, last_retry),"
                " waits_on = ?, decision_mark = ?, note = ?, updated_at = ?,"
                " lease_owner = NULL, lease_until = NULL, holder = NULL,"
                " finished_at = CASE WHEN ? IN ('done', 'dead') THEN ? ELSE finished_at END"
                f" WHERE job_id = ? AND lease_epoch = ? AND lease_owner = ? AND state IN {_in(TRANSITIONS[event][0])}",
                (to, run_at if to in ("scheduled", "ready") else None, failures, streak, run.get("run_id"),
                 run.get("status"), run.get("retry"), json.dumps(list(waits_on)) if waits_on else None, mark, note,
                 now, to, now, fence.job_id, fence.epoch, fence.owner),
            )
            return to if cur.rowcount == 1 else None

    # -- an operator's and a person's moves ----------------------------------------------------------

    def wake_key(self, key: str, now: float | None = None) -> int:
        """A decision was recorded for the operation `key`: its waiting job is ready again. Returns how many
        jobs woke (0 or 1)."""
        now = time.time() if now is None else now
        with self._tx(f"waking the job of {key!r}") as c:
            if not c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").fetchone():
                return 0
            return c.execute(
                "UPDATE jobs SET state = 'ready', run_at = ?, updated_at = ?, note = 'woken: a decision was recorded'"
                " WHERE key = ? AND state = 'waiting'",
                (now, now, key),
            ).rowcount

    def sweep_waiting(self, now: float | None = None) -> int:
        """Wake every waiting job whose operation got a decision since it went waiting, or a newer run
        (someone resumed it by hand): the safety net behind wake_key (a `dal approve` that died between
        recording its decision and waking the job)."""
        now = time.time() if now is None else now
        # A worker asks at every turn of its loop: a read first, so that a queue with nothing waiting costs
        # no write transaction (and no turn of the store's write lock that the runs are waiting for).
        if not self._read("looking for waiting jobs",
                          lambda c: c.execute("SELECT 1 FROM jobs WHERE state = 'waiting' LIMIT 1").fetchone(), None):
            return 0
        with self._tx("waking decided jobs") as c:
            return c.execute(
                "UPDATE jobs SET state = 'ready', run_at = ?, updated_at = ?, note = 'woken: a decision was recorded'"
                " WHERE state = 'waiting' AND (EXISTS (SELECT 1 FROM approvals a JOIN runs r ON r.run_id = a.run_id"
                " WHERE r.key = jobs.key AND a.id > COALESCE(jobs.decision_mark, 0))"
                " OR EXISTS (SELECT 1 FROM runs r WHERE r.key = jobs.key AND r.run_id > jobs.last_run_id))",
                (now, now),
            ).rowcount

    def retry(self, job_id: int, now: float | None = None, note: str = "retried by an operator") -> dict[str, Any]:
        """`dal job retry`: a parked, waiting, scheduled, dead or cancelled job is ready again, with its
        failures and crash streak cleared. IllegalTransition when it is in no such state, StoreError when
        its key has another open job."""
        return self._operator(job_id, "retry", now, note,
                              "failures = 0, streak = 0, run_at = :now, finished_at = NULL,")

    def cancel(self, job_id: int, now: float | None = None, note: str = "cancelled by an operator") -> dict[str, Any]:
        """`dal job cancel`: the job ends as cancelled. A running job's lease epoch grows by one, so the run
        under way can journal no new effect (it stops as interrupted; its journal stays the operation's)."""
        return self._operator(job_id, "cancel", now, note,
                              "lease_epoch = lease_epoch + 1, lease_owner = NULL, lease_until = NULL,"
                              " finished_at = :now,")

    def _operator(self, job_id: int, event: str, now: float | None, note: str, sets: str) -> dict[str, Any]:
        now = time.time() if now is None else now
        with self._tx(f"{event} of job {job_id}") as c:
            got = _dicts(c.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)))
            to = operator_target(got[0] if got else None, job_id, event, self.path, lambda key: next(iter(_dicts(
                c.execute(f"SELECT job_id, state FROM jobs WHERE key = ? AND state IN {_in(OPEN_STATES)}", (key,)))),
                None))
            c.execute(f"UPDATE jobs SET state = :to, {sets} updated_at = :now, note = :note WHERE job_id = :id",
                      {"to": to, "now": now, "note": note, "id": job_id})
            return _dicts(c.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)))[0]

    # -- workers -------------------------------------------------------------------------------------

    def register_worker(self, row: dict[str, Any]) -> None:
        cols = ", ".join(row)
        with self._tx("registering a worker") as c:
            c.execute(f"INSERT INTO workers ({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))

    def worker_beat(self, worker_id: str, *, state: str, running: int, done: int, now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._tx("recording a worker's heartbeat") as c:
            c.execute(
                "UPDATE workers SET state = ?, running = ?, done = ?, heartbeat_at = ?,"
                " stopped_at = CASE WHEN ? = 'stopped' THEN ? ELSE stopped_at END WHERE worker_id = ?",
                (state, running, done, now, state, now, worker_id),
            )

    def workers(self, *, limit: int | None = 100) -> list[dict[str, Any]]:
        """Workers, the most recently started first."""
        sql = "SELECT * FROM workers ORDER BY started_at DESC" + (f" LIMIT {int(limit)}" if limit is not None else "")

        def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
            if not c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'workers'").fetchone():
                return []
            return _dicts(c.execute(sql))

        return self._read("listing workers", read, [])

    # -- schedules -----------------------------------------------------------------------------------

    def add_schedule(self, row: dict[str, Any]) -> None:
        with self._tx(f"adding the schedule {row['name']!r}") as c:
            if c.execute("SELECT 1 FROM schedules WHERE name = ?", (row["name"],)).fetchone():
                raise StoreError(f"a schedule named {row['name']!r} exists already (dal schedule remove "
                                 f"{row['name']} first, or choose another name)", self.path)
            c.execute(f"INSERT INTO schedules ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                      tuple(row.values()))

    def schedules(self, *, due: float | None = None) -> list[dict[str, Any]]:
        """Every schedule by name; with `due`, only the active ones whose next slot has come by then."""
        if due is None:
            sql, args = "SELECT * FROM schedules ORDER BY name", ()
        else:
            sql, args = "SELECT * FROM schedules WHERE state = 'active' AND next_at <= ? ORDER BY name", (due,)

        def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
            if not c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schedules'").fetchone():
                return []
            return _dicts(c.execute(sql, args))

        return self._read("listing schedules", read, [])

    def set_schedule(self, name: str, *, state: str | None = None, next_at: float | None = None,
                     remove: bool = False, now: float | None = None) -> bool:
        """Pause, resume (with its next slot) or remove a schedule; False when there is no such schedule."""
        now = time.time() if now is None else now
        with self._tx(f"changing the schedule {name!r}") as c:
            if remove:
                return c.execute("DELETE FROM schedules WHERE name = ?", (name,)).rowcount == 1
            return c.execute(
                "UPDATE schedules SET state = COALESCE(?, state), next_at = COALESCE(?, next_at), updated_at = ?"
                " WHERE name = ?", (state, next_at, now, name),
            ).rowcount == 1

    def fire(self, name: str, *, seen_next_at: float, slot: float | None, key: str, next_at: float, missed: int,
             now: float | None = None) -> dict[str, Any] | None:
        """Turn slot `slot` of schedule `name` into a job (key `key`) and move its next slot to `next_at`, in
        one transaction, only if the schedule's next slot is still `seen_next_at` (another worker did not
        fire it first). `slot` None: only move on (no slot came). Returns the job made, or None."""
        now = time.time() if now is None else now
        with self._tx(f"firing the schedule {name!r}") as c:
            rows = _dicts(c.execute("SELECT * FROM schedules WHERE name = ? AND state = 'active' AND next_at = ?",
                                    (name, seen_next_at)))
            if not rows:
                return None
            sched = rows[0]
            job = None
            if slot is not None:
                job, _ = self.submit(spec=json.loads(sched["spec"]), key=key, queue=sched["queue"],
                                     priority=sched["priority"], run_at=now, max_attempts=sched["max_attempts"],
                                     host=sched["host"], movable=bool(sched["movable"]), schedule=name, now=now, conn=c)
            c.execute(
                "UPDATE schedules SET next_at = ?, last_slot = COALESCE(?, last_slot),"
                " last_job = COALESCE(?, last_job), missed = missed + ?, updated_at = ? WHERE name = ?",
                (next_at, slot, job["job_id"] if job else None, missed, now, name),
            )
            return job
