"""Test-only store fault hook: make the Nth store write of a run fail, as a full disk or a locked store.

`DAL_TEST_STORE_FAULT=KIND:N[+]` (KIND `full` or `locked`) makes the Nth write this process makes to
the run store — begin_run, journal_intent, journal_result, journal_hold, save_receipt, counted from 1 —
raise the StoreError a real fault of that kind raises; with `+`, that write and every later one (a disk
that stays full). The writes are not attempted. It exists for the test suite (tests/durable/), which
also fills real filesystems and holds real locks; nothing in DAL sets it.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from dal.receipts.contract import RunStore
from dal.receipts.store import StoreError

STORE_FAULT_ENV = "DAL_TEST_STORE_FAULT"
WRITES = frozenset({"begin_run", "journal_intent", "journal_result", "journal_hold", "save_receipt", "save_receipts"})
_SQLITE = {"full": "database or disk is full", "locked": "database is locked"}


def plan() -> tuple[str, int, bool] | None:
    """(kind, n, and every later write) from DAL_TEST_STORE_FAULT, or None."""
    raw = os.environ.get(STORE_FAULT_ENV, "").strip()
    kind, _, rest = raw.partition(":")
    every = rest.endswith("+")
    num = rest.rstrip("+")
    if kind not in _SQLITE or not num.isdigit() or int(num) < 1:
        return None
    return kind, int(num), every


class FaultyStore:
    """A Store whose writes fail as `plan()` says; everything else goes to the real store."""

    def __init__(self, store: RunStore, kind: str, n: int, every: bool) -> None:
        self._store = store
        self._kind = kind
        self._n = n
        self._every = every
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in WRITES:
            return attr

        def write(*args: Any, **kw: Any) -> Any:
            self.writes += 1
            if self.writes == self._n or (self._every and self.writes > self._n):
                raise _fault(self._store, self._kind, name)
            return attr(*args, **kw)

        return write


def _fault(store: RunStore, kind: str, doing: str) -> StoreError:
    from dal.receipts.store import describe_error  # the message a real fault of this kind gives

    what = {"begin_run": "starting a run", "journal_intent": "journaling an effect",
            "journal_result": "journaling a result", "journal_hold": "journaling a held effect",
            "save_receipt": "saving a receipt", "save_receipts": "saving receipts"}[doing]
    return describe_error(sqlite3.OperationalError(_SQLITE[kind]), store.path, f"{what} (an injected fault)")


def wrap(store: RunStore) -> RunStore:
    """`store`, or a FaultyStore over it when DAL_TEST_STORE_FAULT asks for one."""
    got = plan()
    if got is None:
        return store
    return FaultyStore(store, *got)  # type: ignore[return-value]
