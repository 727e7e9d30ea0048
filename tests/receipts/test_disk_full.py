"""A full disk still leaves the run's end recorded, and what a run stores is bounded by what it ran
(executed on a real 40 MB tmpfs filled by the script itself)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest


def dal(ws: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, NO_COLOR="1", **env)
    full.pop("DAL_STORE", None)
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=ws, capture_output=True, text=True, env=full,
                          timeout=180)


@pytest.fixture
def small_disk(tmp_path: Path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(mnt)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.decode().strip()}")
    try:
        ws = mnt / "ws"
        ws.mkdir()
        yield ws
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_script_that_fills_the_disk_leaves_a_receipt_and_can_be_resumed(small_disk: Path) -> None:
    ws = small_disk
    (ws.parent / "s.dal").write_text('print(run("echo evidence >> evidence.txt"))\nprint(run("seq inf | tee f1"))\n')
    r = dal(ws, "run", "--effect-timeout", "3", "../s.dal")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "not recorded in the run store" not in r.stderr
    (ws / "f1").unlink()
    listing = dal(ws, "receipts", "--json")
    (row,) = json.loads(listing.stdout)["runs"]
    assert row["status"] == "interrupted"  # not `died`: the end is recorded
    receipt = json.loads(dal(ws, "receipt", "show", row["run_id"], "--json").stdout)
    assert "disk is full" in receipt["blocker"]
    assert sorted(p.suffix for p in (ws / ".dal" / "receipts").iterdir()) == [".json", ".md"]
    resumed = dal(ws, "resume", row["run_id"])
    assert resumed.returncode == 0, resumed.stderr
    assert (ws / "evidence.txt").read_text() == "evidence\n"  # the first effect did not run again
    assert (ws / ".dal" / "dal.db-reserve").stat().st_size > 0  # the room is kept again for next time


def test_the_store_grows_by_about_the_output_it_journals(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('for i in range(5) { let r = run("seq 1 300000") }\n')
    r = dal(tmp_path, "run", "s.dal")
    assert r.returncode == 0, r.stderr
    db = tmp_path / ".dal" / "dal.db"
    with sqlite3.connect(db) as c:
        journaled = sum(len(json.loads(x)["stdout"]) for (x,) in c.execute("SELECT result FROM effects"))
        (body,) = c.execute("SELECT receipt FROM runs").fetchone()
    assert 5 << 20 <= journaled < (5 << 20) + 1024  # each output whole up to max_output (1 MiB, whole lines)
    size = sum(p.stat().st_size for p in db.parent.glob("dal.db*") if not p.name.endswith("-reserve"))
    assert size < 1.4 * journaled  # was ~4.8x: the summary, the receipt and the loop kept it again
    assert len(body) < 256 << 10
    json_file = next((tmp_path / ".dal" / "receipts").glob("*.json"))
    assert json_file.stat().st_size < 256 << 10
    item = json.loads(json_file.read_text())["effects"]["items"][0]
    assert item["summary"].startswith("1\n2\n3\n") and "more characters not kept here" in item["summary"]


def test_one_run_stores_at_most_its_limit_and_a_resume_goes_on(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('for i in range(5) { let r = run("seq 1 300000")\nrun("echo " + str(i) + '
                                    '" >> done.txt") }\n')
    r = dal(tmp_path, "run", "s.dal", DAL_RUN_STORE_LIMIT="3M")
    assert r.returncode == 2 and "more than one run may store" in r.stderr, r.stderr
    # the third seq took the run past 3 MiB: the next effect did not start
    assert (tmp_path / "done.txt").read_text().split() == ["0", "1"]
    again = dal(tmp_path, "resume", "latest", DAL_RUN_STORE_LIMIT="3M")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "done.txt").read_text().split() == ["0", "1", "2", "3", "4"]
