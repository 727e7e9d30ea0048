"""The store contract (dal/receipts/contract.py) as tests any run store must pass.

A test module imports these tests and provides the `store_location` fixture: a location string for a new,
empty store (a path for SQLite; a postgresql:// URL later), parametrized over store factories
(tests/receipts/test_store_contract.py). Every store is opened through `open_store`, the one place that
parses locations, so another process opens the same store the same way (the lock tests do).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from dal.receipts.location import StoreLocation, open_store
from dal.receipts.oplock import KeyBusy
from dal.receipts.store import RunNotFound, StoreError
from tests.receipts.conftest import base_receipt, rejected


def _open(location: str, workspace: Path) -> Any:
    return open_store(StoreLocation.parse(location, workspace))


@pytest.fixture
def store(store_location: str, tmp_path: Path) -> Any:
    s = _open(store_location, tmp_path)
    yield s
    s.close()


def _rid(n: int, tail: str = "a0") -> str:
    """Run ids in the order they were made: run_<time>Z_<hex>, later times sort later."""
    return f"run_20260902T1015{n:05d}Z_{tail}{n:04x}"


def _ended(store: Any, n: int, *, status: str = "completed", key: str | None = None, operation: str = "op",
           previous_run: str | None = None, **more: Any) -> str:
    run_id = _rid(n)
    store.save_receipt(base_receipt(run_id=run_id, status=status, key=key, operation=key or operation,
                                    previous_run=previous_run,
                                    attempted_at=f"2026-09-02T10:15:{n % 60:02d}.000Z", **more))
    return run_id


# --- runs ---------------------------------------------------------------------------------------


def test_a_begun_run_is_running_without_a_receipt_until_its_receipt_is_saved(store: Any) -> None:
    run_id = _rid(1)
    store.begin_run(run_id, operation="op", key="k", script_path="s.dal", policy={"spec": {}, "attempt": "new"})
    row = store.run_row(run_id)
    assert (row["status"], row["key"], row["pid"]) == ("running", "k", os.getpid())
    assert row["policy"] == {"spec": {}, "attempt": "new"}
    assert store.get_run(run_id) is None  # no receipt yet
    assert store.find_run(run_id)["status"] == "running"  # found anyway: a run that died has no receipt
    store.save_receipt(base_receipt(run_id=run_id, key="k", operation="k", status="failed", retry="inspect"))
    assert store.get_run(run_id)["status"] == "failed"
    assert store.run_row(run_id)["status"] == "failed"


def test_the_policy_files_a_workspace_ran_under_are_listed_once(store: Any) -> None:
    # Every run protects them (docs/policy.md, "Policy files are protected"): a store that lists none lets a
    # default-policy run rewrite the file the operator's next `--policy` run reads.
    def spec(source: str, workspace: str, sha: str | None = "ab" * 32) -> dict:
        return {"spec": {"policy": {"source": source, "file_sha256": sha, "workspace": workspace}}, "attempt": "new"}

    store.begin_run(_rid(1), operation="a", policy=spec("/w/ci/strict.toml", "/w"))
    store.begin_run(_rid(2), operation="b", policy=spec("/w/ci/strict.toml", "/w"))
    store.begin_run(_rid(3), operation="c", policy=spec("/w/dal.toml", "/w"))
    store.begin_run(_rid(4), operation="d", policy=spec("/other/dal.toml", "/other"))
    store.begin_run(_rid(5), operation="e", policy=spec("default", "/w", sha=None))  # no file
    assert sorted(store.policy_files("/w")) == ["/w/ci/strict.toml", "/w/dal.toml"]
    assert store.policy_files("/nowhere") == []


def test_a_run_id_is_begun_once(store: Any) -> None:
    store.begin_run(_rid(1), operation="op")
    with pytest.raises(StoreError):
        store.begin_run(_rid(1), operation="other")
    assert store.run_row(_rid(1))["operation"] == "op"


def test_runs_are_listed_newest_first_and_counted_with_the_same_filters(store: Any) -> None:
    ids = [_ended(store, n, key="k" if n % 2 else None, status="failed" if n == 3 else "completed",
                  retry="inspect" if n == 3 else "none") for n in range(1, 6)]
    assert [r["run_id"] for r in store.list_runs()] == ids[::-1]
    assert [r["run_id"] for r in store.list_runs(limit=2)] == [ids[4], ids[3]]
    assert [r["run_id"] for r in store.list_runs(key="k")] == [ids[4], ids[2], ids[0]]
    assert [r["run_id"] for r in store.list_runs(status="failed")] == [ids[2]]
    assert store.count_runs() == 5 and store.count_runs(key="k") == 3 and store.count_runs(status="failed") == 1
    assert store.count_runs(key="nothing") == 0 and store.list_runs(key="nothing") == []
    assert [r["run_id"] for r in store.list_runs(retry="inspect")] == [ids[2]]
    assert store.count_runs(retry="inspect") == 1 and store.count_runs(retry="none", key="k") == 2


def test_the_runs_of_a_key_are_in_the_order_the_store_recorded_them_not_by_id(store: Any) -> None:
    # A run id is a clock reading taken before the key's lock: a later-recorded run may have an older id.
    store.begin_run(_rid(5), operation="k", key="k")
    store.begin_run(_rid(2), operation="k", key="k")
    store.begin_run(_rid(3), operation="other", key="other")
    assert [r["run_id"] for r in store.runs_of_key("k")] == [_rid(2), _rid(5)]
    assert [r["run_id"] for r in store.runs_of_key("k", limit=1)] == [_rid(2)]
    assert store.newest_run_of_key("k")["run_id"] == _rid(2)
    # So is every listing, and `latest` (after a clock step back, `dal approve latest` took the
    # older run).
    assert [r["run_id"] for r in store.list_runs()] == [_rid(3), _rid(2), _rid(5)]
    assert store.find_run("latest")["run_id"] == _rid(3)


def test_a_run_is_found_by_id_prefix_key_and_latest_and_refused_otherwise(store: Any) -> None:
    first = _ended(store, 1, key="alpha")
    second = _ended(store, 2, key="alpha")
    third = _ended(store, 3, operation="script:other")
    assert store.find(first)["run_id"] == first
    assert store.find(first[:-2])["run_id"] == first  # a unique prefix
    assert store.find("alpha")["run_id"] == second  # a key names its newest run
    assert store.find("script:other")["run_id"] == third
    assert store.find("latest")["run_id"] == third
    with pytest.raises(RunNotFound, match="several runs"):
        store.find("run_20260902T1015")
    with pytest.raises(RunNotFound):
        store.find("no-such-key")
    with pytest.raises(RunNotFound):
        store.find_run("run_20991231T235959999Z_ffffff")


def test_the_newest_run_of_a_key_passes_over_runs_that_executed_nothing(store: Any) -> None:
    done = _ended(store, 1, key="k")
    _ended(store, 2, key="k", status="rejected", retry="repair", error=rejected()["error"])
    store.begin_run(_rid(3), operation="k", key="k", policy={"spec": {}, "attempt": "duplicate"})  # died
    assert store.newest_run_of_key("k")["run_id"] == done
    store.begin_run(_rid(4), operation="k", key="k", policy={"spec": {}, "attempt": "resume"})  # died mid-run
    assert store.newest_run_of_key("k")["run_id"] == _rid(4)
    assert store.newest_run_of_key("other") is None


def test_lineage_follows_previous_runs_newest_first_and_a_run_knows_who_continued_it(store: Any) -> None:
    a = _ended(store, 1, key="k", status="interrupted", retry="resume")
    b = _ended(store, 2, key="k", status="waiting", retry="resume", previous_run=a)
    c = _ended(store, 3, key="k", previous_run=b)
    assert [r["run_id"] for r in store.lineage(c)] == [c, b, a]
    assert [r["run_id"] for r in store.lineage(c, limit=2)] == [c, b]
    assert store.run_row(a)["resumed_by"] == b and store.run_row(c)["resumed_by"] is None


# --- the journal --------------------------------------------------------------------------------


def test_a_journaled_result_is_final_and_the_journal_is_in_effect_order(store: Any) -> None:
    run_id = _rid(1)
    store.begin_run(run_id, operation="op")
    store.journal_intent(run_id, 2, "echo two", "read")
    store.journal_intent(run_id, 1, "echo one", "read", detail={"line": 1})
    store.journal_intent(run_id, 1, "echo one", "read", detail={"line": 1, "again": True})  # no result: allowed
    store.journal_result(run_id, 1, {"status": "completed", "code": 0})
    with pytest.raises(StoreError, match="final"):
        store.journal_intent(run_id, 1, "echo other", "write")
    with pytest.raises(StoreError):
        store.journal_result(run_id, 3, {"status": "completed"})  # no intent for it
    rows = store.journal(run_id)
    assert [(r["seq"], r["command"], r["status"]) for r in rows] == [(1, "echo one", "completed"),
                                                                     (2, "echo two", "intent")]
    assert rows[0]["detail"] == {"line": 1, "again": True} and rows[0]["result"]["code"] == 0
    assert rows[1]["result"] is None


def test_a_hold_returns_a_decision_made_before_it_or_journals_the_hold(store: Any) -> None:
    first, second = _rid(1), _rid(2)
    store.begin_run(first, operation="op", key="k")
    held = store.journal_hold(first, 1, "deploy", "external", detail={"hold": "approval"},
                              decided_in=[first], kinds=["approve", "deny"])
    assert held is None
    assert [(r["seq"], r["status"]) for r in store.journal(first)] == [(1, "intent")]
    approve = store.record_approval(first, 1, "approve", who="ops", note="looked fine")
    deny = store.record_approval(first, 1, "deny", who="ops")
    store.record_approval(first, 2, "approve", who="ops")  # another effect's
    assert approve["id"] < deny["id"]
    assert [(r["decision"], r["who"]) for r in store.approvals(first)] == [("approve", "ops"), ("deny", "ops"),
                                                                          ("approve", "ops")]
    # The run that continues the operation sees the newest decision of the kinds it asks for...
    store.begin_run(second, operation="op", key="k", previous_run=first)
    got = store.journal_hold(second, 1, "deploy", "external", decided_in=[first, second], kinds=["approve"])
    assert got is not None and (got["id"], got["decision"], got["run_id"]) == (approve["id"], "approve", first)
    # ... and not one it already acted on (`after`): then the hold is journaled for it.
    assert store.journal_hold(second, 1, "deploy", "external", decided_in=[first], kinds=["approve", "deny"],
                              after=deny["id"]) is None
    assert [r["seq"] for r in store.journal(second)] == [1]


def test_a_run_another_run_continues_journals_no_intent_and_its_result_still_counts(store: Any) -> None:
    """A run judged dead while it lived on (no key lock fences a run without a key; a pid means nothing from
    another machine) starts no effect once its successor is recorded: the intent, the hold and a decision's
    entry are refused with Continued, naming the successor, and nothing is written. A result is never refused:
    it is what keeps the successor from running the effect again."""
    from dal.receipts.store import Continued

    first, second = _rid(1), _rid(2)
    store.begin_run(first, operation="op")
    store.journal_intent(first, 1, "echo one", "local")
    store.begin_run(second, operation="op", previous_run=first)
    with pytest.raises(Continued, match=f"run {second} continued this run's operation") as got:
        store.journal_intent(first, 2, "echo two", "local")
    assert got.value.by == second
    with pytest.raises(Continued):
        store.journal_hold(first, 2, "deploy", "external", detail={"pending": True})
    store.journal_result(first, 1, {"status": "ok", "exit_code": 0})
    assert [(r["seq"], r["status"]) for r in store.journal(first)] == [(1, "ok")]
    store.journal_intent(second, 2, "echo two", "local")  # the successor journals as usual
    assert [r["seq"] for r in store.journal(second)] == [2]


# --- the operation lock -------------------------------------------------------------------------

_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from dal.receipts.location import StoreLocation, open_store
    store = open_store(StoreLocation.parse(sys.argv[1], Path(sys.argv[2])))
    lock = store.operation_lock(sys.argv[3])
    lock.acquire("run_holder", 0)
    print("held", flush=True)
    sys.stdin.readline()
    lock.release()
    print("released", flush=True)
    time.sleep(60)
""")


