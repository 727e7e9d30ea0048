"""The tables both run stores share, described once and rendered per engine (SQLite, PostgreSQL).

A column is (name, logical type, constraints); `render` writes the CREATE TABLE text for one dialect. The
logical types: text; int; bigint (an id or a start time that may pass 2**31); real (seconds since the
epoch, milliseconds); json (a document: TEXT in SQLite, JSONB in PostgreSQL); serial (the table's growing
id). SQLite keeps its text byte for byte as its released migrations wrote it (the store checks a digest of
its schema text, dal/receipts/store.py SCHEMA_DIGESTS), so the indents are the caller's.

Times in the queue's tables are seconds since the epoch, passed in by the caller rather than read from the
database's clock, so that one clock (the worker's) decides slots.
"""

from __future__ import annotations

from typing import Literal

Dialect = Literal["sqlite", "postgresql"]
Column = tuple[str, str, str]

TYPES: dict[str, dict[Dialect, str]] = {
    "text": {"sqlite": "TEXT", "postgresql": "TEXT"},
    "int": {"sqlite": "INTEGER", "postgresql": "INTEGER"},
    "bigint": {"sqlite": "INTEGER", "postgresql": "BIGINT"},
    "real": {"sqlite": "REAL", "postgresql": "DOUBLE PRECISION"},
    "json": {"sqlite": "TEXT", "postgresql": "JSONB"},
    "serial": {"sqlite": "INTEGER PRIMARY KEY AUTOINCREMENT", "postgresql": "BIGSERIAL PRIMARY KEY"},
}

TABLES: dict[str, tuple[Column, ...]] = {
    # A loop's receipt, one row per loop a run ran (its place in the script and how it ended).
    "loops": (
        ("run_id", "text", "NOT NULL"),
        ("idx", "int", "NOT NULL"),
        ("kind", "text", "NOT NULL"),
        ("file", "text", "NOT NULL"),
        ("line", "int", "NOT NULL"),
        ('"column"', "int", "NOT NULL"),
        ("exit", "text", "NOT NULL"),
        ("clause", "text", ""),
        ("iterations", "int", "NOT NULL"),
        ("receipt", "json", "NOT NULL"),
    ),
    # One row per effect (and per journaled builtin such as now() or env()): the intent is written before the
    # effect starts, the result after it ends. A row with no result is an effect whose outcome is unknown.
    "effects": (
        ("run_id", "text", "NOT NULL"),
        ("seq", "int", "NOT NULL"),
        ("command", "text", "NOT NULL"),
        ("class", "text", ""),
        ("status", "text", "NOT NULL"),
        ("intent_at", "text", "NOT NULL"),
        ("result_at", "text", ""),
        ("detail", "json", ""),
        ("result", "json", ""),
    ),
    # One row per submitted job. `key` is the operation key the job runs under (every job has one); `spec`
    # what it runs (dal/worker/spec.py). attempts: claims so far; failures: runs routed as `replay`; streak:
    # immediate resumes in a row (a crash loop backs off). lease_*: who runs it and until when; lease_epoch
    # grows by one at every claim, and a journal write checks it (fencing). holder: the process that runs it
    # now (pid, start time, boot id); took_over / stale_since: the holder and lease end of the claim this one
    # took over. decision_mark: the newest decision id when it went waiting.
    "jobs": (
        ("job_id", "serial", ""),
        ("queue", "text", "NOT NULL"),
        ("key", "text", "NOT NULL"),
        ("spec", "json", "NOT NULL"),
        ("state", "text", "NOT NULL"),
        ("priority", "int", "NOT NULL DEFAULT 0"),
        ("run_at", "real", "NOT NULL"),
        ("attempts", "int", "NOT NULL DEFAULT 0"),
        ("failures", "int", "NOT NULL DEFAULT 0"),
        ("streak", "int", "NOT NULL DEFAULT 0"),
        ("max_attempts", "int", "NOT NULL"),
        ("lease_owner", "text", ""),
        ("lease_until", "real", ""),
        ("lease_epoch", "int", "NOT NULL DEFAULT 0"),
        ("holder", "text", ""),
        ("took_over", "text", ""),
        ("stale_since", "real", ""),
        ("last_run_id", "text", ""),
        ("last_status", "text", ""),
        ("last_retry", "text", ""),
        ("waits_on", "text", ""),
        ("decision_mark", "bigint", ""),
        ("host", "text", "NOT NULL"),
        ("movable", "int", "NOT NULL DEFAULT 0"),
        ("schedule", "text", ""),
        ("created_at", "real", "NOT NULL"),
        ("updated_at", "real", "NOT NULL"),
        ("finished_at", "real", ""),
        ("note", "text", ""),
    ),
    "workers": (
        ("worker_id", "text", "PRIMARY KEY"),
        ("host", "text", "NOT NULL"),
        ("pid", "int", "NOT NULL"),
        ("pid_start", "bigint", ""),
        ("boot_id", "text", ""),
        ("queues", "text", "NOT NULL"),
        ("concurrency", "int", "NOT NULL"),
        ("lease", "real", "NOT NULL"),
        ("state", "text", "NOT NULL"),
        ("running", "int", "NOT NULL DEFAULT 0"),
        ("done", "int", "NOT NULL DEFAULT 0"),
        ("started_at", "real", "NOT NULL"),
        ("heartbeat_at", "real", "NOT NULL"),
        ("stopped_at", "real", ""),
    ),
    # A schedule makes one job per slot of its cron expression; next_at is the earliest slot not yet
    # considered, advanced in the same transaction that makes the slot's job (so two workers never make the
    # same slot twice).
    "schedules": (
        ("name", "text", "PRIMARY KEY"),
        ("cron", "text", "NOT NULL"),
        ("tz", "text", "NOT NULL"),
        ("state", "text", "NOT NULL"),
        ("spec", "json", "NOT NULL"),
        ("queue", "text", "NOT NULL"),
        ("priority", "int", "NOT NULL DEFAULT 0"),
        ("max_attempts", "int", "NOT NULL"),
        ("host", "text", "NOT NULL"),
        ("movable", "int", "NOT NULL DEFAULT 0"),
        ("next_at", "real", "NOT NULL"),
        ("last_slot", "real", ""),
        ("last_job", "bigint", ""),
        ("missed", "int", "NOT NULL DEFAULT 0"),
        ("created_at", "real", "NOT NULL"),
        ("updated_at", "real", "NOT NULL"),
        ("note", "text", ""),
    ),
}

