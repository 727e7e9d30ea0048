"""The PostgreSQL run store: the store contract (dal/receipts/contract.py, RunStore) over one connection.

Durability: every write is one transaction, committed before it returns. `set_synchronous("NORMAL")` is
`synchronous_commit = off` for this session (set once: asking again costs nothing) (a commit survives kill -9 of
DAL, as it is in the server's memory, but a crash of the server may lose the last ones), `FULL` is `on` (the
commit is in the server's write-ahead log on disk, and on a synchronous standby where the server has one). The
runner asks for FULL for the journal entries whose loss could run an effect twice, as with SQLite
(docs/durability.md).

JSON goes in as JSONB. Two things JSONB cannot hold and a DAL value can (a NUL character, a lone surrogate)
are kept by storing that one value as its JSON text inside a wrapper (`{"dal:json": "..."}`), read back
whole; JSONB orders object keys its own way, so a receipt read back has equal content, in another key order.

A lost connection (the server restarted, a partition) fails the statement under way with a StoreError; the
next call connects again. A write whose commit was cut off is never retried here: whether it committed is
for the journal (read again) to say, as after a kill -9.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from dal.core.jsontext import dumps as _dumps
from dal.core.jsontext import escape_surrogates as _utf8
from dal.receipts.errors import DecisionTooLate, NoStore, RunContinued, RunNotFound, StoreError, continued_error
from dal.receipts.ids import RUN_ID_RE, utc_timestamp
from dal.receipts.location import redact
from dal.receipts.packing import decider, pack_result, unpack_result
from dal.receipts.pg import schema
from dal.receipts.pg.connect import connect, describe, driver

if TYPE_CHECKING:
    from dal.receipts.pg.jobs import PgJobQueue
    from dal.receipts.pg.lock import PgKeyLock

T = TypeVar("T")

_RUN_COLUMNS = (
    "run_id, operation, key, status, retry, external_effect, blocker, script_path, started_at, "
    "finished_at, duration_ms, previous_run, skipped_of"
)
# How many PgStores of each database this process has open (close() of the last closes the kept lock
# connections).
_OPEN: dict[str, int] = {}
_WRAP = "dal:json"
_UNSAFE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def jsonb(obj: Any) -> str | None:
    """`obj` as JSON text JSONB accepts: as it is, or (holding a NUL or a lone surrogate) wrapped whole."""
    if obj is None:
        return None
    text = _dumps(obj, separators=(",", ":"))
    if _UNSAFE.search(text) or "\x00" in text:
        return json.dumps({_WRAP: text}, ensure_ascii=False)
    return text


def unjsonb(value: Any) -> Any:
    """A JSONB value as DAL stored it (see jsonb)."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(_WRAP), str):
        return json.loads(value[_WRAP])
    return value


