"""The job queue in the PostgreSQL store (contract.JobStore): the SQLite queue's operations (dal/receipts/jobs.py,
the same TRANSITIONS guard every state change), written for many workers on many hosts:

- a claim is one `UPDATE ... WHERE job_id = (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING *`: workers claiming
  at once pass over each other's rows instead of queueing on them, and the lease epoch grows by one;
- leases are written and read by the database's clock only (a caller's `now` decides only which scheduled
  jobs are due): a worker's clock skewed either way neither takes over a live job nor fences its own; the
  fence is checked by the journal's own INSERT against the same clock (PgStore._put_entry);
- one open job per key is the partial unique index `jobs_open_key`: two submits of one key at once make one
  job (`ON CONFLICT ... DO NOTHING`, then the open job is read);
- submit, decisions and requeues send `NOTIFY dal_jobs` (delivered at commit); idle workers LISTEN (`Waker`)
  and poll as well, so a lost notification only delays a job by a poll.

Rows come back in the SQLite queue's shape (spec as JSON text, movable 0/1), so callers need not know the
store's kind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dal.receipts.errors import StoreError
from dal.receipts.jobstates import OPEN_STATES, TERMINAL, TRANSITIONS, Fence, operator_target

if TYPE_CHECKING:
    from dal.receipts.pg.store import PgStore

CHANNEL = "dal_jobs"
# How long clock() carries a reading of the database's clock forward by the monotonic clock (their rates
# differ by parts per million: microseconds here).
CLOCK_READ_EVERY = 30.0
_DB_NOW = "SELECT extract(epoch FROM clock_timestamp())::float8"


def _in(states: Sequence[str] | frozenset[str]) -> str:
    return "(" + ", ".join(f"'{s}'" for s in sorted(states)) + ")"


def _job(row: dict[str, Any]) -> dict[str, Any]:
    from dal.receipts.pg.store import unjsonb

    if "spec" in row and not isinstance(row["spec"], str):
        row["spec"] = json.dumps(unjsonb(row["spec"]))
    return row


class PgJobQueue:
    """The queue's operations over a PgStore's connection (its lock, its error messages)."""

    def __init__(self, store: PgStore, *, owned: bool = False) -> None:
        self.store = store
        self.path = store.path
        self._owned = owned

    def close(self) -> None:
        """Close the store too when the queue owns it (a worker's queue of one loop turn)."""
        if self._owned:
            self.store.close()

    def __enter__(self) -> PgJobQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self, doing: str) -> Iterator[Any]:
        with self.store._write(doing) as c:  # noqa: SLF001 - the store's one write path
            yield c

    def _rows(self, doing: str, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return self.store._read(doing, lambda c: [_job(r) for r in self.store._dicts(c.execute(sql, args))])  # noqa: SLF001

    def clock(self) -> float:
        """The database's clock: a worker whose own clock runs ahead must not find a scheduled job or a
        schedule's slot due early, nor one running behind set a shorter backoff. Read from the database at most
        every CLOCK_READ_EVERY seconds and carried forward between by this process's monotonic clock (which no
        step of the wall clock moves), so that asking costs a job no round trip."""
        import time

        store = self.store
        at = store._clock_at  # noqa: SLF001 - the store's connection's reading
        mono = time.monotonic()
        if at is None or not 0 <= mono - at[1] < CLOCK_READ_EVERY:
            db = store._read("reading the database's clock", lambda c: float(c.execute(_DB_NOW).fetchone()[0]))  # noqa: SLF001
            at = store._clock_at = (db, time.monotonic())  # noqa: SLF001
        return at[0] + (mono - at[1]) if mono >= at[1] else at[0]

    @staticmethod
    def _now(c: Any, now: float | None) -> float:
        return float(c.execute(_DB_NOW).fetchone()[0]) if now is None else now

    @staticmethod
    def _wake(c: Any, what: str) -> None:
        c.execute("SELECT pg_notify(%s, %s)", (CHANNEL, what[:7000]))

    # -- submitting and reading ----------------------------------------------------------------------

    def open_job(self, key: str) -> dict[str, Any] | None:
        rows = self._rows(f"looking up the job of {key!r}",
                          f"SELECT * FROM jobs WHERE key = %s AND state IN {_in(OPEN_STATES)}", (key,))
        return rows[0] if rows else None

    def submit(self, *, spec: dict[str, Any], key: str | None, queue: str, priority: int, run_at: float,
               max_attempts: int, host: str, movable: bool, schedule: str | None = None, now: float | None = None,
               conn: Any = None) -> tuple[dict[str, Any], bool]:
        from dal.receipts.pg.store import jsonb

        def add(c: Any) -> tuple[dict[str, Any], bool]:
            t = self._now(c, now)
            state = "scheduled" if run_at > t else "ready"
            got = self.store._dicts(c.execute(  # noqa: SLF001
                "INSERT INTO jobs (queue, key, spec, state, priority, run_at, max_attempts, host, movable, schedule,"
                " created_at, updated_at) VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                f" ON CONFLICT (key) WHERE state NOT IN {_in(TERMINAL)} DO NOTHING RETURNING *",
                (queue, key if key is not None else f"job:pending:{os.urandom(8).hex()}", jsonb(spec), state,
                 priority, run_at, max_attempts, host, int(movable), schedule, t, t)))
            if not got:
                have = self.store._dicts(c.execute(  # noqa: SLF001
                    f"SELECT * FROM jobs WHERE key = %s AND state IN {_in(OPEN_STATES)}", (key,)))
                return _job(have[0]), False
            job = got[0]
            if key is None:
                job = self.store._dicts(c.execute(  # noqa: SLF001
                    "UPDATE jobs SET key = 'job:' || job_id WHERE job_id = %s RETURNING *", (job["job_id"],)))[0]
            self._wake(c, f"submit:{job['queue']}")
            return _job(job), True

        if conn is not None:
            return add(conn)
        with self._tx("submitting a job") as c:
            return add(c)

    def get(self, job_id: int) -> dict[str, Any] | None:
        rows = self._rows(f"reading job {job_id}", "SELECT * FROM jobs WHERE job_id = %s", (job_id,))
        return rows[0] if rows else None

    def list(self, *, state: str | None = None, queue: str | None = None, key: str | None = None,
             limit: int | None = 100) -> list[dict[str, Any]]:
        clauses, args = [], []
        for col, val in (("state", state), ("queue", queue), ("key", key)):
            if val is not None:
                clauses.append(f"{col} = %s")
                args.append(val)
        sql = "SELECT * FROM jobs" + (" WHERE " + " AND ".join(clauses) if clauses else "") + " ORDER BY job_id DESC"
        if limit is not None:
            sql += f" LIMIT {max(0, int(limit))}"
        return self._rows("listing jobs", sql, args)

    def counts(self) -> dict[str, int]:
        return self.store._read("counting jobs", lambda c: {  # noqa: SLF001
            s: int(n) for s, n in c.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall()})

    def counts_by_queue(self) -> dict[tuple[str, str], int]:
        return self.store._read("counting jobs", lambda c: {  # noqa: SLF001
            (s, q): int(n) for s, q, n in c.execute(
                "SELECT state, queue, count(*) FROM jobs GROUP BY state, queue").fetchall()})

    # -- claiming, leases ----------------------------------------------------------------------------

    def has_work(self, queues: Sequence[str], host: str) -> bool:
        """Whether a job of `queues` a worker on `host` may run is ready, scheduled or running."""
        return self.store._read("looking for work", lambda c: c.execute(  # noqa: SLF001
            "SELECT 1 FROM jobs WHERE state IN ('ready', 'scheduled', 'running') AND queue = ANY(%s)"
            " AND (movable = 1 OR host = %s) LIMIT 1", (list(queues), host)).fetchone() is not None)

    def running_leases(self, queues: Sequence[str], host: str) -> list[tuple[int, int, float, str | None]]:
        return self.store._read("watching the leases", lambda c: [tuple(r) for r in c.execute(  # noqa: SLF001
            "SELECT job_id, lease_epoch, lease_until, lease_owner FROM jobs WHERE state = 'running'"
            " AND queue = ANY(%s) AND (movable = 1 OR host = %s)", (list(queues), host)).fetchall()])

    def claim(self, *, owner: str, queues: Sequence[str], host: str, lease: float, now: float | None = None,
              stale: Sequence[tuple[int, int, float]] | None = None) -> dict[str, Any] | None:
        """The best job whose time has come, claimed (claim_some with a limit of one), or None."""
        got = self.claim_some(owner=owner, queues=queues, host=host, lease=lease, limit=1, now=now, stale=stale)
        return got[0] if got else None

    def claim_some(self, *, owner: str, queues: Sequence[str], host: str, lease: float, limit: int,
                   now: float | None = None,
                   stale: Sequence[tuple[int, int, float]] | None = None) -> list[dict[str, Any]]:
        """As JobQueue.claim_some, with FOR UPDATE SKIP LOCKED. The lease is timed by the database's clock
        whatever `now` says (`now`, the caller's clock, only decides which scheduled jobs are due): the fence
        that checks it in the journal reads that clock, and no worker's clock skew moves it."""
        if limit < 1:
            return []
        # One statement, committed on its own: the lease is the database's clock inside it.
        db_now = f"({_DB_NOW[7:]})"
        t = self.clock() if now is None else now
        with self.store._write("claiming a job" if limit == 1 else "claiming jobs", single=True) as c:  # noqa: SLF001
            if stale is None:
                running, running_args = f"lease_until < {db_now}", []
            elif stale:
                one = "(job_id = %s AND lease_epoch = %s AND lease_until = %s)"
                running = "(" + " OR ".join([one] * len(stale)) + ")"
                running_args = [v for triple in stale for v in triple]
            else:
                running, running_args = "false", []
            ready = f"((state IN {_in(TRANSITIONS['claim'][0])} AND run_at <= %s) OR (state = 'running' AND {running}))"
            got = self.store._dicts(c.execute(  # noqa: SLF001
                f"UPDATE jobs SET state = 'running', lease_owner = %s, lease_until = {db_now} + %s,"
                " lease_epoch = lease_epoch + 1,"
                " attempts = attempts + 1, updated_at = %s,"
                " took_over = CASE WHEN state = 'running' THEN holder END,"
                " stale_since = CASE WHEN state = 'running' THEN lease_until END,"
                " note = CASE WHEN state = 'running' THEN 'taken over from ' || COALESCE(lease_owner, '?')"
                " || ' (its lease ran out)' ELSE note END,"
                " holder = NULL"
                " WHERE job_id IN (SELECT job_id FROM jobs WHERE"
                f" {ready} AND queue = ANY(%s) AND (movable = 1 OR host = %s)"
                " ORDER BY priority DESC, run_at, job_id LIMIT %s FOR UPDATE SKIP LOCKED)"
                " RETURNING *",
                (owner, lease, t, t, *running_args, list(queues), host, int(limit))))
        jobs = [_job(j) for j in got]
        return sorted(jobs, key=lambda j: (-j["priority"], j["run_at"], j["job_id"]))

    def heartbeat(self, fence: Fence, lease: float, now: float | None = None) -> bool:
        # The database's clock, as the claim's (`now` is not used for a lease); one statement.
        with self.store._write(f"renewing the lease of job {fence.job_id}", single=True) as c:  # noqa: SLF001
            return c.execute(f"UPDATE jobs SET lease_until = ({_DB_NOW[7:]}) + %s WHERE job_id = %s"
                             " AND lease_epoch = %s AND lease_owner = %s AND state = 'running'",
                             (lease, fence.job_id, fence.epoch, fence.owner)).rowcount == 1

    def set_holder(self, fence: Fence, holder: dict[str, Any]) -> bool:
        with self._tx(f"recording who runs job {fence.job_id}") as c:
            return c.execute("UPDATE jobs SET holder = %s WHERE job_id = %s AND lease_epoch = %s AND lease_owner = %s"
                             " AND state = 'running'",
                             (json.dumps(holder), fence.job_id, fence.epoch, fence.owner)).rowcount == 1

    def route(self, fence: Fence, event: str, *, run_at: float | None = None, failures: int | None = None,
              streak: int | None = None, run: dict[str, Any] | None = None, waits_on: Sequence[int] = (),
              note: str | None = None, now: float | None = None) -> str | None:
        """As JobQueue.route. `wait` reads the decisions under the same per-run locks record_approval takes,
        so a decision recorded meanwhile is seen here or wakes the job after (wake_key)."""
        from dal.receipts.pg.store import _decision_lock

        to = TRANSITIONS[event][1]
        run = run or {}
        t = self.clock() if now is None else now  # what the job's row says of when: not a lease
        # One statement (an UPDATE, fenced by the lease epoch) but for `wait`, which reads decisions first.
        with self.store._write(f"routing job {fence.job_id}", single=event != "wait") as c:  # noqa: SLF001
            mark = None
            if event == "wait":
                if run.get("run_id"):
                    _decision_lock(c, [run["run_id"]])
                mark = c.execute("SELECT COALESCE(max(id), 0) FROM approvals").fetchone()[0]
                seqs = [int(s) for s in waits_on]
                if run.get("run_id") and seqs and c.execute(
                        "SELECT 1 FROM approvals WHERE run_id = %s AND seq = ANY(%s) LIMIT 1",
                        (run["run_id"], seqs)).fetchone():
                    to, note = "ready", (note or "") + "; a decision was already recorded: ready again"
            cur = c.execute(
                "UPDATE jobs SET state = %s, run_at = COALESCE(%s, run_at), failures = COALESCE(%s, failures),"
                " streak = COALESCE(%s, streak), last_run_id = COALESCE(%s, last_run_id),"
                " last_status = COALESCE(%s, last_status), last_retry = COALESCE(%s, last_retry),"
                " waits_on = %s, decision_mark = %s, note = %s, updated_at = %s,"
                " lease_owner = NULL, lease_until = NULL, holder = NULL,"
                " finished_at = CASE WHEN %s IN ('done', 'dead') THEN %s ELSE finished_at END"
                " WHERE job_id = %s AND lease_epoch = %s AND lease_owner = %s"
                f" AND state IN {_in(TRANSITIONS[event][0])}",
                (to, run_at if to in ("scheduled", "ready") else None, failures, streak, run.get("run_id"),
                 run.get("status"), run.get("retry"), json.dumps(list(waits_on)) if waits_on else None, mark, note,
                 t, to, t, fence.job_id, fence.epoch, fence.owner))
            if cur.rowcount == 1 and to in ("ready", "scheduled"):
                self._wake(c, f"requeue:{fence.job_id}")  # a wake-up only: after the move, or with it (`wait`)
            return to if cur.rowcount == 1 else None

    # -- an operator's and a person's moves ----------------------------------------------------------

    def wake_key(self, key: str, now: float | None = None) -> int:
        with self._tx(f"waking the job of {key!r}") as c:
            t = self._now(c, now)
            n = c.execute("UPDATE jobs SET state = 'ready', run_at = %s, updated_at = %s,"
                          " note = 'woken: a decision was recorded' WHERE key = %s AND state = 'waiting'",
                          (t, t, key)).rowcount
            if n:
                self._wake(c, f"decision:{key}")
            return n

    def sweep_waiting(self, now: float | None = None) -> int:
        with self._tx("waking decided jobs") as c:
            t = self._now(c, now)
            n = c.execute(
                "UPDATE jobs SET state = 'ready', run_at = %s, updated_at = %s, note = 'woken: a decision was recorded'"
                " WHERE state = 'waiting' AND (EXISTS (SELECT 1 FROM approvals a JOIN runs r ON r.run_id = a.run_id"
                " WHERE r.key = jobs.key AND a.id > COALESCE(jobs.decision_mark, 0))"
                " OR EXISTS (SELECT 1 FROM runs r WHERE r.key = jobs.key"
                " AND r.run_id COLLATE \"C\" > jobs.last_run_id COLLATE \"C\"))", (t, t)).rowcount
            if n:
                self._wake(c, "decision:sweep")
            return n

    def retry(self, job_id: int, now: float | None = None, note: str = "retried by an operator") -> dict[str, Any]:
        return self._operator(job_id, "retry", now, note, "failures = 0, streak = 0, run_at = %(now)s,"
                              " finished_at = NULL,")

    def cancel(self, job_id: int, now: float | None = None, note: str = "cancelled by an operator") -> dict[str, Any]:
        return self._operator(job_id, "cancel", now, note, "lease_epoch = lease_epoch + 1, lease_owner = NULL,"
                              " lease_until = NULL, finished_at = %(now)s,")

    def _operator(self, job_id: int, event: str, now: float | None, note: str, sets: str) -> dict[str, Any]:
        dicts = self.store._dicts  # noqa: SLF001
        with self._tx(f"{event} of job {job_id}") as c:
            t = self._now(c, now)
            got = dicts(c.execute("SELECT * FROM jobs WHERE job_id = %s FOR UPDATE", (job_id,)))
            to = operator_target(got[0] if got else None, job_id, event, self.path, lambda key: next(iter(dicts(
                c.execute(f"SELECT job_id, state FROM jobs WHERE key = %s AND state IN {_in(OPEN_STATES)}",
                          (key,)))), None))
            row = dicts(c.execute(f"UPDATE jobs SET state = %(to)s, {sets} updated_at = %(now)s, note = %(note)s"
                                  " WHERE job_id = %(id)s RETURNING *",
                                  {"to": to, "now": t, "note": note, "id": job_id}))
            if to == "ready":
                self._wake(c, f"requeue:{job_id}")
            return _job(row[0])

    # -- workers and schedules -----------------------------------------------------------------------

    def register_worker(self, row: dict[str, Any]) -> None:
        with self._tx("registering a worker") as c:
            c.execute(f"INSERT INTO workers ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})",
                      tuple(row.values()))

    def worker_beat(self, worker_id: str, *, state: str, running: int, done: int, now: float | None = None) -> None:
        with self._tx("recording a worker's heartbeat") as c:
            t = self._now(c, now)
            c.execute("UPDATE workers SET state = %s, running = %s, done = %s, heartbeat_at = %s,"
                      " stopped_at = CASE WHEN %s = 'stopped' THEN %s ELSE stopped_at END WHERE worker_id = %s",
                      (state, running, done, t, state, t, worker_id))

    def workers(self, *, limit: int | None = 100) -> list[dict[str, Any]]:
        return self._rows("listing workers", "SELECT * FROM workers ORDER BY started_at DESC"
                          + (f" LIMIT {int(limit)}" if limit is not None else ""))

    def add_schedule(self, row: dict[str, Any]) -> None:
        from dal.receipts.pg.store import jsonb

        values = {**row, "spec": jsonb(json.loads(row["spec"]) if isinstance(row.get("spec"), str) else row["spec"])}
        marks = ", ".join("%s::jsonb" if k == "spec" else "%s" for k in values)
        with self._tx(f"adding the schedule {row['name']!r}") as c:
            if c.execute("SELECT 1 FROM schedules WHERE name = %s", (row["name"],)).fetchone():
                raise StoreError(f"a schedule named {row['name']!r} exists already (dal schedule remove "
                                 f"{row['name']} first, or choose another name)", self.path)
            c.execute(f"INSERT INTO schedules ({', '.join(values)}) VALUES ({marks})", tuple(values.values()))

    def schedules(self, *, due: float | None = None) -> list[dict[str, Any]]:
        if due is None:
            return self._rows("listing schedules", "SELECT * FROM schedules ORDER BY name")
        return self._rows("listing schedules",
                          "SELECT * FROM schedules WHERE state = 'active' AND next_at <= %s ORDER BY name", (due,))

    def set_schedule(self, name: str, *, state: str | None = None, next_at: float | None = None,
                     remove: bool = False, now: float | None = None) -> bool:
        with self._tx(f"changing the schedule {name!r}") as c:
            if remove:
                return c.execute("DELETE FROM schedules WHERE name = %s", (name,)).rowcount == 1
            t = self._now(c, now)
            return c.execute("UPDATE schedules SET state = COALESCE(%s, state), next_at = COALESCE(%s, next_at),"
                             " updated_at = %s WHERE name = %s", (state, next_at, t, name)).rowcount == 1

    def fire(self, name: str, *, seen_next_at: float, slot: float | None, key: str, next_at: float, missed: int,
             now: float | None = None) -> dict[str, Any] | None:
        with self._tx(f"firing the schedule {name!r}") as c:
            t = self._now(c, now)
            rows = [_job(r) for r in self.store._dicts(c.execute(  # noqa: SLF001
                "SELECT * FROM schedules WHERE name = %s AND state = 'active' AND next_at = %s FOR UPDATE",
                (name, seen_next_at)))]
            if not rows:
                return None
            sched = rows[0]
            job = None
            if slot is not None:
                job, _ = self.submit(spec=json.loads(sched["spec"]), key=key, queue=sched["queue"],
                                     priority=sched["priority"], run_at=t, max_attempts=sched["max_attempts"],
                                     host=sched["host"], movable=bool(sched["movable"]), schedule=name, now=t, conn=c)
            c.execute("UPDATE schedules SET next_at = %s, last_slot = COALESCE(%s, last_slot),"
                      " last_job = COALESCE(%s, last_job), missed = missed + %s, updated_at = %s WHERE name = %s",
                      (next_at, slot, job["job_id"] if job else None, missed, t, name))
            return job

    # -- waking idle workers -------------------------------------------------------------------------

    def waker(self) -> Waker:
        """A LISTEN connection of its own: `Waker.wait(timeout)` returns early on a submit, decision or
        requeue."""
        return Waker(self.store.url)


class Waker:
    """`LISTEN dal_jobs` on a connection of its own. `wait(t)` returns True when a notification came within
    `t` seconds; a broken connection (the server restarted) is reopened at the next wait, and until then
    the caller's own poll is what finds work."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None

    def _listen(self) -> Any:
        from dal.receipts.pg.connect import connect

        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._conn.close()
            self._conn = None
        if self._conn is None:
            conn = connect(self.url, "listening for jobs")
            conn.execute(f"LISTEN {CHANNEL}")
            self._conn = conn
        return self._conn

    def fileno(self) -> int:
        """The LISTEN connection's socket, to select() on beside others; -1 when it cannot be opened now."""
        try:
            return int(self._listen().fileno())
        except Exception:  # noqa: BLE001 - a wake-up only
            self.close()
            return -1

    def drain(self) -> int:
        """Read the notifications that came (without waiting); how many."""
        if self._conn is None:
            return 0
        try:
            return sum(1 for _ in self._conn.notifies(timeout=0, stop_after=None))
        except Exception:  # noqa: BLE001
            self.close()
            return 0

    def wait(self, timeout: float) -> bool:
        import time

        start = time.monotonic()
        try:
            conn = self._listen()
            for _ in conn.notifies(timeout=max(0.0, timeout), stop_after=1):
                return True
            return False
        except Exception:  # noqa: BLE001 - a wake-up only: fall back to the poll
            self.close()
            time.sleep(max(0.0, timeout - (time.monotonic() - start)))
            return False

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