def _holder(location: str, workspace: Path, key: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, location, str(workspace), key], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "held\n"
    return p


def test_the_operation_lock_excludes_another_process_until_it_lets_go(store: Any, store_location: str,
                                                                      tmp_path: Path) -> None:
    holder = _holder(store_location, tmp_path, "deploy:1")
    try:
        lock = store.operation_lock("deploy:1")
        with pytest.raises(KeyBusy) as busy:
            lock.acquire(_rid(1), 0.2)
        assert busy.value.holder.get("pid") == holder.pid  # the message names who holds it
        assert f"process {holder.pid}" in str(busy.value)
        other = store.operation_lock("deploy:2")  # another key is independent
        other.acquire(_rid(2))
        other.release()
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "released\n"
        lock.acquire(_rid(1), 5)  # free now, although the holder still runs
        lock.release()
    finally:
        holder.kill()
        holder.wait()


def test_a_holder_killed_with_sigkill_leaves_the_key_free(store: Any, store_location: str, tmp_path: Path) -> None:
    holder = _holder(store_location, tmp_path, "k")
    lock = store.operation_lock("k")
    with pytest.raises(KeyBusy):
        lock.acquire(_rid(1), 0)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    t0 = time.monotonic()
    lock.acquire(_rid(1), 5)
    assert time.monotonic() - t0 < 5
    lock.release()


