"""The PostgreSQL store's tables, as migrations applied under an advisory lock (one migrator at a time, however
many workers start together), each in its own transaction with the version it reaches.

The same tables as the SQLite store (loops, effects and the queue's tables rendered from the description both
share, dal/receipts/tables.py; the rest written here), in PostgreSQL's types: JSONB for receipts, loop
receipts, journal details and results, policies and job specs; bigserial ids; double precision seconds for
the queue's times. What the database enforces by itself:
- one open job per key (the partial unique index `jobs_open_key`);
- decisions keyed by run and effect (`approvals_by_run`), their ids growing (bigserial);
- a run recorded once (its primary key), and the order runs were recorded in (`ord`, a sequence).
One running run per key is the operation lock's to hold (an advisory lock, dal/receipts/pg/lock.py), not an
index's: a run killed while running stays `running` in the store, and its key must stay resumable.
Append only: a released migration is never edited.
"""

from __future__ import annotations

from typing import Any

from dal.receipts.tables import queue_migration, render

# Any constant works as long as it is DAL's alone: the migrations' lock (pg_advisory_lock).
MIGRATE_LOCK = 0x44414C_4D4947  # "DAL" "MIG"

MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS dal_schema (
            version INTEGER PRIMARY KEY,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )""",
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            operation TEXT NOT NULL,
            key TEXT,
            status TEXT NOT NULL,
            retry TEXT,
            external_effect TEXT,
            blocker TEXT,
            script_path TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            duration_ms DOUBLE PRECISION,
            previous_run TEXT,
            skipped_of TEXT,
            pid INTEGER,
            pid_start BIGINT,
            boot_id TEXT,
            host TEXT,
            policy JSONB,
            receipt JSONB,
            ord BIGSERIAL NOT NULL
        )""",
        "CREATE INDEX runs_by_operation ON runs(operation, run_id)",
        "CREATE INDEX runs_by_status ON runs(status, run_id)",
        "CREATE INDEX runs_by_ord ON runs(ord)",
        "CREATE INDEX runs_by_key_ord ON runs(key, ord)",
        "CREATE INDEX runs_by_previous ON runs(previous_run) WHERE previous_run IS NOT NULL",
        render("loops", "postgresql", indent=12, close=8),
        render("effects", "postgresql", indent=12, close=8),
        """CREATE TABLE approvals (
            id BIGSERIAL PRIMARY KEY,
            run_id TEXT NOT NULL,
            seq INTEGER,
            decision TEXT NOT NULL,
            who TEXT NOT NULL,
            at TEXT NOT NULL,
            note TEXT,
            command TEXT
        )""",
        "CREATE INDEX approvals_by_run ON approvals(run_id, seq)",
        # Who holds an operation key's advisory lock, for KeyBusy's message: written by the holder after it
        # took the lock; only read while the lock is held, so a dead holder's row is never believed.
        """CREATE TABLE key_locks (
            lock_id BIGINT PRIMARY KEY,
            key TEXT NOT NULL,
            run_id TEXT,
            pid INTEGER,
            host TEXT,
            backend_pid INTEGER,
            taken_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
        )""",
        *queue_migration("postgresql", indent=12, close=8),
    ],
    # Where the key's holder runs, beside its pid: its start time, boot id, pid namespace, host name and machine
    # id (dal.core.liveness.here), so that a taker never reads a pid of another pid namespace (a container's
    # DAL) as a process of its own. NULL in rows an older DAL wrote.
    2: ["ALTER TABLE key_locks ADD COLUMN holder JSONB"],
}

SCHEMA_VERSION = max(MIGRATIONS)
TABLES = ("runs", "loops", "effects", "approvals", "key_locks", "jobs", "workers", "schedules")


def version(conn: Any) -> int:
    """The version a database's DAL tables have (0: none yet)."""
    row = conn.execute("SELECT to_regclass('dal_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return 0
    return int(conn.execute("SELECT COALESCE(max(version), 0) FROM dal_schema").fetchone()[0])


def migrate(conn: Any) -> list[int]:
    """Bring the database to SCHEMA_VERSION under the migrations' advisory lock (a second migrator waits, then
    finds nothing left to do), one transaction per migration. Returns the versions applied.

    The lock is session-level and taken before the transactions: a transaction begun after another migrator
    committed sees its tables (a backend reads the catalog changes others committed when a transaction
    starts, not when it gets an advisory lock). An autocommit connection; the lock goes with its session if
    the process dies."""
    applied: list[int] = []
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
    try:
        for target in sorted(MIGRATIONS):
            with conn.transaction():
                if version(conn) >= target:
                    continue
                for statement in MIGRATIONS[target]:
                    conn.execute(statement)
                conn.execute("INSERT INTO dal_schema (version) VALUES (%s)", (target,))
                applied.append(target)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
    return applied