# Table constraints after the columns.
KEYS: dict[str, str] = {"loops": "PRIMARY KEY (run_id, idx)", "effects": "PRIMARY KEY (run_id, seq)"}

# The queue's indexes. One open job per key: the queue's exactly-once rests on it (dal submit of a key with
# an open job returns that job). The claim's index is each engine's own: PostgreSQL's is partial and in the
# claim's ORDER BY (its FOR UPDATE SKIP LOCKED walks it), SQLite's the one its released migration made.
QUEUE_INDEXES: dict[Dialect, tuple[str, ...]] = {
    "sqlite": (
        "CREATE UNIQUE INDEX jobs_open_key ON jobs(key) WHERE state NOT IN ('done', 'dead', 'cancelled')",
        "CREATE INDEX jobs_claim ON jobs(state, queue, priority, run_at)",
        "CREATE INDEX jobs_by_key ON jobs(key, job_id)",
    ),
    "postgresql": (
        "CREATE UNIQUE INDEX jobs_open_key ON jobs(key) WHERE state NOT IN ('done', 'dead', 'cancelled')",
        "CREATE INDEX jobs_claim ON jobs(queue, priority DESC, run_at, job_id)"
        " WHERE state IN ('ready', 'scheduled', 'running')",
        "CREATE INDEX jobs_by_key ON jobs(key, job_id)",
    ),
}


def render(table: str, dialect: Dialect, *, indent: int = 8, close: int = 4) -> str:
    """The CREATE TABLE statement of `table` in `dialect`: one column a line at `indent` spaces, the closing
    parenthesis at `close`."""
    pad = " " * indent
    lines = [f"{pad}{name} {TYPES[kind][dialect]}{' ' + rest if rest else ''}" for name, kind, rest in TABLES[table]]
    if table in KEYS:
        lines.append(pad + KEYS[table])
    return f"CREATE TABLE {table} (\n" + ",\n".join(lines) + "\n" + " " * close + ")"


def queue_migration(dialect: Dialect, *, indent: int = 8, close: int = 4) -> list[str]:
    """The job queue's tables and indexes (jobs, workers, schedules) in `dialect`, in creation order."""
    def table(name: str) -> str:
        return render(name, dialect, indent=indent, close=close)

    return [table("jobs"), *QUEUE_INDEXES[dialect], table("workers"), table("schedules")]