def test_key_holder_names_the_run_holding_the_lock_in_another_process_until_it_lets_go_or_dies(
        store: Any, store_location: str, tmp_path: Path) -> None:
    """What tells a live run from a dead one without its pid (a pid means nothing on another host): asked of the
    lock itself, without taking it."""
    assert store.key_holder("k") is None
    holder = _holder(store_location, tmp_path, "k")
    try:
        got = store.key_holder("k")
        assert got is not None and (got["run_id"], got["pid"]) == ("run_holder", holder.pid)
        assert store.key_holder("k2") is None  # another key
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "released\n"
        assert store.key_holder("k") is None  # let go, although its process still runs
    finally:
        holder.kill()
        holder.wait()
    again = _holder(store_location, tmp_path, "k")
    assert (store.key_holder("k") or {}).get("pid") == again.pid
    os.kill(again.pid, signal.SIGKILL)
    again.wait()
    deadline = time.monotonic() + 5  # the server ends a killed client's session as it notices the closed socket
    while store.key_holder("k") is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.key_holder("k") is None
    # Asking does not take the lock: a holder starting meanwhile is never told the key is busy.
    lock = store.operation_lock("k")
    lock.acquire(_rid(1), 0)
    assert store.key_holder("k")["run_id"] == _rid(1)
    lock.release()


