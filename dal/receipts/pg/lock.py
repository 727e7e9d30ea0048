"""One key, one runner, across hosts: the PostgreSQL store's operation lock is a session-level advisory lock on
a connection of the lock's own. The server releases it when the holder lets go or its session ends: the
process exits (kill -9 included: the socket closes), or its host is cut off (TCP keepalives, then
tcp_user_timeout, see dal/receipts/pg/connect.py: seconds, not hours). No pid is trusted across hosts.

Advisory locks are re-entrant within one session, so each PgKeyLock has its own connection: two locks of
one key in one process exclude each other as two processes do. Who holds a key (for KeyBusy's message) is
a row of `key_locks` the holder writes once it has the lock, and it is believed only while the lock is
held by the backend that wrote it.

A session can end while its process lives on (a network cut of that one connection, a pooler's or the
server's idle timeout, `pg_terminate_backend`), and the lock with it. So the lock is a fence:
every intent the run journals checks, in the intent's own transaction, that the lock is still held by the
very session that took it (`pg_locks` for its backend pid, with that backend's start time so that a reused
pid does not count), under a shared transaction lock of the key's fence id; a new holder takes that fence id
exclusively once it has the key (the barrier, in `acquire`), so an intent whose check passed before the lock
was lost has committed before the new holder reads the journal, and every later one fails (LockLost, nothing
written).
The lock's session is also kept from idling out: `idle_session_timeout` and
`idle_in_transaction_session_timeout` are 0 for it, as for every DAL session (dal/receipts/pg/connect.py).

A lock's connection is kept once it lets go, for the process's next lock (a job process takes one per job):
a connection is lent to one lock at a time, so two locks still never share a session, and only a connection
whose unlock the server confirmed goes back. A kept connection found dead (a server restart) is replaced by
a new one before the lock is tried. Connections a forked child inherits are its parent's: never used there.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from dal.core.digest import sha256
from dal.core.liveness import holder_identity
from dal.receipts.errors import LockLost
from dal.receipts.oplock import KeyBusy
from dal.receipts.pg.connect import connect, describe

if TYPE_CHECKING:
    from dal.receipts.pg.store import PgStore


def lock_id(key: str) -> int:
    """The advisory lock's 64-bit id for operation `key` (a digest: keys are text of any length)."""
    return int.from_bytes(sha256(b"dal-key:" + key.encode("utf-8")).digest()[:8], "big", signed=True)


def fence_id(key: str) -> int:
    """The transaction-level advisory lock that orders a holder's intents before a new holder's reads."""
    return int.from_bytes(sha256(b"dal-key-fence:" + key.encode("utf-8")).digest()[:8], "big", signed=True)

# Idle lock connections of this process, by URL: each (connection, (backend pid, backend start)).
_IDLE: dict[str, list[tuple[Any, tuple[int, Any]]]] = {}
_IDLE_PID = os.getpid()
_IDLE_MAX = 8
# What a forked child found in its parent's pool: kept referenced and never used, since closing a connection
# (or letting it be collected) says goodbye on the parent's socket and ends the parent's session.
_INHERITED: list[Any] = []


def _pool(url: str) -> list[tuple[Any, tuple[int, Any]]]:
    global _IDLE_PID
    if _IDLE_PID != os.getpid():
        _INHERITED.extend(_IDLE.values())
        _IDLE.clear()
        _IDLE_PID = os.getpid()
    return _IDLE.setdefault(url, [])


def close_idle(url: str) -> None:
    """Close this process's idle lock connections to `url` (its store is closed: a command that ends, a test;
    a job process keeps its store, and so its lock connection, for its whole life)."""
    for conn, _backend in _pool(url):
        _quietly_close(conn)
    _IDLE.pop(url, None)


def _quietly_close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - a connection that failed is closed on a best-effort basis
        pass


_HELD = ("SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
         " WHERE l.locktype = 'advisory' AND l.granted AND l.pid = %s AND a.backend_start = %s"
         " AND l.classid = ((%s >> 32) & 4294967295)::bigint::oid AND l.objid = (%s & 4294967295)::bigint::oid"
         " AND l.objsubid = 1)")


