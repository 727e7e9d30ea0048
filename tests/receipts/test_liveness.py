"""A run whose process is gone is `died` everywhere, even when its pid now belongs to another process: the
store records the process's start time and boot id next to its pid (migration 2), and every judgement of
liveness (the list, --json, --status, `receipt show`, `dal resume`) compares all three."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dal.core.liveness import boot_id, start_time, verdict
from dal.receipts.ids import new_run_id
from dal.receipts.store import Store

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@pytest.fixture
def other() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that has nothing to do with any run: the pid a dead run's pid was reused for."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def dal(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DAL_STORE"}
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={**env, "NO_COLOR": "1"})


def set_process(db: Path, run_id: str, pid: int, started: int | None, boot: str | None) -> None:
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET pid = ?, pid_start = ?, boot_id = ? WHERE run_id = ?", (pid, started, boot, run_id))
    conn.commit()
    conn.close()


def test_the_identity_of_a_process(other: subprocess.Popen[bytes]) -> None:
    mine = start_time(os.getpid())
    theirs = start_time(other.pid)
    assert isinstance(mine, int) and isinstance(theirs, int) and theirs >= mine
    assert verdict(other.pid, theirs, {"boot": boot_id()}) == "alive"
    assert verdict(other.pid, theirs - 1, {"boot": boot_id()}) == "gone"  # same pid, another process
    assert verdict(other.pid, theirs, {"boot": "another-boot"}) == "unknown"  # another boot: not ours to say
    assert verdict(other.pid, None, None) == "alive"  # a row from before migration 2: the pid is all there is
    other.kill()
    other.wait()
    assert verdict(other.pid, theirs, {"boot": boot_id()}) == "gone" and start_time(other.pid) is None


def test_begin_run_records_the_process(tmp_path: Path, other: subprocess.Popen[bytes]) -> None:
    rid = new_run_id()
    with Store(tmp_path / "dal.db") as store:
        store.begin_run(rid, operation="script:x")
        store.begin_run(rid + "b", operation="script:y", pid=other.pid)
        mine, theirs = store.run_row(rid), store.run_row(rid + "b")
    assert (mine["pid"], mine["pid_start"], mine["boot_id"]) == (os.getpid(), start_time(os.getpid()), boot_id())
    assert (theirs["pid"], theirs["pid_start"]) == (other.pid, start_time(other.pid))


def killed_run(ws: Path) -> str:
    """A real `dal run` killed with SIGKILL in the middle of its second effect; returns its run id."""
    (ws / "k.dal").write_text('run("touch a")\nrun("sleep 30")\nrun("touch b")\n')
    proc = subprocess.Popen([sys.executable, "-m", "dal", "run", "k.dal"], cwd=ws,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while "2 effects journaled" not in dal(ws, "receipt", "show", "latest").stdout:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    rows = json.loads(dal(ws, "receipts", "--json").stdout)["runs"]
    assert [r["status"] for r in rows] == ["died"]
    return rows[0]["run_id"]


def test_a_reused_pid_does_not_keep_a_dead_run_running(tmp_path: Path, other: subprocess.Popen[bytes]) -> None:
    rid = killed_run(tmp_path)
    db = tmp_path / ".dal" / "dal.db"
    theirs = start_time(other.pid)
    assert theirs is not None

    # The run's pid now names `other`, which started at another time: the run's own process is gone.
    set_process(db, rid, other.pid, theirs + 1, boot_id())
    assert [r["status"] for r in json.loads(dal(tmp_path, "receipts", "--json").stdout)["runs"]] == ["died"]
    assert " died " in dal(tmp_path, "receipts").stdout
    assert json.loads(dal(tmp_path, "receipts", "--json", "--status", "running").stdout)["runs"] == []
    shown = dal(tmp_path, "receipt", "show", rid)
    assert shown.returncode == 0 and shown.stdout.startswith(f"died  {rid}"), shown.stdout

    # Control: the same pid with its real start time is the run's process, still going.
    set_process(db, rid, other.pid, theirs, boot_id())
    assert [r["status"] for r in json.loads(dal(tmp_path, "receipts", "--json").stdout)["runs"]] == ["running"]
    assert dal(tmp_path, "receipt", "show", rid).stdout.startswith(f"running  {rid}  (process {other.pid}")
    refused = dal(tmp_path, "resume", rid)
    assert refused.returncode == 3 and f"still running in process {other.pid}" in refused.stderr

    # A run recorded in an earlier boot died with that boot, whoever has its pid now.
    set_process(db, rid, other.pid, theirs, "00000000-0000-0000-0000-000000000000")
    assert [r["status"] for r in json.loads(dal(tmp_path, "receipts", "--json").stdout)["runs"]] == ["died"]

    # `dal resume` of the dead run is not refused as "still running": it records the dead run as
    # interrupted and continues from the journal (into effect 2, `sleep 30`, where this test stops it).
    set_process(db, rid, other.pid, theirs + 1, boot_id())
    env = {k: v for k, v in os.environ.items() if k != "DAL_STORE"}
    resume = subprocess.Popen([sys.executable, "-m", "dal", "resume", rid], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            rows = {r["run_id"]: r["status"] for r in json.loads(dal(tmp_path, "receipts", "--json").stdout)["runs"]}
            if rows.get(rid) == "interrupted" or resume.poll() is not None:
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        resume.kill()
        _, err = resume.communicate()
    assert "still running" not in err, err
    assert rows[rid] == "interrupted" and len(rows) == 2  # buried by the resume, a run of its own
    assert (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert other.poll() is None  # nobody signalled the unrelated process


def test_the_lock_table_names_the_holder_of_a_flock_in_another_process(tmp_path: Path) -> None:
    """dal.core.procinfo.lock_table is the one reader of /proc/locks (key holders, store survey): a flock held by
    another process is listed under that process's pid and the file's identity; a flock nobody holds is not."""
    from dal.core.procinfo import lock_ident, lock_table

    path = tmp_path / "held.lock"
    path.write_text("")
    where = lock_ident(path.stat())
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys\nf = open(sys.argv[1])\n"
                               "fcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()",
                               str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        rows = [r for r in lock_table() or [] if len(r) > 5 and r[5] == where and r[1] == "FLOCK"]
        assert [(r[3], int(r[4])) for r in rows] == [("WRITE", holder.pid)]
    finally:
        holder.kill()
        holder.wait()
    assert not [r for r in lock_table() or [] if len(r) > 5 and r[5] == where]