def test_a_lock_let_go_leaves_no_lost_holder_and_one_killed_is_named_only_where_the_lock_outlives_no_one(
        store: Any, store_location: str, tmp_path: Path) -> None:
    """lost_holder and lost_key_holder are what the runner weighs before continuing a key whose lock went
    without its holder letting go: a holder that let go is never named; one killed with its lock is named only
    by a store whose lock can end while its holder lives (a PostgreSQL session), never by a flock's."""
    lock = store.operation_lock("k")
    lock.acquire(_rid(1), 0)
    assert lock.lost_holder is None and store.lost_key_holder("k") is None  # held: not lost
    lock.release()
    assert store.lost_key_holder("k") is None
    holder = _holder(store_location, tmp_path, "k")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    deadline = time.monotonic() + 5
    while store.key_holder("k") is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    lost = store.lost_key_holder("k")
    assert lost is None or (lost["run_id"], lost["pid"]) == ("run_holder", holder.pid)
    assert (lost is None) == store_location.endswith(".db")
    after = store.operation_lock("k")
    after.acquire(_rid(2), 0)
    assert (after.lost_holder is None) == (lost is None)
    assert after.lost_holder is None or after.lost_holder["run_id"] == "run_holder"
    after.release()


def test_within_one_process_a_second_lock_of_the_key_is_refused_too(store: Any) -> None:
    first, second = store.operation_lock("k"), store.operation_lock("k")
    first.acquire(_rid(1))
    try:
        with pytest.raises(KeyBusy):
            second.acquire(_rid(2), 0)
    finally:
        first.release()
    second.acquire(_rid(2), 0)
    second.release()


# --- jobs ---------------------------------------------------------------------------------------


def _submit(q: Any, key: str | None, **kw: Any) -> tuple[dict[str, Any], bool]:
    args: dict[str, Any] = {"spec": {"script": "/w/s.dal"}, "key": key, "queue": "default", "priority": 0,
                            "run_at": 0.0, "max_attempts": 3, "host": "h", "movable": True, "now": 1.0}
    args.update(kw)
    return q.submit(**args)


def test_a_key_has_one_open_job_and_a_job_is_claimed_by_one_worker(store: Any) -> None:
    q = store.jobs()
    job, added = _submit(q, "k")
    again, added_again = _submit(q, "k")
    assert added and not added_again and again["job_id"] == job["job_id"]
    assert q.open_job("k")["job_id"] == job["job_id"]
    first = q.claim(owner="w1", queues=["default"], host="h", lease=30, now=2.0)
    second = q.claim(owner="w2", queues=["default"], host="h", lease=30, now=2.0)
    assert first is not None and first["job_id"] == job["job_id"] and first["lease_owner"] == "w1"
    assert second is None  # the only job is taken while its lease holds
