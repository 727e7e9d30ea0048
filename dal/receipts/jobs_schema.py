"""The tables of the job queue (docs/workers.md): migration 3 of the run store.

Kept apart from dal/receipts/jobs.py (the queue's operations) so that the store's migration list costs a
plain `dal run` nothing but these strings. Portable SQL on purpose: the PostgreSQL store (issue 18) takes
the same statements with `INTEGER PRIMARY KEY AUTOINCREMENT` as `bigserial` and REAL as double precision;
the partial unique index is written the same way in both.

Times are seconds since the epoch (REAL), passed in by the caller rather than read from the database's
clock, so that one clock (the worker's) decides leases and slots.
"""

from __future__ import annotations

MIGRATION: list[str] = [
    # One row per submitted job. `key` is the operation key the job runs under (every job has one);
    # `spec` what it runs (JSON: dal/worker/spec.py). attempts: claims so far; failures: runs routed as
    # `replay`; streak: immediate resumes in a row (a crash loop backs off). lease_*: who runs it and until
    # when; lease_epoch grows by one at every claim, and a journal write checks it (fencing). holder: the
    # process that runs it now (pid, start time, boot id); took_over / stale_since: the holder and lease
    # end of the claim this one took over. decision_mark: the newest decision id when it went waiting.
    """CREATE TABLE jobs (
        job_id INTEGER PRIMARY KEY AUTOINCREMENT,
        queue TEXT NOT NULL,
        key TEXT NOT NULL,
        spec TEXT NOT NULL,
        state TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        run_at REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        streak INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        lease_owner TEXT,
        lease_until REAL,
        lease_epoch INTEGER NOT NULL DEFAULT 0,
        holder TEXT,
        took_over TEXT,
        stale_since REAL,
        last_run_id TEXT,
        last_status TEXT,
        last_retry TEXT,
        waits_on TEXT,
        decision_mark INTEGER,
        host TEXT NOT NULL,
        movable INTEGER NOT NULL DEFAULT 0,
        schedule TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        finished_at REAL,
        note TEXT
    )""",
    # One open job per key: the queue's exactly-once rests on it (dal submit of a key with an open job
    # returns that job).
    "CREATE UNIQUE INDEX jobs_open_key ON jobs(key) WHERE state NOT IN ('done', 'dead', 'cancelled')",
    "CREATE INDEX jobs_claim ON jobs(state, queue, priority, run_at)",
    "CREATE INDEX jobs_by_key ON jobs(key, job_id)",
    """CREATE TABLE workers (
        worker_id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        pid_start INTEGER,
        boot_id TEXT,
        queues TEXT NOT NULL,
        concurrency INTEGER NOT NULL,
        lease REAL NOT NULL,
        state TEXT NOT NULL,
        running INTEGER NOT NULL DEFAULT 0,
        done INTEGER NOT NULL DEFAULT 0,
        started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL,
        stopped_at REAL
    )""",
    # A schedule makes one job per slot of its cron expression; next_at is the earliest slot not yet
    # considered, advanced in the same transaction that makes the slot's job (so two workers never make
    # the same slot twice).
    """CREATE TABLE schedules (
        name TEXT PRIMARY KEY,
        cron TEXT NOT NULL,
        tz TEXT NOT NULL,
        state TEXT NOT NULL,
        spec TEXT NOT NULL,
        queue TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        host TEXT NOT NULL,
        movable INTEGER NOT NULL DEFAULT 0,
        next_at REAL NOT NULL,
        last_slot REAL,
        last_job INTEGER,
        missed INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        note TEXT
    )""",
]