class PgStore:
    """The run store in a PostgreSQL database. `PgStore(url)` migrates the database to the current schema;
    `PgStore(url, readonly=True)` never writes (NoStore when the database has no DAL tables yet)."""

    kind = "postgresql"

    def __init__(self, url: str, *, readonly: bool = False, timeout: float | None = None) -> None:
        self.url = url
        self.path = redact(url)  # what messages name (the SQLite store's `path`)
        self.readonly = readonly
        self._timeout = timeout
        self._lock = threading.RLock()
        self._conn: Any = None
        self._sync = "on"  # what the next writes want
        self._session_sync = "on"  # what the connection's session has; FULL over an `off` session is SET LOCAL
        self._clock_at: tuple[float, float] | None = None  # the database's clock read: (its time, monotonic)
        self._psycopg = driver()
        self._held_locks: list[PgKeyLock] = []  # key locks taken through this store: they fence its intents
        _OPEN[url] = _OPEN.get(url, 0) + 1
        self._counted = True
        with self._lock:
            try:
                self._connection("opening it")  # checks (and for a writer, migrates) the schema
            except self._psycopg.Error as e:
                self.close()
                raise describe(e, url, "opening it") from None
            except BaseException:
                self.close()
                raise

    # -- plumbing ------------------------------------------------------------------------------------

    def _connection(self, doing: str) -> Any:
        """The open connection, connecting (again) when there is none or the last one broke."""
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            try:
                self._conn.close()
            finally:
                self._conn = None
        if self._conn is None:
            extra = {"connect_timeout": str(max(1, int(self._timeout)))} if self._timeout else {}
            settings = f"-c synchronous_commit={self._sync}" + (" -c default_transaction_read_only=on"
                                                                 if self.readonly else "")
            conn = connect(self.url, doing, settings, **extra)
            self._session_sync = self._sync
            try:
                self._check_schema(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _check_schema(self, conn: Any) -> None:
        """Once per connection (the one that opens the store, and each one that replaces a lost one): the
        database's schema is one this DAL knows, migrated to it for a writer. A database restored meanwhile
        from an older backup, or upgraded by a newer DAL, is found here, before the connection's first use."""
        have = schema.version(conn)
        if have > schema.SCHEMA_VERSION:
            raise StoreError(f"the PostgreSQL store {self.path} has schema version {have}, made by a newer "
                             f"DAL (this one knows up to {schema.SCHEMA_VERSION}); upgrade DAL", self.path)
        if self.readonly and have == 0:
            raise NoStore(f"no runs yet: the database {self.path} has no DAL tables", self.path)
        if not self.readonly and have < schema.SCHEMA_VERSION:
            schema.migrate(conn)

    @contextmanager
    def _write(self, doing: str, *, single: bool = False) -> Iterator[Any]:
        """A write transaction. `single`: the caller runs one statement, which commits on its own (autocommit:
        no BEGIN and COMMIT round trips), unless this commit must say its durability (FULL over NORMAL)."""
        if self.readonly:
            raise StoreError(f"the run store {self.path} was opened read-only; cannot write while {doing}.", self.path)
        with self._lock:
            try:
                conn = self._connection(doing)
                if single and self._sync == self._session_sync:
                    yield conn
                    return
                with conn.transaction():
                    if self._sync != self._session_sync:  # FULL asked for over a NORMAL session: this commit
                        conn.execute(f"SET LOCAL synchronous_commit = {self._sync}")
                    yield conn
            except self._psycopg.Error as e:
                raise describe(e, self.url, doing) from None

    def _read(self, doing: str, fn: Callable[[Any], T]) -> T:
        """`fn`'s statements, each on its own (autocommit): at READ COMMITTED, which DAL's statements are written
        for, each statement of a transaction takes a snapshot of its own anyway, so a transaction around reads
        would add only its BEGIN and COMMIT, two round trips."""
        with self._lock:
            try:
                return fn(self._connection(doing))
            except self._psycopg.Error as e:
                raise describe(e, self.url, doing) from None

    @staticmethod
    def _dicts(cur: Any) -> list[dict[str, Any]]:
        names = [d.name for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def close(self) -> None:
        """Close the connection; the last open store of a database closes the idle key lock connections this
        process kept for it too."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                finally:
                    self._conn = None
            if self._counted:
                self._counted = False
                _OPEN[self.url] -= 1
                if not _OPEN[self.url] and "dal.receipts.pg.lock" in sys.modules:
                    from dal.receipts.pg.lock import close_idle

                    close_idle(self.url)  # the last store of this database this process had open

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version(self) -> int:
        """The database's DAL schema version (0: no DAL tables yet)."""
        return self._read("reading its version", schema.version)

    def server(self) -> dict[str, Any]:
        """What `dal store check` shows of the server: its version, the database, the round trip, its clock."""
        import time

        def read(c: Any) -> dict[str, Any]:
            t0 = time.monotonic()
            c.execute("SELECT 1").fetchone()
            rtt = time.monotonic() - t0
            version, db, now = c.execute("SELECT current_setting('server_version'), current_database(),"
                                         " extract(epoch FROM clock_timestamp())::float8").fetchone()
            return {"server_version": version, "database": db, "round_trip_ms": round(rtt * 1000, 3),
                    "clock_skew_s": round(float(now) - time.time(), 3)}

        return self._read("checking the server", read)

    def set_synchronous(self, level: str) -> None:
        """FULL: a commit is on the server's disk before it returns; NORMAL: survives kill -9 of DAL only."""
        level = level.upper()
        if level not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, not {level!r}")
        self._sync = "on" if level == "FULL" else "off"
        with self._lock:  # NORMAL is the session's (once); FULL, the commits' while it is asked for (_write)
            if self._sync == "off" and self._session_sync != "off" and self._conn is not None and not self._conn.broken:
                try:
                    self._conn.execute("SET synchronous_commit = off")
                except self._psycopg.Error as e:
                    raise describe(e, self.url, "setting its durability") from None
                self._session_sync = "off"

    def free_reserve(self) -> bool:
        """A database server keeps no reserve file beside DAL (its disk is its administrator's)."""
        return False

    def integrity_check(self) -> list[str]:
        """Problems with the DAL tables: the ones missing."""
        def read(c: Any) -> list[str]:
            return [f"table {t} is missing" for t in schema.TABLES
                    if not c.execute("SELECT to_regclass(%s) IS NOT NULL", (t,)).fetchone()[0]]

        return self._read("checking it", read)

    # -- runs and receipts ---------------------------------------------------------------------------

    def begin_run(self, run_id: str, *, operation: str, key: str | None = None, script_path: str | None = None,
                  started_at: str | None = None, previous_run: str | None = None, pid: int | None = None,
                  policy: Any = None, fence: Any = None) -> None:
        """As Store.begin_run: `fence` (a worker's run of a job) records this process as the job's holder in
        the same transaction, while the job still runs under that lease."""
        from dal.core.liveness import identity

        pid = os.getpid() if pid is None else pid
        pid_start, boot = identity(pid)
        with self._write(f"starting run {run_id}", single=previous_run is None) as c:
            if previous_run is not None:
                if c.execute("SELECT 1 FROM runs WHERE run_id = %s", (run_id,)).fetchone():
                    raise StoreError(f"run {run_id} is recorded already in {self.path}", self.path)
                # The run it continues is locked for this transaction: two runs continuing it are serialized,
                # and the second sees the first (a run has at most one successor).
                c.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (previous_run,))
                later = c.execute("SELECT run_id FROM runs WHERE previous_run = %s LIMIT 1", (previous_run,)).fetchone()
                if later is not None:
                    raise RunContinued(
                        f"run {previous_run} was already continued by run {later[0]}, recorded while this one "
                        f"was starting: another invocation of the operation runs it. Nothing ran.", self.path, later[0])
            values = (run_id, _utf8(operation), _opt(key), _opt(script_path), started_at or utc_timestamp(),
                      previous_run, pid, pid_start, boot, os.uname().nodename, jsonb(policy))
            insert = ("INSERT INTO runs (run_id, operation, key, status, script_path, started_at, previous_run,"
                      " pid, pid_start, boot_id, host, policy)"
                      " VALUES (%s, %s, %s, 'running', %s, %s, %s, %s, %s, %s, %s, %s::jsonb)"
                      " ON CONFLICT (run_id) DO NOTHING")
            if fence is None:
                added = c.execute(insert, values).rowcount
            else:  # one statement: the run, then the job's holder only where the run was added
                ident = {"pid": pid, "start": pid_start, "boot": boot, "worker": fence.owner}
                added = c.execute(
                    f"WITH ins AS ({insert} RETURNING 1), holder AS (UPDATE jobs SET holder = %s WHERE job_id = %s"
                    " AND lease_epoch = %s AND lease_owner = %s AND state = 'running' AND EXISTS (SELECT 1 FROM ins))"
                    " SELECT count(*) FROM ins",
                    (*values, json.dumps(ident), fence.job_id, fence.epoch, fence.owner)).fetchone()[0]
            if not added:  # a run id recorded already: nothing was written
                raise StoreError(f"run {run_id} is recorded already in {self.path}", self.path)

    def save_receipt(self, receipt: dict[str, Any], *, validate: bool | None = None) -> None:
        self.save_receipts([receipt], validate=validate)

    def save_receipts(self, receipts: Iterable[dict[str, Any]], *, validate: bool | None = None) -> int:
        from dal.receipts.schema import checked

        batch = checked(receipts, validate)
        if not batch:
            return 0
        what = f"saving the receipt of {batch[0]['run_id']}" if len(batch) == 1 else f"saving {len(batch)} receipts"
        with self._write(what) as c:
            for receipt in batch:
                self._insert_receipt(c, receipt)
        return len(batch)

    def _insert_receipt(self, c: Any, receipt: dict[str, Any]) -> None:
        loops = receipt.get("loops") or []
        run_id = receipt["run_id"]
        script = receipt.get("script") or {}
        c.execute(  # the run's loops from an earlier save go in the same statement (a data-modifying WITH)
            "WITH gone AS (DELETE FROM loops WHERE run_id = %s)"
            " INSERT INTO runs (run_id, operation, key, status, retry, external_effect, blocker, script_path,"
            " started_at, finished_at, duration_ms, previous_run, skipped_of, pid, receipt)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb)"
            " ON CONFLICT (run_id) DO UPDATE SET operation = excluded.operation, key = excluded.key,"
            " status = excluded.status, retry = excluded.retry, external_effect = excluded.external_effect,"
            " blocker = excluded.blocker, script_path = excluded.script_path, started_at = excluded.started_at,"
            " finished_at = excluded.finished_at, duration_ms = excluded.duration_ms,"
            " previous_run = excluded.previous_run, skipped_of = excluded.skipped_of, receipt = excluded.receipt",
            (run_id, run_id, _utf8(receipt["operation"]), _opt(receipt.get("key")), receipt["status"],
             receipt.get("retry"),
             receipt.get("external_effect"), _opt(receipt.get("blocker")), _opt(script.get("path")),
             receipt["attempted_at"], receipt.get("finished_at"), receipt.get("duration_ms"),
             receipt.get("previous_run"), receipt.get("skipped_of"), os.getpid(),
             jsonb({**receipt, "loops": []})),
        )
        if loops:
            with c.cursor() as cur:
                cur.executemany(
                    'INSERT INTO loops (run_id, idx, kind, file, line, "column", exit, clause, iterations, receipt)'
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb)",
                    [(run_id, i, lp["kind"], lp["file"], lp["line"], lp["column"], lp["exit"], lp.get("clause"),
                      lp["iterations"], jsonb(lp)) for i, lp in enumerate(loops)],
                )

    def _assemble(self, c: Any, run_id: str, body: Any) -> dict[str, Any]:
        receipt = dict(unjsonb(body))
        rows = c.execute("SELECT receipt FROM loops WHERE run_id = %s ORDER BY idx", (run_id,)).fetchall()
        receipt["loops"] = [unjsonb(r[0]) for r in rows]
        return receipt

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        def read(c: Any) -> dict[str, Any] | None:
            row = c.execute("SELECT receipt FROM runs WHERE run_id = %s", (run_id,)).fetchone()
            return None if row is None or row[0] is None else self._assemble(c, run_id, row[0])

        return self._read(f"reading run {run_id}", read)

    def run_row(self, run_id: str) -> dict[str, Any] | None:
        def read(c: Any) -> dict[str, Any] | None:
            rows = self._dicts(c.execute(
                f"SELECT {_RUN_COLUMNS}, pid, pid_start, boot_id, policy FROM runs WHERE run_id = %s", (run_id,)))
            if not rows:
                return None
            out = rows[0]
            out["policy"] = unjsonb(out["policy"])
            later = c.execute("SELECT run_id FROM runs WHERE previous_run = %s ORDER BY ord DESC LIMIT 1",
                              (run_id,)).fetchone()
            out["resumed_by"] = later[0] if later else None
            return out

        return self._read(f"reading run {run_id}", read)

    def run_ids_with_prefix(self, prefix: str, limit: int = 6) -> list[str]:
        return self._read(f"looking up {prefix!r}", lambda c: [r[0] for r in c.execute(
            "SELECT run_id FROM runs WHERE starts_with(run_id, %s) ORDER BY run_id COLLATE \"C\" LIMIT %s",
            (prefix, limit)).fetchall()])

    def loops(self, run_id: str) -> list[dict[str, Any]]:
        return self._read(f"reading the loops of {run_id}", lambda c: [unjsonb(r[0]) for r in c.execute(
            "SELECT receipt FROM loops WHERE run_id = %s ORDER BY idx", (run_id,)).fetchall()])

    def find(self, ref: str) -> dict[str, Any]:
        ref = ref.strip()
        return self._read(f"looking up {ref!r}", lambda c: self._find(c, ref))

    def _find(self, c: Any, ref: str) -> dict[str, Any]:
        if not ref:
            raise RunNotFound("give a run id, an operation or key, or `latest`", self.path)
        if ref == "latest":
            row = c.execute("SELECT run_id, receipt FROM runs WHERE receipt IS NOT NULL"
                            " ORDER BY ord DESC LIMIT 1").fetchone()  # the run recorded last
            if row is None:
                raise RunNotFound(f"no finished runs yet in {self.path}", self.path)
            return self._assemble(c, row[0], row[1])
        if ref.startswith("run_"):
            rows = c.execute("SELECT run_id, receipt FROM runs WHERE starts_with(run_id, %s)"
                             " ORDER BY run_id COLLATE \"C\" LIMIT 6", (ref,)).fetchall()
            exact = [r for r in rows if r[0] == ref]
            if exact:
                rows = exact
            if len(rows) > 1:
                shown = ", ".join(r[0] for r in rows[:5])
                raise RunNotFound(
                    f"{ref!r} matches several runs ({shown}{', …' if len(rows) > 5 else ''}); give more of the id",
                    self.path)
            if rows:
                run_id, body = rows[0]
                if body is None:
                    raise RunNotFound(f"run {run_id} has not finished yet: it has no receipt", self.path)
                return self._assemble(c, run_id, body)
            if RUN_ID_RE.match(ref):
                raise RunNotFound(f"no run {ref} in {self.path} (list runs with `dal receipts`)", self.path)
        row = c.execute("SELECT run_id, receipt FROM runs WHERE (key = %s OR operation = %s) AND receipt IS NOT NULL"
                        " ORDER BY ord DESC LIMIT 1", (ref, ref)).fetchone()
        if row is None:
            raise RunNotFound(f"no run, operation or key matches {ref!r} in {self.path} (list runs with "
                              "`dal receipts`)", self.path)
        return self._assemble(c, row[0], row[1])

    def list_runs(self, *, status: str | None = None, operation: str | None = None, key: str | None = None,
                  waiting: bool = False, limit: int | None = 50, retry: str | None = None) -> list[dict[str, Any]]:
        where, args = _filters(status=status, operation=operation, key=key, waiting=waiting, retry=retry)
        sql = f"SELECT {_RUN_COLUMNS} FROM runs{where} ORDER BY ord DESC"  # the order the store recorded them
        if limit is not None:
            sql += " LIMIT %s"
            args.append(max(0, int(limit)))
        return self._read("listing runs", lambda c: self._dicts(c.execute(sql, args)))

    def runs_of_key(self, key: str, *, limit: int | None = 20) -> list[dict[str, Any]]:
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE key = %s ORDER BY ord DESC"
        args: list[Any] = [key]
        if limit is not None:
            sql += " LIMIT %s"
            args.append(max(0, int(limit)))
        return self._read(f"listing the runs of {key!r}", lambda c: self._dicts(c.execute(sql, args)))

    def policy_files(self, workspace: str) -> list[str]:
        """The policy files runs in `workspace` started under (contract.RunStore.policy_files)."""
        sql = ("SELECT DISTINCT policy #>> '{spec,policy,source}' FROM runs"
               " WHERE policy #>> '{spec,policy,file_sha256}' IS NOT NULL"
               " AND policy #>> '{spec,policy,workspace}' = %s")
        return self._read("listing the policy files of runs", lambda c: [
            r[0] for r in c.execute(sql, (workspace,)).fetchall() if isinstance(r[0], str)])

    def count_runs(self, *, status: str | None = None, operation: str | None = None, key: str | None = None,
                   waiting: bool = False, retry: str | None = None) -> int:
        where, args = _filters(status=status, operation=operation, key=key, waiting=waiting, retry=retry)
        return self._read("counting runs", lambda c: int(c.execute(f"SELECT count(*) FROM runs{where}",
                                                                   args).fetchone()[0]))

    def lineage(self, run_id: str, *, limit: int = 10_000) -> list[dict[str, Any]]:
        def read(c: Any) -> list[dict[str, Any]]:
            out = self._dicts(c.execute(
                "WITH RECURSIVE chain(run_id, depth) AS (SELECT %s::text, 0 UNION ALL"
                " SELECT r.previous_run, chain.depth + 1 FROM runs r JOIN chain ON r.run_id = chain.run_id"
                " WHERE r.previous_run IS NOT NULL AND chain.depth + 1 < %s)"
                " SELECT runs.run_id, runs.previous_run, runs.status, runs.key, runs.pid, runs.pid_start,"
                " runs.boot_id, runs.policy FROM chain JOIN runs ON runs.run_id = chain.run_id ORDER BY chain.depth",
                (run_id, max(1, int(limit)))))
            for row in out:
                row["policy"] = unjsonb(row["policy"])
            return out

        return self._read(f"reading the runs before {run_id}", read)

    def newest_run_of_key(self, key: str,
                          visible: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any] | None:
        from dal.receipts.queries import newest_run_of_key

        return newest_run_of_key(self, key, visible)  # type: ignore[arg-type]

    def find_run(self, ref: str) -> dict[str, Any]:
        from dal.receipts.queries import find_run

        return find_run(self, ref)  # type: ignore[arg-type]

    # -- the effect journal --------------------------------------------------------------------------

    def journal_intent(self, run_id: str, seq: int, command: str, effect_class: str | None, *,
                       detail: dict[str, Any] | None = None, fence: Any = None) -> None:
        with self._write(f"journaling effect {seq} of {run_id}") as c:
            self._put_entry(c, run_id, seq, command, effect_class, detail, None, fence)

    def journal_result(self, run_id: str, seq: int, result_json: Any, *, status: str | None = None) -> None:
        if status is None:
            status = result_json.get("status") if isinstance(result_json, dict) else None
            status = status if isinstance(status, str) else "done"
        with self._write(f"journaling the result of effect {seq} of {run_id}", single=True) as c:
            cur = c.execute("UPDATE effects SET result = %s::jsonb, status = %s, result_at = %s"
                            " WHERE run_id = %s AND seq = %s",
                            (jsonb(pack_result(result_json)), status, utc_timestamp(), run_id, seq))
            if cur.rowcount == 0:
                raise StoreError(f"no intent journaled for effect {seq} of run {run_id}; record the intent first.",
                                 self.path)

    def journal(self, run_id: str) -> list[dict[str, Any]]:
        def read(c: Any) -> list[dict[str, Any]]:
            rows = self._dicts(c.execute(
                "SELECT seq, command, class, status, intent_at, result_at, detail, result FROM effects"
                " WHERE run_id = %s ORDER BY seq", (run_id,)))
            for row in rows:
                row["detail"] = unjsonb(row["detail"])
                row["result"] = None if row["result"] is None else unpack_result(unjsonb(row["result"]))
            return rows

        return self._read(f"reading the journal of {run_id}", read)

    def journal_hold(self, run_id: str, seq: int, command: str, effect_class: str | None, *,
                     detail: dict[str, Any] | None = None, decided_in: Iterable[str] = (),
                     kinds: Iterable[str] = (), after: int = 0, fence: Any = None,
                     act: Callable[[dict[str, Any]], tuple[dict[str, Any], Any] | None] | None = None,
                     result: Any = None) -> dict[str, Any] | None:
        """As the SQLite store's (Store.journal_hold): the newest matching decision, or the hold journaled,
        in one transaction. This and record_approval take the same per-run advisory locks first
        (_decision_lock), so a decision being recorded is either seen here or recorded after the hold."""
        runs, wanted = list(dict.fromkeys(decided_in)), list(dict.fromkeys(kinds))
        with self._write(f"journaling effect {seq} of {run_id}") as c:
            if runs and wanted:
                _decision_lock(c, runs)
                rows = self._dicts(c.execute(
                    "SELECT id, run_id, seq, decision, who, at, note FROM approvals"
                    " WHERE run_id = ANY(%s) AND seq = %s AND decision = ANY(%s) AND id > %s"
                    " AND (command IS NULL OR command = %s) ORDER BY id DESC LIMIT 1",
                    (runs, seq, wanted, after, command)))
                if rows:
                    found = rows[0]
                    entry = act(found) if act is not None else None
                    if entry is not None:
                        self._put_entry(c, run_id, seq, command, effect_class, entry[0], entry[1], fence)
                    elif fence is not None:
                        _fenced(c, fence, self.path)
                    return found
            self._put_entry(c, run_id, seq, command, effect_class, detail, result, fence)
        return None

    def _put_entry(self, c: Any, run_id: str, seq: int, command: str, effect_class: str | None,
                   detail: dict[str, Any] | None, result: Any, fence: Any) -> None:
        """An intent (and its result, when not None) inside the caller's transaction. With a fence, the
        INSERT itself requires the job's lease (epoch, owner, not run out by the database's clock), under a
        share lock of the job's row: a takeover's claim waits for this transaction, or this statement sees
        the claim and writes nothing (jobs.Fenced)."""
        for lock in self._held_locks:
            lock.check(c, run_id, seq)  # LockLost when a key lock's session ended (dal/receipts/pg/lock.py)
        # Continued when another run continues this one (it judged this run dead). The share lock of our row
        # comes first, in its own statement: a successor's begin_run locks the row FOR UPDATE, so either it
        # waits for this intent (and reads it in the journal), or the next statement's snapshot sees it.
        c.execute("SELECT 1 FROM runs WHERE run_id = %s FOR SHARE", (run_id,))
        later = c.execute("SELECT run_id FROM runs WHERE previous_run = %s LIMIT 1", (run_id,)).fetchone()
        if later is not None:
            raise continued_error(run_id, seq, later[0], self.path)
        values = (run_id, seq, command, effect_class, utc_timestamp(), jsonb(detail))
        upsert = (" ON CONFLICT (run_id, seq) DO UPDATE SET command = excluded.command, class = excluded.class,"
                  " intent_at = excluded.intent_at, detail = excluded.detail WHERE effects.result IS NULL")
        if fence is None:
            cur = c.execute("INSERT INTO effects (run_id, seq, command, class, status, intent_at, detail)"
                            " VALUES (%s, %s, %s, %s, 'intent', %s, %s::jsonb)" + upsert, values)
        else:
            cur = c.execute(
                "WITH lease AS (SELECT job_id FROM jobs WHERE job_id = %s AND lease_epoch = %s AND lease_owner = %s"
                " AND state = 'running' AND lease_until >= extract(epoch FROM clock_timestamp()) FOR SHARE)"
                " INSERT INTO effects (run_id, seq, command, class, status, intent_at, detail)"
                " SELECT %s, %s, %s, %s, 'intent', %s, %s::jsonb FROM lease" + upsert,
                (fence.job_id, fence.epoch, fence.owner, *values))
        if cur.rowcount == 0:
            if fence is not None:
                _fenced(c, fence, self.path)
            raise StoreError(f"effect {seq} of run {run_id} already has a journaled result; it is final.", self.path)
        if result is not None:
            status = result.get("status") if isinstance(result, dict) else None
            c.execute("UPDATE effects SET result = %s::jsonb, status = %s, result_at = %s"
                      " WHERE run_id = %s AND seq = %s",
                      (jsonb(result), status if isinstance(status, str) else "done", utc_timestamp(), run_id, seq))

    # -- decisions -----------------------------------------------------------------------------------

    def record_approval(self, run_id: str, seq: int | None, decision: str, *, who: str | None = None,
                        note: str | None = None, command: str | None = None,
                        unless_acted_by: str | None = None) -> dict[str, Any]:
        row = {"run_id": run_id, "seq": seq, "decision": decision, "who": who or decider(), "at": utc_timestamp(),
               "note": note}
        with self._write(f"recording a decision for {run_id}") as c:
            _decision_lock(c, [run_id] + ([unless_acted_by] if unless_acted_by else []))
            if unless_acted_by is not None:
                got = c.execute("SELECT detail, result FROM effects WHERE run_id = %s AND seq = %s",
                                (unless_acted_by, seq)).fetchone()
                detail = (unjsonb(got[0]) or {}) if got is not None else {}
                if got is not None and "decision" in detail and not (detail.get("pending") or detail.get("uncertain")):
                    raise DecisionTooLate(
                        f"run {unless_acted_by} already acted on an earlier decision about effect {seq} "
                        + ("and recorded its result" if got[1] is not None else "and is executing it now"),
                        self.path, unless_acted_by, got[1] is not None)
            row["id"] = c.execute(
                "INSERT INTO approvals (run_id, seq, decision, who, at, note, command)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (run_id, seq, decision, row["who"], row["at"], note, command)).fetchone()[0]
        try:
            self._notify("decision", run_id)
        except StoreError:
            pass  # a wake-up only: workers poll as well
        return row

    def approvals(self, run_id: str) -> list[dict[str, Any]]:
        return self._read(f"reading decisions for {run_id}", lambda c: self._dicts(c.execute(
            "SELECT id, run_id, seq, decision, who, at, note, command FROM approvals WHERE run_id = %s ORDER BY id",
            (run_id,))))

    def _notify(self, event: str, what: str) -> None:
        """Wake idle workers (LISTEN dal_jobs): on a submit, a decision or a requeue only."""
        from dal.receipts.pg.jobs import CHANNEL

        with self._write("waking workers") as c:
            c.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{event}:{what}"[:7000]))

    # -- the operation lock and the queue ------------------------------------------------------------

    def operation_lock(self, key: str) -> PgKeyLock:
        """An advisory lock of the key, on a connection of its own: released when it is let go or when that
        connection dies (its process killed, its host cut off: the server notices through keepalives)."""
        from dal.receipts.pg.lock import PgKeyLock

        return PgKeyLock(self, key)

    def key_holder(self, key: str) -> dict[str, Any] | None:
        """Who holds the key's lock right now (pid, host, run_id), by any host; None when no one does."""
        from dal.receipts.pg.lock import PgKeyLock

        probe = PgKeyLock(self, key)
        return self._read(f"reading who runs operation {key!r}", probe._holder) or None  # noqa: SLF001

    def lost_key_holder(self, key: str) -> dict[str, Any] | None:
        """The key's last holder when it never let go of the lock and no one holds it now (its session ended,
        its process perhaps alive): run_id, pid, host and where it runs (`start`, `where`); else None."""
        from dal.receipts.pg.lock import lock_id

        def read(c: Any) -> dict[str, Any] | None:
            if schema.version(c) < 2:  # a database an older DAL made, opened read-only: no holder column yet
                return None
            got = c.execute(
                "SELECT k.run_id, k.pid, k.host, k.holder FROM key_locks k WHERE k.lock_id = %s AND NOT EXISTS"
                " (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
                " AND l.classid = ((k.lock_id >> 32) & 4294967295)::bigint::oid"
                " AND l.objid = (k.lock_id & 4294967295)::bigint::oid)", (lock_id(key),)).fetchone()
            if got is None or not got[0]:
                return None
            return {"run_id": got[0], "pid": got[1], "host": got[2], **(got[3] or {})}

        return self._read(f"reading who ran operation {key!r}", read)

    def locks_where(self) -> str:
        return f"the advisory locks of {self.path}"

    def jobs(self, *, owned: bool = False) -> PgJobQueue:
        """The job queue over this store's connection (`owned`: closing the queue closes the store)."""
        from dal.receipts.pg.jobs import PgJobQueue

        return PgJobQueue(self, owned=owned)


def _decision_lock(c: Any, runs: list[str]) -> None:
    """Serialize a gate's read of decisions with the recording of one: a transaction-level advisory lock per
    run whose decisions it reads or writes (journal_hold and record_approval take the same ones)."""
    from dal.core.digest import sha256

    for run in sorted(set(runs)):
        c.execute("SELECT pg_advisory_xact_lock(%s)",
                  (int.from_bytes(sha256(b"dal-decisions:" + run.encode()).digest()[:8], "big", signed=True),))


def _fenced(c: Any, fence: Any, where: str) -> None:
    """Raise jobs.Fenced explaining why `fence` no longer holds (read in the caller's transaction)."""
    from dal.receipts.errors import Fenced

    row = c.execute("SELECT state, lease_epoch, lease_owner, lease_until, extract(epoch FROM clock_timestamp())"
                    " FROM jobs WHERE job_id = %s", (fence.job_id,)).fetchone()
    if row is None:
        raise Fenced(f"job {fence.job_id} is not in the run store: this worker no longer runs it", where)
    state, epoch, owner, until, now = row
    now = float(now)
    if state == "cancelled":
        raise Fenced(f"job {fence.job_id} was cancelled: this worker stops running it", where)
    if epoch != fence.epoch or owner != fence.owner:
        raise Fenced(f"job {fence.job_id} was taken over by {owner or 'another worker'} (lease epoch {epoch}; "
                     f"this worker held epoch {fence.epoch}): this worker no longer runs it, and the job goes on "
                     "from its journal where it runs now", where)
    if state != "running":
        raise Fenced(f"job {fence.job_id} is {state}: this worker no longer runs it", where)
    if until is None or until < now:
        raise Fenced(f"the lease of job {fence.job_id} ran out {now - (until or now):.1f} s ago by the database's "
                     "clock and was not renewed: this worker starts no new effect of it", where)


def _filters(*, status: str | None, operation: str | None, key: str | None, waiting: bool,
             retry: str | None = None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    args: list[Any] = []
    if status:
        clauses.append("status = %s")
        args.append(status)
    if retry:
        clauses.append("retry = %s")
        args.append(retry)
    if waiting:
        clauses.append("status = 'waiting' AND NOT EXISTS (SELECT 1 FROM runs later"
                       " WHERE later.previous_run = runs.run_id)")
    if operation:
        if any(ch in operation for ch in "*?["):
            rx = _glob_regex(operation)
            clauses.append("(operation ~ %s OR key ~ %s)")
            args += [rx, rx]
        else:
            clauses.append("(operation = %s OR key = %s)")
            args += [operation, operation]
    if key is not None:
        clauses.append("key = %s")
        args.append(key)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def _glob_regex(pattern: str) -> str:
    """SQLite's GLOB (`*`, `?`, `[...]`, case-sensitive, whole text) as a PostgreSQL regular expression."""
    out, i = ["^"], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[" and "]" in pattern[i + 2:] + pattern[i + 1:i + 2]:
            end = pattern.index("]", i + 2) if pattern[i + 1:i + 2] == "]" else pattern.index("]", i + 1)
            body = pattern[i + 1:end]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out) + "$"


def _opt(text: Any) -> Any:
    return _utf8(text) if isinstance(text, str) else text