class PgKeyLock:
    """The lock of one operation key; `acquire` raises KeyBusy naming the holder (pid, host, run)."""

    def __init__(self, store: PgStore, key: str) -> None:
        self.store = store
        self.key = key
        self.id = lock_id(key)
        self.fence_id = fence_id(key)
        self._conn: Any = None
        self._backend: tuple[int, Any] | None = None  # the session holding the lock: backend pid, its start
        # The holder before this one, when it never let go (its session ended: killed, or cut off while its
        # process may live on); the runner decides whether that run is provably still live.
        self.lost_holder: dict[str, Any] | None = None

    def acquire(self, run_id: str, wait: float | None = None) -> None:
        psycopg = self.store._psycopg  # noqa: SLF001 - one driver per store
        doing = f"locking operation {self.key!r}"
        conn, backend, kept = self._connection(doing)
        deadline = time.monotonic() + (wait or 0.0)
        try:
            try:
                got = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.id,)).fetchone()[0]
            except psycopg.OperationalError:
                if not kept:
                    raise
                _quietly_close(conn)  # a kept connection the server ended meanwhile (a restart): a new one
                conn, backend, kept = self._connection(doing, fresh=True)
                got = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.id,)).fetchone()[0]
            while not got:
                if time.monotonic() >= deadline:
                    holder = self._holder(conn)
                    raise KeyBusy(self.key, holder)
                time.sleep(0.05)
                got = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.id,)).fetchone()[0]
            # One statement, once the lock is taken: the holder before this one read, this one's row written,
            # and the barrier (the fence id taken exclusively: it waits for the previous holder's intents in
            # flight, each holding it shared for its transaction; once it returns, every intent that holder
            # commits later fails its check).
            old = conn.execute(
                "WITH old AS (SELECT run_id, pid, host, holder FROM key_locks WHERE lock_id = %s),"
                " put AS (INSERT INTO key_locks (lock_id, key, run_id, pid, host, backend_pid, holder)"
                " VALUES (%s, %s, %s, %s, %s, pg_backend_pid(), %s) ON CONFLICT (lock_id) DO UPDATE SET"
                " key = excluded.key, run_id = excluded.run_id, pid = excluded.pid, host = excluded.host,"
                " backend_pid = excluded.backend_pid, holder = excluded.holder, taken_at = clock_timestamp()),"
                " barrier AS (SELECT pg_advisory_xact_lock(%s))"
                " SELECT old.run_id, old.pid, old.host, old.holder FROM barrier LEFT JOIN old ON true",
                (self.id, self.id, self.key, run_id, os.getpid(), os.uname().nodename,
                 json.dumps(holder_identity()), self.fence_id)).fetchone()
            self.lost_holder = ({"run_id": old[0], "pid": old[1], "host": old[2], "holder": old[3]}
                                if old and old[0] else None)
            self._backend = backend
        except psycopg.Error as e:
            _quietly_close(conn)
            raise describe(e, self.store.url, doing) from None
        except BaseException:
            self._let_go(conn, backend, held=False)
            raise
        self._conn = conn
        self.store._held_locks.append(self)  # noqa: SLF001 - the store fences its intents with it

    def _connection(self, doing: str, *, fresh: bool = False) -> tuple[Any, tuple[int, Any], bool]:
        """A connection of this process's own for the lock, its backend's pid and start time, and whether it
        was kept from an earlier lock (one that looks alive), else new (always, with `fresh`)."""
        idle = _pool(self.store.url)
        while idle and not fresh:
            conn, backend = idle.pop()
            if not (conn.closed or conn.broken):
                return conn, backend, True
            _quietly_close(conn)
        conn = connect(self.store.url, doing)
        try:
            backend = conn.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
                                   ).fetchone()
        except self.store._psycopg.Error as e:  # noqa: SLF001
            _quietly_close(conn)
            raise describe(e, self.store.url, doing) from None
        return conn, (backend[0], backend[1]), False

    def _let_go(self, conn: Any, backend: tuple[int, Any] | None, *, held: bool) -> None:
        """Keep `conn` for the process's next lock once it holds no lock (`held`: it held this one, to be
        unlocked first); close it when that cannot be made sure of."""
        try:
            if held or conn.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
                                    " AND pid = pg_backend_pid())").fetchone()[0]:
                if not conn.execute("SELECT pg_advisory_unlock(%s)", (self.id,)).fetchone()[0]:
                    raise RuntimeError("the lock was not this session's")
        except Exception:  # noqa: BLE001 - closing the session lets go of the lock anyway
            _quietly_close(conn)
            return
        idle = _pool(self.store.url)
        if backend is None or len(idle) >= _IDLE_MAX or conn.closed or conn.broken:
            _quietly_close(conn)
        else:
            idle.append((conn, backend))

    def check(self, c: Any, run_id: str, seq: int) -> None:
        """Inside the store's write transaction `c` that journals an intent: raise LockLost unless the session
        that took this lock still holds it (pg_locks, by its backend pid and start time)."""
        c.execute("SELECT pg_advisory_xact_lock_shared(%s)", (self.fence_id,))
        pid, started = self._backend or (0, None)
        if c.execute(_HELD, (pid, started, self.id, self.id)).fetchone()[0]:
            return
        raise LockLost(
            f"this run no longer holds the lock of operation {self.key!r}: the database session that held it "
            f"(backend {pid}) ended while the run went on (a network cut, a pooler's or the server's idle "
            "timeout, pg_terminate_backend), so another invocation may be running the operation; effect "
            f"{seq} of run {run_id} was not journaled and does not start", self.store.path)

    def _holder(self, conn: Any) -> dict[str, Any]:
        """Who holds the key: the row its holder wrote, if that backend holds the lock now; else {}."""
        row = conn.execute(
            "SELECT k.pid, k.run_id, k.host, k.holder FROM key_locks k WHERE k.lock_id = %s AND EXISTS (SELECT 1"
            " FROM pg_locks l"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.pid = k.backend_pid"
            " AND l.classid = ((%s >> 32) & 4294967295)::bigint::oid AND l.objid = (%s & 4294967295)::bigint::oid"
            " AND l.objsubid = 1)",
            (self.id, self.id, self.id)).fetchone()
        if row is None:
            return {}
        return {"pid": row[0], "run_id": row[1], "host": row[2], "key": self.key, **(row[3] or {})}

    def release(self) -> None:
        held = self.store._held_locks  # noqa: SLF001
        if self in held:
            held.remove(self)
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                # Let go on purpose: the row goes (a row left behind means its holder's session ended), or
                # goes back to the holder that never let go, so that the next taker weighs it too (a worker's
                # check of the key, a taker that stepped aside). Its backend is none: it never reads as held.
                lost = self.lost_holder
                if lost is not None:
                    conn.execute("UPDATE key_locks SET run_id = %s, pid = %s, host = %s, holder = %s,"
                                 " backend_pid = NULL WHERE lock_id = %s",
                                 (lost["run_id"], lost["pid"], lost["host"],
                                  json.dumps(lost["holder"]) if lost.get("holder") else None, self.id))
                else:
                    conn.execute("DELETE FROM key_locks WHERE lock_id = %s AND backend_pid = pg_backend_pid()",
                                 (self.id,))
            except Exception:  # noqa: BLE001 - closing the session lets go of the lock anyway
                _quietly_close(conn)
                return
            self._let_go(conn, self._backend, held=True)
