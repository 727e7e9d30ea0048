"""The run store holds env() values an earlier run was allowed and every command's output: no script reads
it, by a command the check sees (denied) or through an allowed interpreter (the wall covers it). Executed
next to a secret in DAL's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dal.effects import sandbox_status

SECRET = "s3cr3t-90210"
TRUSTED = 'let t = env("DAL_TEST_SECRET")\nprint("token of", len(t))\nprint(run("echo out-marker-77"))\n'

needs_wall = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap does not work here")


def dal(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1", DAL_TEST_SECRET=SECRET)
    env.pop("DAL_STORE", None)
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=ws, capture_output=True, text=True, env=env,
                          timeout=120)


def _trusted(ws: Path, *where: str) -> None:
    (ws / "trusted.dal").write_text(TRUSTED)
    r = dal(ws, "run", "--allow-env=DAL_TEST_SECRET", *where, "trusted.dal")
    assert r.returncode == 0 and "token of 12" in r.stdout, r.stderr


@needs_wall
@pytest.mark.parametrize("commands", [
    "cat .dal/dal.db", "cp .dal/dal.db copy.db", "grep -a s3cr3t .dal/dal.db-wal",
    "grep -r -a out-marker .dal/receipts", "ls -la .dal", "cp -s .dal/dal.db x.db",
])
def test_the_check_refuses_reads_of_the_store(tmp_path: Path, commands: str) -> None:
    _trusted(tmp_path)
    (tmp_path / "u.dal").write_text(f'print(run("{commands}"))\n')
    r = dal(tmp_path, "run", "--require-sandbox", "u.dal")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("denied: reads a protected path") or r.stdout.startswith("denied: reads the run store")
    assert SECRET not in r.stdout and "out-marker-77" not in r.stdout
    assert not (tmp_path / "copy.db").exists()


@needs_wall
@pytest.mark.parametrize("leave_out", ["--exclude-dir=.dal ", ""])
def test_grep_that_leaves_the_store_out_runs(tmp_path: Path, leave_out: str) -> None:
    """Without --exclude-dir=.dal DAL adds it to the argv it runs (the walk need not be refused)."""
    _trusted(tmp_path)
    (tmp_path / "notes.txt").write_text("s3cr3t-look" + "alike\n")
    (tmp_path / "u.dal").write_text(f'print(run("grep -r -a -l {leave_out}-e 90210 -e alike ."))\n')
    r = dal(tmp_path, "run", "--require-sandbox", "u.dal")
    assert r.returncode == 0, r.stderr
    found = set(r.stdout.split())
    assert "./notes.txt" in found and not any(".dal/" in f for f in found), r.stdout


@needs_wall
@pytest.mark.parametrize("where", [[], ["--store", "state/dal.db", "--receipts", "out"]])
def test_an_interpreter_inside_the_wall_finds_no_store(tmp_path: Path, where: list[str]) -> None:
    (tmp_path / "state").mkdir()  # DAL creates only its default store folder
    _trusted(tmp_path, *where)
    grep = "grep -r -a -l -e s3cr3t -e out-marker-77 . ; ls -a .dal; echo end"
    (tmp_path / "u.dal").write_text(f"print(run(\"sh -c '{grep}'\"))\n")
    r = dal(tmp_path, "run", "--allow-run=sh", "--require-sandbox", *where, "u.dal")
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout and "out-marker-77" not in r.stdout.replace(grep, "")
    found = [line for line in r.stdout.splitlines() if line.startswith("./")]
    assert found == ["./u.dal", "./trusted.dal"] or sorted(found) == ["./trusted.dal", "./u.dal"], r.stdout
    assert r.stdout.split()[-3:] == [".", "..", "end"]  # .dal is an empty folder in the wall
    # The control: the store outside the wall does hold both.
    db = tmp_path / (where[1] if where else ".dal/dal.db")
    data = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    assert b"out-marker-77" in data and SECRET.encode() in data
