"""One operation, one runner: whatever path names the store, and between threads of one process (the
attacks of /tmp/attack-dur 09 and 10, executed: the effect after a sleep must run once)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

SCRIPT = 'run("printf \'a0\\n\' >> a.log")\nrun("sleep 1.5")\nrun("printf \'a1\\n\' >> a.log")\n'


def _dal(cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DAL_STORE", None)
    return subprocess.Popen([sys.executable, "-m", "dal", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_run(db: Path, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                row = sqlite3.connect(db).execute(
                    "select run_id from runs where status = 'running' order by run_id desc limit 1").fetchone()
            except sqlite3.Error:
                row = None
            if row:
                return str(row[0])
        time.sleep(0.05)
    raise AssertionError("the first run never started")


def test_a_store_reached_by_a_symlink_has_one_lock_for_a_key(tmp_path: Path) -> None:
    ws, s1, s2 = tmp_path / "ws", tmp_path / "s1", tmp_path / "s2"
    for d in (ws, s1, s2):
        d.mkdir()
    (ws / "s.dal").write_text(SCRIPT)
    warm = _dal(ws, "run", "--key", "warmup", "--store", "../s1/dal.db", "s.dal")
    assert warm.wait(60) == 0
    (ws / "a.log").unlink()
    (s2 / "dal.db").symlink_to("../s1/dal.db")
    first = _dal(ws, "run", "--key", "k", "--store", "../s1/dal.db", "s.dal")
    _wait_for_run(s1 / "dal.db")
    second = _dal(ws, "run", "--key", "k", "--store", "../s2/dal.db", "s.dal")
    _, err = second.communicate(timeout=60)
    assert second.returncode == 3, err
    assert "operation 'k' is being run by process" in err
    assert first.wait(60) == 0
    assert (ws / "a.log").read_text().split() == ["a0", "a1"]
    assert not (s2 / "locks").exists()


def test_api_resume_of_a_keyless_run_another_thread_runs_is_refused(tmp_path: Path, monkeypatch) -> None:
    import dal

    monkeypatch.chdir(tmp_path)
    out: dict[str, object] = {}
    t = threading.Thread(target=lambda: out.setdefault("r1", dal.run(SCRIPT, workspace=str(tmp_path))))
    t.start()
    try:
        rid = _wait_for_run(tmp_path / ".dal" / "dal.db")
        with pytest.raises(dal.DalUsageError, match="still running in another thread"):
            dal.resume(rid, workspace=str(tmp_path))
    finally:
        t.join(60)
    assert out["r1"].status == "completed"  # type: ignore[attr-defined]
    assert (tmp_path / "a.log").read_text().split() == ["a0", "a1"]


def test_two_threads_with_one_key_one_runs_the_other_is_busy(tmp_path: Path) -> None:
    import dal

    results: dict[str, object] = {}

    def go(name: str) -> None:
        try:
            results[name] = dal.run(SCRIPT, key="k", workspace=str(tmp_path)).status
        except dal.DalUsageError as e:
            results[name] = e

    a = threading.Thread(target=go, args=("a",))
    a.start()
    _wait_for_run(tmp_path / ".dal" / "dal.db")
    go("b")
    a.join(60)
    assert results["a"] == "completed"
    assert isinstance(results["b"], dal.DalUsageError) and "is being run by process" in str(results["b"])
    assert (tmp_path / "a.log").read_text().split() == ["a0", "a1"]
