"""A corpus of damaged and unusable stores, each through every command that touches a store.

Each case is a real store made by a real `dal run`, then damaged the way disks, copies and people damage
files. Every command must name the store and what is wrong with it (and, for damage, how to recover it),
exit 2, show no traceback, run nothing, and leave the store's bytes exactly as they were. A store that
is merely read-only, or on a full disk, is still readable: the readers show it, the writers refuse.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dal.receipts.store import Store

REPO = Path(__file__).resolve().parents[2]
PAGE = 4096
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

# (name, argv): every command that opens a store. `latest` names the waiting run the base store holds.
COMMANDS = [
    ("run", ["run", "--key", "deploy", "--allow-run", "touch", "send.dal"]),
    ("resume", ["resume", "latest", "--workspace", "."]),
    ("receipts", ["receipts"]),
    ("receipts-json", ["receipts", "--json"]),
    ("show", ["receipt", "show", "latest"]),
    ("approve", ["approve", "latest"]),
    ("deny", ["deny", "latest"]),
    ("resolve", ["resolve", "latest", "--as", "done"]),
]
READERS = {"receipts", "receipts-json", "show"}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose store holds a run waiting for approval of `touch sent` (key `deploy`), after 300
    finished runs (so the store has many pages), made by the real `dal run`."""
    ws = tmp_path_factory.mktemp("base")
    (ws / "send.dal").write_text('run("touch sent")\n')
    with Store(ws / ".dal" / "dal.db") as store:
        store.save_receipts([filler(i) for i in range(300)], validate=False)
    p = subprocess.run([sys.executable, "-m", "dal", "run", "--key", "deploy", "--require-approval", "touch",
                        "send.dal"], cwd=ws, capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode == 3, p.stderr
    assert not (ws / "sent").exists()
    return ws


def filler(i: int) -> dict:
    """A finished run's receipt, older than the waiting run."""
    return {
        "schema": "dal.receipt/v1", "run_id": f"run_20260101T0000{i // 1000:02d}{i % 1000:03d}Z_{i:06x}",
        "operation": f"script:filler{i}", "key": None, "script": {"path": "f.dal", "sha256": "a" * 64},
        "workspace": "/w", "status": "completed", "attempted_at": "2026-01-01T00:00:00.000Z",
        "finished_at": "2026-01-01T00:00:00.042Z", "duration_ms": 42, "steps": {"used": 1, "budget": 10},
        "effects": {"count": 0, "budget": None, "items": [], "omitted": 0}, "artifacts": [],
        "external_effect": "none", "retry": "none", "blocker": None, "error": None, "result": {"text": "x" * 400},
        "loops": [], "loops_omitted": 0, "attempts": None, "previous_run": None, "skipped_of": None,
    }


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DAL_STORE"}
    return {**env, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}


@dataclass
class Case:
    ws: Path
    store: Path  # where the commands look for the store (DAL_STORE)
    expect: str  # a phrase every refusal names
    damaged: bool = True  # True: the message says how to recover it
    readable: bool = False  # True: readers show the store (exit 0); only writers refuse


def snapshot(store: Path) -> dict[str, bytes | None]:
    """The bytes of the store and its side files (None: a directory, or absent)."""
    out: dict[str, bytes | None] = {}
    folder = store.parent
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        if p.name.startswith(store.name):
            out[p.name] = p.read_bytes() if p.is_file() else None
    return out


def copy_ws(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest, symlinks=True)
    for seal in dest.glob(".dal/*-seal"):
        seal.unlink()  # a copy is not the file DAL sealed; keep the cases independent of the seal
    return dest


def poke(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def page_of(db: Path, table: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    finally:
        conn.close()


def sql(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for s in statements:
            conn.execute(s)
    finally:
        conn.close()


def crash_leaving_wal(db: Path, transactions: int = 6) -> None:
    """Commit `transactions` decisions through the WAL, then die by SIGKILL before any checkpoint: the WAL
    holds committed frames, as after a kill -9 of a dal process."""
    code = textwrap.dedent(f"""
        import os, signal, sqlite3
        c = sqlite3.connect({str(db)!r}, isolation_level=None)
        c.execute("PRAGMA wal_autocheckpoint = 0")
        for i in range({transactions}):
            c.execute("INSERT INTO approvals (run_id, seq, decision, who, at, note) VALUES"
                      " ('run_x', 1, 'approved', 'ana', '2026', ?)", ("n" * 3000 + str(i),))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert p.returncode == -signal.SIGKILL
    assert Path(str(db) + "-wal").stat().st_size > 32 + 4 * (24 + PAGE)


# Each maker damages a copy of the base workspace and returns the case.
def truncated(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    with open(db, "r+b") as f:
        f.truncate(db.stat().st_size // 2)
    return Case(ws, db, "shorter than its header says")


def truncated_header(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    with open(db, "r+b") as f:
        f.truncate(60)
    return Case(ws, db, "too short to be an SQLite database (60 bytes)")


def header_bytes(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    poke(db, 16, b"\x13\x37\xca\xfe")  # page size, format versions: random
    return Case(ws, db, "its header is damaged (impossible page size")


def header_page_count(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    poke(db, 28, b"\xa7\x13\x5c\xe9")  # the page count: random (SQLite trusts it: valid-for still matches)
    return Case(ws, db, "is damaged")


def schema_bad_utf8(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    data = db.read_bytes()  # (the schema spans more than page 1 since the job queue's tables)
    at = data.index(b"CREATE TABLE runs")
    poke(db, at + 20, b"\xff\xfe\xfd\xfc")  # inside the stored CREATE statement: not UTF-8
    return Case(ws, db, "is damaged")


def schema_random(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    # The schema's cells (around the one of the runs table, wherever the schema's pages are)
    at = db.read_bytes().index(b"CREATE TABLE runs")
    poke(db, max(0, at - 120), bytes(range(7, 250, 3)) * 3)
    return Case(ws, db, "is damaged")


def table_page(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    page = page_of(db, "runs")
    poke(db, (page - 1) * PAGE, b"\x00\x91\x77\x13\x00\x00\x55\x66" * 4)  # the b-tree page header: random
    return Case(ws, db, "integrity_check finds damage")


def index_content(ws: Path) -> Case:
    # Sound in structure (PRAGMA quick_check says ok), but an index no longer agrees with its table: a
    # write would go by the index. Only PRAGMA integrity_check finds it.
    db = ws / ".dal" / "dal.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        page = conn.execute("SELECT pageno FROM dbstat WHERE name = 'runs_by_operation' AND pagetype = 'leaf'"
                            " LIMIT 1").fetchone()[0]
    finally:
        conn.close()
    data = db.read_bytes()[(page - 1) * PAGE : page * PAGE]
    poke(db, (page - 1) * PAGE + data.index(b"script:filler1") + 7, b"F")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    return Case(ws, db, "integrity_check finds damage (row ")


def wal_frame(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    crash_leaving_wal(db)
    wal = Path(str(db) + "-wal")
    poke(wal, 32 + 2 * (24 + PAGE) + 24 + 700, b"\xde\xad\xbe\xef" * 8)  # the data of frame 3 of 6+
    return Case(ws, db, "write-ahead log dal.db-wal is damaged at frame 3")


def wal_header(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    crash_leaving_wal(db)
    poke(Path(str(db) + "-wal"), 16, b"\x01\x02\x03\x04")  # a salt: SQLite would ignore the whole log
    return Case(ws, db, "write-ahead log dal.db-wal has a damaged header")


def table_dropped(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    sql(db, "DROP TABLE approvals")
    return Case(ws, db, "table `approvals` is missing")


def column_renamed(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    sql(db, "ALTER TABLE runs RENAME COLUMN pid TO process")
    return Case(ws, db, "missing: pid; unexpected: process")


def index_dropped(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    sql(db, "DROP INDEX runs_by_key")
    return Case(ws, db, "index `runs_by_key` is missing")


def newer_version(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    sql(db, "INSERT INTO schema_version VALUES (99, '2030-01-01T00:00:00.000Z')")
    return Case(ws, db, "written by a newer DAL (store version 99", damaged=False)


def not_dal(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    db.unlink()
    sql(db, "CREATE TABLE invoices (id INTEGER)")
    return Case(ws, db, "not a DAL run store", damaged=False)


def directory(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    db.unlink()
    db.mkdir()
    return Case(ws, db, "is a directory", damaged=False)


def zero_bytes(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    db.write_bytes(b"")
    return Case(ws, db, "is an empty file (0 bytes)", damaged=False)


def not_sqlite(ws: Path) -> Case:
    db = ws / ".dal" / "dal.db"
    db.write_bytes(b"this is a text file, not a store\n" * 200)
    return Case(ws, db, "not an SQLite database")


MAKERS: list[Callable[[Path], Case]] = [
    truncated, truncated_header, header_bytes, header_page_count, schema_bad_utf8, schema_random, table_page,
    index_content, wal_frame, wal_header, table_dropped, column_renamed, index_dropped, newer_version, not_dal,
    directory, zero_bytes, not_sqlite,
]


@contextlib.contextmanager
def mounted(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def dal(case: Case, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> tuple[int, str, str]:
    """The real CLI entry point, in this process, in the case's workspace with DAL_STORE at its store."""
    from dal.cli.main import main

    monkeypatch.chdir(case.ws)
    monkeypatch.setenv("DAL_STORE", str(case.store))
    monkeypatch.setenv("NO_COLOR", "1")
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def check_refusals(case: Case, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(case.store)
    for name, argv in COMMANDS:
        code, out, err = dal(case, argv, monkeypatch, capsys)
        text = out + err
        assert "Traceback" not in text, (name, text)
        if case.readable and name in READERS:
            assert code == 0, (name, text)
            assert "run_" in out, (name, text)
        else:
            assert code == 2, (name, code, text)
            assert case.expect in err and str(case.store) in err, (name, err)
            if case.damaged:
                assert "DAL has not written to it" in err and ".recover" in err, (name, err)
        assert not (case.ws / "sent").exists(), name  # nothing ran
        assert snapshot(case.store) == before, name  # not a byte changed, no side file appeared


@pytest.mark.parametrize("maker", MAKERS, ids=[m.__name__ for m in MAKERS])
def test_every_command_names_the_damage_and_writes_nothing(
    maker: Callable[[Path], Case], base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = maker(copy_ws(base, tmp_path / "ws"))
    check_refusals(case, monkeypatch, capsys)


@pytest.mark.parametrize("maker", [truncated, schema_bad_utf8, wal_frame, column_renamed, zero_bytes],
                         ids=lambda m: m.__name__)
def test_the_real_command_exits_2_without_a_traceback(maker: Callable[[Path], Case], base: Path, tmp_path: Path
                                                     ) -> None:
    case = maker(copy_ws(base, tmp_path / "ws"))
    before = snapshot(case.store)
    for argv in (COMMANDS[0][1], ["receipts"]):
        p = subprocess.run([sys.executable, "-m", "dal", *argv], cwd=case.ws, capture_output=True, text=True,
                           timeout=120, env={**_env(), "DAL_STORE": str(case.store)})
        assert p.returncode == 2 and case.expect in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert snapshot(case.store) == before and not (case.ws / "sent").exists()


def test_dal_test_never_touches_the_operators_store(base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # `dal test` runs every test in a fresh workspace with its own store: DAL_STORE is not used.
    case = truncated(copy_ws(base, tmp_path / "ws"))
    (case.ws / "ok.test.dal").write_text('assert_eq(1 + 1, 2)\n')
    before = snapshot(case.store)
    code, out, err = dal(case, ["test", "ok.test.dal"], monkeypatch, capsys)
    assert code == 0 and "1 passed, 0 failed" in out, out + err
    assert snapshot(case.store) == before


def test_a_crash_leaves_a_sound_wal_that_is_accepted(base: Path, tmp_path: Path) -> None:
    # The WAL check must not mistake what every kill -9 leaves behind for damage.
    ws = copy_ws(base, tmp_path / "ws")
    db = ws / ".dal" / "dal.db"
    crash_leaving_wal(db)
    with Store(db, readonly=True) as ro:
        assert len(ro.approvals("run_x")) == 6
    with Store(db) as store:
        assert len(store.approvals("run_x")) == 6 and store.integrity_check() == []


def test_the_recovery_the_message_gives_works(base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("sqlite3") is None:
        pytest.skip("no sqlite3 command line")
    ws = copy_ws(base, tmp_path / "ws")
    db = ws / ".dal" / "dal.db"
    poke(db, (page_of(db, "runs_by_status") - 1) * PAGE, b"\x00\x91\x77\x13\x00\x00\x55\x66" * 4)  # an index
    case = Case(ws, db, "integrity_check finds damage")
    code, _, err = dal(case, ["receipts"], monkeypatch, capsys)
    assert code == 2 and case.expect in err
    steps = [line.strip() for line in err.splitlines() if line.startswith("    ")]
    assert len(steps) == 4
    for step in steps:
        subprocess.run(step, shell=True, check=True, cwd=case.ws, capture_output=True)
    assert (case.store.parent / "damaged-dal.db" / "dal.db").read_bytes()[:16] == b"SQLite format 3\x00"
    code, out, err = dal(case, ["receipts", "--limit", "0"], monkeypatch, capsys)  # every run is back
    assert code == 0 and " waiting " in out and out.count("run_") == 301, err


def test_a_big_store_changed_behind_dals_back_is_checked(base: Path, tmp_path: Path) -> None:
    # A store over the always-check size skips PRAGMA integrity_check only while it is exactly as DAL left it.
    import dal.receipts.store as store_module

    ws = copy_ws(base, tmp_path / "ws")
    db = ws / ".dal" / "dal.db"
    with Store(db):
        pass  # sealed on close
    size = db.stat().st_size
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(store_module, "FULL_CHECK_ALWAYS", size // 4)
        with Store(db) as store:
            assert store.count_runs() == 301
        page = page_of(db, "runs")
        poke(db, (page - 1) * PAGE, b"\x00\x91\x77\x13\x00\x00\x55\x66" * 4)
        before = db.read_bytes()
        for readonly in (True, False):
            with pytest.raises(store_module.StoreDamaged, match="integrity_check finds damage"):
                Store(db, readonly=readonly)
        assert db.read_bytes() == before


@pytest.mark.skipif(not ROOT, reason="mounting a tmpfs needs root")
def test_a_read_only_store_is_read_but_never_written(base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    ws = copy_ws(base, tmp_path / "ws")
    with mounted(tmp_path / "ro", "8m") as mnt:
        shutil.copy2(ws / ".dal" / "dal.db", mnt / "dal.db")
        os.chmod(mnt / "dal.db", 0o444)
        os.chmod(mnt, 0o555)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)  # root ignores modes: a ro mount
        check_refusals(Case(ws, mnt / "dal.db", "is read-only", damaged=False, readable=True), monkeypatch, capsys)


def test_a_read_only_folder_and_file_without_root(base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    if ROOT:
        pytest.skip("root ignores file modes (the tmpfs test covers root)")
    ws = copy_ws(base, tmp_path / "ws")
    folder = tmp_path / "ro"
    folder.mkdir()
    shutil.copy2(ws / ".dal" / "dal.db", folder / "dal.db")
    os.chmod(folder / "dal.db", 0o444)
    os.chmod(folder, 0o555)
    try:
        check_refusals(Case(ws, folder / "dal.db", "read-only", damaged=False, readable=True), monkeypatch, capsys)
    finally:
        os.chmod(folder, 0o755)


@pytest.mark.skipif(not ROOT, reason="mounting a tmpfs needs root")
def test_a_store_on_a_full_disk_is_read_but_never_written(base: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    ws = copy_ws(base, tmp_path / "ws")
    with mounted(tmp_path / "full", "4m") as mnt:
        shutil.copy2(ws / ".dal" / "dal.db", mnt / "dal.db")
        with open(mnt / "filler", "wb") as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        assert shutil.disk_usage(mnt).free < 65536
        check_refusals(Case(ws, mnt / "dal.db", "is full", damaged=False, readable=True), monkeypatch, capsys)


def test_the_same_commands_work_on_a_sound_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # Control for the corpus: on a sound store the same commands do not refuse. (A fresh workspace, not a
    # copy of the base: a resumed operation runs in the workspace its policy was fixed in.)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "send.dal").write_text('run("touch sent")\n')
    p = subprocess.run([sys.executable, "-m", "dal", "run", "--key", "deploy", "--require-approval", "touch",
                        "send.dal"], cwd=ws, capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode == 3, p.stderr
    case = Case(ws, ws / ".dal" / "dal.db", "")
    code, out, _ = dal(case, ["receipts"], monkeypatch, capsys)
    assert code == 0 and " waiting " in out
    code, out, err = dal(case, ["approve", "latest"], monkeypatch, capsys)
    assert code == 0 and "approved effect 1" in out, err
    code, out, err = dal(case, ["resume", "latest"], monkeypatch, capsys)
    assert code == 0 and (ws / "sent").exists(), err


@pytest.mark.skipif(not ROOT, reason="mounting a tmpfs needs root")
def test_no_store_yet_in_a_read_only_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "send.dal").write_text('run("touch sent")\n')
    with mounted(tmp_path / "ro", "8m") as mnt:
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        case = Case(ws, mnt / "dal.db", "is read-only", damaged=False)
        code, _, err = dal(case, COMMANDS[0][1], monkeypatch, capsys)
        assert code == 2 and "is read-only" in err and "Nothing ran" in err, err
        assert list(mnt.iterdir()) == [] and not (ws / "sent").exists()
