"""A store someone else holds locked when `dal run` starts: exit 2 after the busy timeout, the store and the
holder named, nothing ran and nothing was recorded; once the lock is gone the same command runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k != "DAL_STORE"}
    return {**base, "NO_COLOR": "1", "PYTHONPATH": str(REPO), **extra}


def dal(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env(**extra))


def test_a_locked_store_refuses_the_run_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('run("touch first")\n')
    assert dal(tmp_path, "run", "--key", "k1", "--allow-run", "touch", "s.dal").returncode == 0
    (tmp_path / "s.dal").write_text('run("touch marker")\n')
    db = tmp_path / ".dal" / "dal.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, time\n"
         f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\n"
         "print('held', flush=True)\ntime.sleep(120)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        p = dal(tmp_path, "run", "--key", "k2", "--allow-run", "touch", "s.dal", DAL_STORE_TIMEOUT="1")
        waited = time.monotonic() - started
        host = dal(tmp_path, "run", "--json", "--key", "k2", "--allow-run", "touch", "s.dal", DAL_STORE_TIMEOUT="1")
    finally:
        holder.kill()
        holder.wait()
    assert p.returncode == 2 and waited < 20, p.stderr
    assert f"the run store {db} is locked: process {holder.pid}" in p.stderr
    assert "more than 1 s" in p.stderr and "Nothing ran" in p.stderr and "Traceback" not in p.stderr
    assert "internal" not in p.stderr
    assert host.returncode == 2 and json.loads(host.stdout)["error"]["exit_code"] == 2
    assert not (tmp_path / "marker").exists()
    rows = json.loads(dal(tmp_path, "receipts", "--json").stdout)["runs"]
    assert [r["key"] for r in rows] == ["k1"]  # nothing recorded for the refused runs
    assert len(list((tmp_path / ".dal" / "receipts").glob("*.json"))) == 1
    again = dal(tmp_path, "run", "--key", "k2", "--allow-run", "touch", "s.dal")
    assert again.returncode == 0 and (tmp_path / "marker").exists(), again.stderr


def test_a_bad_timeout_setting_is_named(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("x")\n')
    p = dal(tmp_path, "run", "s.dal", DAL_STORE_TIMEOUT="soon")
    assert p.returncode == 2 and "DAL_STORE_TIMEOUT='soon' is not a number of seconds" in p.stderr, p.stderr
