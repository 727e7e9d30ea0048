"""The small Store additions the runner relies on: per-connection durability, a run's row before it
has a receipt, prefix lookup of unfinished runs, and `--waiting` leaving out runs a later run resumed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dal.receipts.store import Store


def _receipt(run_id: str, status: str, previous: str | None = None) -> dict:
    return {
        "schema": "dal.receipt/v1", "run_id": run_id, "operation": "k", "key": "k",
        "script": {"path": "s.dal", "sha256": "0" * 64}, "workspace": "/w", "status": status,
        "attempted_at": "2026-11-29T19:00:00.000Z", "finished_at": "2026-11-29T19:00:01.000Z",
        "duration_ms": 1.0, "steps": {"used": 1, "budget": 10},
        "effects": {"count": 0, "budget": None, "items": [], "omitted": 0}, "artifacts": [],
        "external_effect": "none", "retry": "resume" if status == "waiting" else "none", "blocker": None,
        "error": None, "result": None, "loops": [], "loops_omitted": 0, "attempts": None,
        "previous_run": previous, "skipped_of": None,
    }


A = "run_20261129T190000000Z_aaaaaa"
B = "run_20261129T190100000Z_bbbbbb"


def test_synchronous_level(tmp_path) -> None:
    with Store(tmp_path / "dal.db") as store:
        store.set_synchronous("normal")
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1
        store.set_synchronous("FULL")
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        with pytest.raises(ValueError, match="FULL or NORMAL"):
            store.set_synchronous("OFF")


def test_unfinished_run_row_prefix_and_waiting(tmp_path) -> None:
    with Store(tmp_path / "dal.db") as store:
        store.begin_run(A, operation="k", key="k", policy={"launch": {"script": "/w/s.dal"}})
        row = store.run_row(A)
        assert row["status"] == "running" and row["policy"] == {"launch": {"script": "/w/s.dal"}}
        assert row["resumed_by"] is None and row["pid"] > 0
        assert store.run_row("run_20200101T000000000Z_000000") is None
        assert store.run_ids_with_prefix("run_20261129T19") == [A]
        store.save_receipt(_receipt(A, "waiting"))
        assert [r["run_id"] for r in store.list_runs(waiting=True)] == [A]
        store.save_receipt(_receipt(B, "completed", previous=A))
        assert store.run_row(A)["resumed_by"] == B
        assert store.list_runs(waiting=True) == []  # resumed: nobody needs to act on it any more
        assert store.count_runs(waiting=True) == 0
        assert store.run_ids_with_prefix("run_20261129T19") == [A, B]


C = "run_20261129T190200000Z_cccccc"


def test_lineage_follows_previous_runs_newest_first(tmp_path) -> None:
    with Store(tmp_path / "dal.db") as store:
        store.begin_run(A, operation="k", key="k", policy={"launch": {"attempt": "new"}})
        store.begin_run(B, operation="k", key="k", previous_run=A)
        store.begin_run(C, operation="k", key="k", previous_run=B)
        chain = store.lineage(C)
        assert [r["run_id"] for r in chain] == [C, B, A]
        assert chain[-1]["policy"] == {"launch": {"attempt": "new"}} and chain[0]["policy"] is None
        assert [r["run_id"] for r in store.lineage(C, limit=2)] == [C, B]
        assert store.lineage("run_20200101T000000000Z_000000") == []


def test_journal_hold_returns_a_decision_or_journals_the_hold(tmp_path) -> None:
    with Store(tmp_path / "dal.db") as store:
        store.begin_run(A, operation="k", key="k")
        store.begin_run(B, operation="k", key="k", previous_run=A)
        kinds = ("approved", "denied")
        # No decision yet: the hold is journaled, as an intent without a result.
        assert store.journal_hold(B, 2, "send", "external", detail={"pending": "approval"},
                                  decided_in=[A, B], kinds=kinds) is None
        (held,) = store.journal(B)
        assert (held["seq"], held["result"], held["detail"]) == (2, None, {"pending": "approval"})
        # A decision recorded for any run of the operation is found; one of another kind is not.
        store.record_approval(A, 2, "resolved:done")
        first = store.record_approval(A, 2, "approved", who="ana")
        got = store.journal_hold(B, 2, "send", "external", decided_in=[A, B], kinds=kinds)
        assert got["id"] == first["id"] and got["decision"] == "approved" and got["who"] == "ana"
        later = store.record_approval(B, 2, "denied", who="bo")
        assert store.journal_hold(B, 2, "send", "external", decided_in=[A, B], kinds=kinds)["id"] == later["id"]
        # Decisions at or below `after` were used already.
        assert store.journal_hold(B, 2, "send", "external", decided_in=[A, B], kinds=kinds,
                                  after=later["id"]) is None
        store.journal_result(B, 2, {"status": "completed"})
        with pytest.raises(Exception, match="already has a journaled result"):
            store.journal_hold(B, 2, "send", "external", decided_in=[A], kinds=kinds, after=later["id"])


def test_a_new_store_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    # The store journals env() values a run was allowed; made with the umask (0644) it
    # was readable by every local account, while the receipts beside it are 0600.
    old = os.umask(0o022)
    try:
        with Store(tmp_path / ".dal" / "dal.db") as store:
            store.begin_run("run_x", operation="op")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / ".dal" / "dal.db").st_mode) == 0o600
