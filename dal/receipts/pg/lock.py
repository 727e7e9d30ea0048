"""One key, one runner, across hosts: the PostgreSQL store's operation lock is a session-level advisory lock on
a connection of the lock's own. The server releases it when the holder lets go or its session ends: the
process exits (kill -9 included: the socket closes), or its host is cut off (TCP keepalives, then
tcp_user_timeout, see dal/receipts/pg/connect.py: seconds, not hours). No pid is trusted across hosts.

Advisory locks are re-entrant within one session, so each PgKeyLock has its own connection: two locks of
one key in one process exclude each other as two processes do. Who holds a key (for KeyBusy's message) is
a row of `key_locks` the holder writes once it has the lock, and it is believed only while the lock is
held by the backend that wrote it.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from dal.core.digest import sha256
from dal.receipts.oplock import KeyBusy
from dal.receipts.pg.connect import connect, describe

if TYPE_CHECKING:
    from dal.receipts.pg.store import PgStore


def lock_id(key: str) -> int:
    """The advisory lock's 64-bit id for operation `key` (a digest: keys are text of any length)."""
    return int.from_bytes(sha256(b"dal-key:" + key.encode("utf-8")).digest()[:8], "big", signed=True)


class PgKeyLock:
    """The lock of one operation key; `acquire` raises KeyBusy naming the holder (pid, host, run)."""

    def __init__(self, store: PgStore, key: str) -> None:
        self.store = store
        self.key = key
        self.id = lock_id(key)
        self._conn: Any = None

    def acquire(self, run_id: str, wait: float | None = None) -> None:
        psycopg = self.store._psycopg  # noqa: SLF001 - one driver per store
        conn = connect(self.store.url, f"locking operation {self.key!r}")
        deadline = time.monotonic() + (wait or 0.0)
        try:
            while not conn.execute("SELECT pg_try_advisory_lock(%s)", (self.id,)).fetchone()[0]:
                if time.monotonic() >= deadline:
                    holder = self._holder(conn)
                    raise KeyBusy(self.key, holder)
                time.sleep(0.05)
            conn.execute(
                "INSERT INTO key_locks (lock_id, key, run_id, pid, host, backend_pid) VALUES (%s, %s, %s, %s, %s,"
                " pg_backend_pid()) ON CONFLICT (lock_id) DO UPDATE SET key = excluded.key, run_id = excluded.run_id,"
                " pid = excluded.pid, host = excluded.host, backend_pid = excluded.backend_pid,"
                " taken_at = clock_timestamp()",
                (self.id, self.key, run_id, os.getpid(), os.uname().nodename))
        except psycopg.Error as e:
            conn.close()
            raise describe(e, self.store.url, f"locking operation {self.key!r}") from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _holder(self, conn: Any) -> dict[str, Any]:
        """Who holds the key: the row its holder wrote, if that backend holds the lock now; else {}."""
        row = conn.execute(
            "SELECT k.pid, k.run_id, k.host FROM key_locks k WHERE k.lock_id = %s AND EXISTS (SELECT 1 FROM pg_locks l"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.pid = k.backend_pid"
            " AND l.classid = ((%s >> 32) & 4294967295)::bigint::oid AND l.objid = (%s & 4294967295)::bigint::oid"
            " AND l.objsubid = 1)",
            (self.id, self.id, self.id)).fetchone()
        if row is None:
            return {}
        return {"pid": row[0], "run_id": row[1], "host": row[2], "key": self.key}

    def release(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (self.id,))
            except Exception:  # noqa: BLE001 - closing the session lets go of the lock anyway
                pass
            finally:
                conn.close()
