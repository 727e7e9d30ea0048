"""The run store: receipts come back as saved, runs are found the way people name them, failures of the
file itself are explained, and nothing already written is ever lost."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from dal.receipts.ids import new_run_id
from dal.receipts.schema import ReceiptSchemaError
from dal.receipts.store import SCHEMA_VERSION, NoStore, RunNotFound, Store, StoreError, store_path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ws" / ".dal" / "dal.db"


def test_round_trip_keeps_the_receipt_exactly(db: Path, receipts: dict) -> None:
    with Store(db) as store:
        store.save_receipt(receipts["article_verified"])
        back = store.get_run(receipts["article_verified"]["run_id"])
    assert back == receipts["article_verified"]
    # Same key order too: `dal receipt show --json` prints the receipt as the runtime made it.
    assert json.dumps(back) == json.dumps(receipts["article_verified"])
    assert db.is_file()


def test_loop_receipts_are_rows_of_their_own(db: Path, receipts: dict) -> None:
    with Store(db) as store:
        store.save_receipt(receipts["article_exhausted"])
        loops = store.loops(receipts["article_exhausted"]["run_id"])
    assert [lp["clause"] for lp in loops] == ["state.attempt < state.max_attempts"]
    rows = sqlite3.connect(db).execute("SELECT exit, clause, iterations FROM loops").fetchall()
    assert rows == [("condition", "state.attempt < state.max_attempts", 3)]


def test_saving_again_replaces_the_run(db: Path, receipts: dict) -> None:
    r = receipts["interrupted"]
    with Store(db) as store:
        store.save_receipt(r)
        r2 = dict(r, status="completed", retry="none", loops=[])
        store.save_receipt(r2)
        assert store.get_run(r["run_id"])["status"] == "completed"
        assert store.loops(r["run_id"]) == []
        assert store.count_runs() == 1


def test_invalid_receipt_is_refused_before_anything_is_written(db: Path, build) -> None:
    with Store(db) as store:
        with pytest.raises(ReceiptSchemaError, match="status"):
            store.save_receipt(build.base(status="ok"))
        assert store.count_runs() == 0


def many(build, n: int, **fields) -> list[dict]:
    out = []
    for i in range(n):
        out.append(
            build.base(
                run_id=f"run_20261129T19{i // 60000 % 60:02d}{i // 1000 % 60:02d}{i % 1000:03d}Z_{i:06x}",
                **fields,
            )
        )
    return out


def test_find_by_id_prefix_key_operation_and_latest(db: Path, receipts: dict, build) -> None:
    first = receipts["article_verified"]  # run_20260902T101500000Z_4f9a2c, key article-draft:...
    dup = receipts["skipped"]  # run_20260902T111500000Z_0a0b0c, same key, newer
    other = build.base(run_id="run_20260902T091500000Z_ffffff", operation="script:other")
    with Store(db) as store:
        store.save_receipts([first, dup, other])
        assert store.find(first["run_id"])["run_id"] == first["run_id"]
        assert store.find("run_20260902T10")["run_id"] == first["run_id"]
        assert store.find(build.article_key)["run_id"] == dup["run_id"]  # newest run of the key
        assert store.find("script:other")["run_id"] == other["run_id"]
        # `latest` is the run the store recorded last, whatever its id's clock says (a clock step back).
        assert store.find("latest")["run_id"] == other["run_id"]
        assert store.find("  latest ")["run_id"] == other["run_id"]
        with pytest.raises(RunNotFound, match="matches several runs"):
            store.find("run_20260902T")
        with pytest.raises(RunNotFound, match="no run, operation or key matches 'nope'"):
            store.find("nope")
        with pytest.raises(RunNotFound, match="dal receipts"):
            store.find("run_20991231T000000000Z_abcdef")


def test_a_run_in_progress_is_listed_but_has_no_receipt(db: Path) -> None:
    rid = new_run_id()
    with Store(db) as store:
        store.begin_run(rid, operation="script:slow", policy={"allow_run": ["echo"]})
        assert store.list_runs()[0]["status"] == "running"
        info = store.run_row(rid)
        assert info["pid"] == os.getpid() and info["policy"] == {"allow_run": ["echo"]}
        assert info["status"] == "running" and store.run_row("run_unknown") is None
        assert store.get_run(rid) is None
        with pytest.raises(RunNotFound, match="has not finished yet"):
            store.find(rid)
        with pytest.raises(RunNotFound, match="no finished runs yet"):
            store.find("latest")


def test_list_filters_and_order(db: Path, receipts: dict, build) -> None:
    with Store(db) as store:
        store.save_receipts(
            [receipts[n] for n in ("article_verified", "skipped")]
            + [
                build.base(
                    run_id="run_20260903T000000000Z_000001",
                    status="waiting",
                    retry="escalate",
                    external_effect="pending_approval",
                    operation="deploy:web",
                )
            ]
            + [
                build.base(
                    run_id="run_20260903T000000000Z_000002",
                    status="failed",
                    retry="inspect",
                    operation="deploy:db",
                )
            ]
        )
        ids = [r["run_id"] for r in store.list_runs()]
        assert ids == sorted(ids, reverse=True)
        assert [r["status"] for r in store.list_runs(waiting=True)] == ["waiting"]
        assert [r["operation"] for r in store.list_runs(status="failed")] == ["deploy:db"]
        assert {r["operation"] for r in store.list_runs(operation="deploy:*")} == {"deploy:web", "deploy:db"}
        assert len(store.list_runs(operation=build.article_key)) == 2
        assert len(store.list_runs(limit=1)) == 1
        assert store.count_runs(operation="deploy:*") == 2


def test_ten_thousand_runs_list_in_order_and_in_a_sane_time(db: Path, build) -> None:
    with Store(db) as store:
        store.save_receipts(many(build, 10_000), validate=False)
        start = time.perf_counter()
        rows = store.list_runs(limit=None)
        latest = store.find("latest")
        recent = store.list_runs(limit=20, status="completed")
        elapsed = time.perf_counter() - start
    assert len(rows) == 10_000 and len(recent) == 20
    assert latest["run_id"] == rows[0]["run_id"]
    # A bound only against a quadratic listing (minutes); the figure itself is bench/bench_store.py's.
    assert elapsed < 10


def test_journal_intent_then_result_survives_reopening(db: Path) -> None:
    rid = new_run_id()
    with Store(db) as store:
        store.begin_run(rid, operation="op")
        store.journal_intent(rid, 1, "echo hi", "read", detail={"decision": "allow"})
        store.journal_intent(rid, 2, "sendmail ops@example.com", "external")
        store.journal_result(rid, 1, {"status": "completed", "code": 0, "stdout": "hi\n"})
    with Store(db) as store:
        journal = store.journal(rid)
    assert [(e["seq"], e["status"]) for e in journal] == [(1, "completed"), (2, "intent")]
    assert journal[0]["result"]["stdout"] == "hi\n" and journal[0]["detail"] == {"decision": "allow"}
    assert journal[1]["result"] is None  # an intent without a result: outcome unknown


def test_journal_result_is_final(db: Path) -> None:
    with Store(db) as store:
        store.journal_intent("run_x", 1, "touch a", "local")
        store.journal_intent("run_x", 1, "touch a", "local")  # again, still unknown: allowed
        store.journal_result("run_x", 1, {"status": "completed"})
        with pytest.raises(StoreError, match="already has a journaled result"):
            store.journal_intent("run_x", 1, "touch a", "local")
        with pytest.raises(StoreError, match="no intent journaled for effect 9"):
            store.journal_result("run_x", 9, {"status": "completed"})


def test_approvals_record_who_when_and_note(db: Path) -> None:
    with Store(db) as store:
        row = store.record_approval("run_x", 4, "approve", who="ana", note="checked the recipients")
        store.record_approval("run_x", 4, "deny", who="bo")
        decisions = store.approvals("run_x")
    assert row["at"].endswith("Z")
    assert [(d["decision"], d["who"], d["note"]) for d in decisions] == [
        ("approve", "ana", "checked the recipients"),
        ("deny", "bo", None),
    ]


def test_store_path_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAL_STORE", raising=False)
    assert store_path(None, tmp_path) == tmp_path / ".dal" / "dal.db"
    monkeypatch.setenv("DAL_STORE", str(tmp_path / "env.db"))
    assert store_path(None, tmp_path) == tmp_path / "env.db"
    assert store_path(str(tmp_path / "flag.db"), tmp_path) == tmp_path / "flag.db"


def test_schema_digests_match_the_migrations() -> None:
    # Opening a sound store compares its schema's digest with these instead of rebuilding the expected
    # shape; a new migration needs its digest here (the value this test prints).
    import dal.receipts.store as store_module

    for version in range(1, SCHEMA_VERSION + 1):
        mem = sqlite3.connect(":memory:")
        for target in range(1, version + 1):
            for statement in store_module.MIGRATIONS[target]:
                mem.execute(statement)
        digest = store_module.schema_digest(mem)
        assert store_module.SCHEMA_DIGESTS.get(version) == digest, f"SCHEMA_DIGESTS[{version}] = {digest!r}"


def test_reopening_keeps_the_schema_version(db: Path) -> None:
    Store(db).close()
    with Store(db) as store:
        assert store.version == SCHEMA_VERSION
    rows = sqlite3.connect(db).execute("SELECT version FROM schema_version").fetchall()
    assert rows == [(v,) for v in range(1, SCHEMA_VERSION + 1)]  # each migration recorded once


# -- read-only access -----------------------------------------------------------------------------------


def test_readonly_open_of_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(NoStore, match="no runs yet"):
        Store(tmp_path / ".dal" / "dal.db", readonly=True)
    assert list(tmp_path.iterdir()) == []


def test_readonly_reader_leaves_no_side_files(db: Path, receipts: dict) -> None:
    with Store(db) as store:
        store.save_receipt(receipts["article_verified"])
    before = sorted(p.name for p in db.parent.iterdir())
    with Store(db, readonly=True) as ro:
        assert ro.find("latest")["run_id"] == receipts["article_verified"]["run_id"]
        assert len(ro.list_runs()) == 1
        with pytest.raises(StoreError, match="read-only"):
            ro.save_receipt(receipts["failed"])
    listed = sorted(p.name for p in db.parent.iterdir())
    assert listed == before == [".gitignore", "dal.db", "dal.db-reserve", "dal.db-seal"]  # .gitignore: gitignored


def test_readonly_reader_sees_runs_written_after_it_opened(db: Path, receipts: dict) -> None:
    with Store(db) as store:
        store.save_receipt(receipts["article_verified"])
    with Store(db, readonly=True) as ro:
        assert ro.count_runs() == 1
        with Store(db) as writer:
            writer.save_receipt(receipts["skipped"])
            assert ro.count_runs() == 2  # writer still open: read through the WAL
        assert ro.find("latest")["status"] == "skipped"


# -- the file itself going wrong --------------------------------------------------------------------------


def test_locked_store_says_so_and_loses_nothing(db: Path, receipts: dict) -> None:
    with Store(db) as store:
        store.save_receipt(receipts["article_verified"])
    with Store(db, timeout=0.1) as store:
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # taken after the store was opened: the next write waits, then fails
        try:
            with pytest.raises(StoreError) as info:
                store.save_receipt(receipts["failed"])
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    message = str(info.value)
    assert "locked" in message and str(db) in message and "try again" in message
    with Store(db) as store:
        assert store.get_run(receipts["article_verified"]["run_id"]) == receipts["article_verified"]
        assert store.count_runs() == 1


def test_a_store_locked_at_open_is_refused_naming_the_holder(db: Path, receipts: dict) -> None:
    import subprocess
    import sys

    from dal.receipts.store import StoreLocked

    with Store(db) as store:
        store.save_receipt(receipts["article_verified"])
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\n"
         "print('held', flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(StoreLocked) as info:
            Store(db, timeout=0.5)
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    message = str(info.value)
    assert str(db) in message and f"process {holder.pid}" in message and "more than 0.5 s" in message
    assert "wrote nothing" in message and 0.4 < waited < 5
    with Store(db) as store:
        assert store.count_runs() == 1


def test_readonly_store_says_what_to_do(db: Path, receipts: dict) -> None:
    import shutil
    import subprocess

    with Store(db) as store:
        store.save_receipt(receipts["article_verified"])
    root = os.geteuid() == 0
    if root and shutil.which("chattr") is None:
        pytest.skip("root ignores file modes and there is no chattr (tests/receipts/test_damaged_stores.py mounts one)")
    if root:  # root ignores file modes: make the file and its folder immutable instead
        if subprocess.run(["chattr", "+i", str(db), str(db.parent)], capture_output=True).returncode != 0:
            pytest.skip("this filesystem has no immutable flag")
    else:
        os.chmod(db, 0o444)
        os.chmod(db.parent, 0o555)
    try:
        with pytest.raises(StoreError) as info:
            Store(db)
        with Store(db, readonly=True) as ro:  # still readable
            assert ro.count_runs() == 1
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(db), str(db.parent)], check=True)
        os.chmod(db.parent, 0o755)
        os.chmod(db, 0o644)
    message = str(info.value)
    assert "read-only" in message and str(db) in message and "--store" in message


def test_garbage_file_is_reported_and_left_untouched(db: Path) -> None:
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not sqlite\n" * 100)
    before = db.read_bytes()
    for readonly in (False, True):
        with pytest.raises(StoreError) as info:
            Store(db, readonly=readonly)
        message = str(info.value)
        assert "is damaged: it is not an SQLite database" in message and str(db) in message and ".recover" in message
    assert db.read_bytes() == before


def test_damaged_pages_are_reported_not_a_traceback(db: Path, build) -> None:
    with Store(db) as store:
        store.save_receipts(many(build, 300), validate=False)
    data = bytearray(db.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data) - page, page):  # keep the header page, wreck the rest
        data[offset : offset + 64] = b"\xff" * 64
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    with pytest.raises(StoreError, match="is damaged"):
        with Store(db, readonly=True) as ro:
            ro.list_runs(limit=None)
            ro.find("latest")
            assert ro.integrity_check() == []  # if reading happened to work, the check must still fail
    assert db.read_bytes() == before


def test_newer_store_is_refused_unchanged(db: Path, receipts: dict) -> None:
    with Store(db) as store:
        store.save_receipt(receipts["article_verified"])
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO schema_version VALUES (99, '2030-01-01T00:00:00.000Z')")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    for readonly in (False, True):
        with pytest.raises(StoreError) as info:
            Store(db, readonly=readonly)
        assert "newer DAL" in str(info.value) and "99" in str(info.value) and str(db) in str(info.value)
    assert db.read_bytes() == before


def test_someone_elses_database_is_not_touched(db: Path) -> None:
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a DAL run store"):
        Store(db)
    tables = sqlite3.connect(db).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("invoices",)]


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        Store(tmp_path)
    with pytest.raises(StoreError, match="is a directory"):
        Store(tmp_path, readonly=True)


def test_an_empty_file_is_refused_not_made_a_store(db: Path) -> None:
    # DAL builds a new store under a temporary name and links it into place, so it never leaves an empty
    # file: one found there is a truncated store (its journal gone) or not DAL's. Writing into it would
    # let a keyed operation run its effects again as if new.
    db.parent.mkdir(parents=True)
    db.touch()
    for readonly in (False, True):
        with pytest.raises(StoreError, match=r"is an empty file \(0 bytes\).*restore it from a backup"):
            Store(db, readonly=readonly)
    assert db.read_bytes() == b"" and sorted(p.name for p in db.parent.iterdir()) == ["dal.db"]


def test_a_new_store_appears_whole(db: Path) -> None:
    with Store(db) as store:
        assert store.version == SCHEMA_VERSION
    # no temporary left
    assert sorted(p.name for p in db.parent.iterdir()) == [".gitignore", "dal.db", "dal.db-reserve", "dal.db-seal"]


def test_a_version_1_store_is_read_and_migrated(db: Path, receipts: dict) -> None:
    import dal.receipts.store as store_module

    db.parent.mkdir(parents=True)
    old = sqlite3.connect(db, isolation_level=None)  # what a DAL of store version 1 made
    old.execute("PRAGMA journal_mode = WAL")
    for statement in store_module.MIGRATIONS[1]:
        old.execute(statement)
    old.execute("INSERT INTO schema_version VALUES (1, '2026-01-01T00:00:00.000Z')")
    old.execute("INSERT INTO runs (run_id, operation, status, started_at, pid) VALUES"
                " ('run_20260101T000000000Z_000001', 'script:x', 'running', '2026-01-01T00:00:00.000Z', 1)")
    old.close()
    with Store(db, readonly=True) as ro:  # a reader never migrates, and still reads the run
        row = ro.run_row("run_20260101T000000000Z_000001")
        assert ro.version == 1 and row["pid"] == 1 and row["pid_start"] is None and row["boot_id"] is None
    with Store(db) as store:
        assert store.version == SCHEMA_VERSION
        assert store.run_row("run_20260101T000000000Z_000001")["status"] == "running"


def test_an_older_store_is_migrated_in_place_keeping_its_runs(
    db: Path, receipts: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dal.receipts.store as store_module

    with Store(db) as store:
        store.save_receipt(receipts["article_verified"])
    # A future DAL with one more version that adds a column.
    future = SCHEMA_VERSION + 1
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", future)
    monkeypatch.setitem(store_module.MIGRATIONS, future, ["ALTER TABLE runs ADD COLUMN host TEXT"])
    with Store(db) as store:
        assert store.version == future
        assert store.get_run(receipts["article_verified"]["run_id"]) == receipts["article_verified"]
    columns = [row[1] for row in sqlite3.connect(db).execute("PRAGMA table_info(runs)")]
    assert "host" in columns
    versions = sqlite3.connect(db).execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    assert versions == [(v,) for v in range(1, future + 1)]


def test_a_failed_migration_changes_nothing(db: Path, receipts: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    import dal.receipts.store as store_module

    with Store(db) as store:
        store.save_receipt(receipts["article_verified"])
    future = SCHEMA_VERSION + 1
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", future)
    monkeypatch.setitem(store_module.MIGRATIONS, future, ["ALTER TABLE runs ADD COLUMN host TEXT", "THIS IS NOT SQL"])
    with pytest.raises(StoreError, match=str(db)):
        Store(db)
    monkeypatch.undo()
    with Store(db) as store:
        assert store.version == SCHEMA_VERSION and store.count_runs() == 1
    columns = [row[1] for row in sqlite3.connect(db).execute("PRAGMA table_info(runs)")]
    assert "host" not in columns


def test_a_damaged_receipt_row_is_reported_without_traceback(db: Path, receipts: dict) -> None:
    with Store(db) as store:
        store.save_receipts([receipts["article_verified"], receipts["skipped"]])
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET receipt = '{not json' WHERE run_id = ?", (receipts["skipped"]["run_id"],))
    conn.commit()
    conn.close()
    with Store(db, readonly=True) as ro:
        with pytest.raises(StoreError, match="stored receipt of run_20260902T111500000Z_0a0b0c .* is damaged"):
            ro.find("latest")
        assert ro.find(receipts["article_verified"]["run_id"]) == receipts["article_verified"]
