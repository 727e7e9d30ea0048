"""A run the operation went on without (attack7 01's follow-up): its key lock's session was cut and a taker on
another host buried it and continued the operation, or, without a key, `dal resume` on another host judged it
dead. When the original ends, its own receipt replaces the bury receipt: it must name the run that continued it
and must not tell the operator to resume (`dal resume` would answer "already continued"). Faults injected for
real on the tests' server; effects counted in the world."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pg.test_pg_key_lock import OTHER_BOOT, _run_losing_its_lock
from tests.pg.world import World


@pytest.fixture
def world(pg_url: str, tmp_path: Path) -> World:
    w = World(tmp_path / "ws", pg_url)
    yield w
    w.stop_all()


def _other_host(world: World, tmp_path: Path) -> dict[str, str]:
    other = tmp_path / "otherhost"
    other.mkdir()
    (other / "sitecustomize.py").write_text(OTHER_BOOT, encoding="utf-8")
    return {"PYTHONPATH": f"{other}{os.pathsep}{world.env()['PYTHONPATH']}"}


def _assert_names_its_successor(world: World, rid: str, stderr: str) -> str:
    """The fenced run's receipt (store, file, `dal receipt show`, its own last line) names the run that
    continued it and says nothing to resume. Returns that run's id."""
    with world.store() as s:
        later = s.run_row(rid)["resumed_by"]
        receipt = s.get_run(rid)
    assert later is not None and later != rid
    assert receipt["status"] == "interrupted" and receipt["retry"] == "none", receipt
    assert receipt["continued_by"] == later and later in receipt["blocker"], receipt
    on_disk = json.loads((world.ws / ".dal" / "receipts" / f"{rid}.json").read_text(encoding="utf-8"))
    assert on_disk["continued_by"] == later
    md = (world.ws / ".dal" / "receipts" / f"{rid}.md").read_text(encoding="utf-8")
    assert f"continued this one (`dal receipt show {later}`)" in md and "dal resume" not in md, md
    assert "dal resume" not in stderr and f"dal: next: nothing here: run {later} continued this one" in stderr, stderr
    shown = world.dal("receipt", "show", rid)
    assert shown.returncode == 0 and "dal resume" not in shown.stdout, shown.stdout
    refused = world.dal("resume", rid)  # what `next:` no longer suggests
    assert refused.returncode != 0 and "already continued" in refused.stderr, refused.stderr
    return later


def test_a_run_whose_lock_was_lost_and_taken_on_another_host_ends_naming_the_run_that_continued_it(
        world: World, tmp_path: Path) -> None:
    a, b = _run_losing_its_lock(world, taker_env=_other_host(world, tmp_path))
    assert b.returncode == 0, b.stderr
    assert a.wait(60) == 2
    err = a.stderr.read()
    assert "no longer holds the lock of operation 'k'" in err, err
    assert world.lines("out.txt") == ["sent"]
    with world.store() as s:
        rid = [r for r in s.runs_of_key("k") if r["status"] == "interrupted"][0]["run_id"]
    later = _assert_names_its_successor(world, rid, err)
    with world.store() as s:
        assert s.get_run(later)["status"] == "completed"


def test_a_keyless_run_resumed_from_another_host_while_it_runs_starts_no_second_append(world: World,
                                                                                       tmp_path: Path) -> None:
    """No key lock fences a run without a key: `dal resume` on another host cannot see its process and buries
    it. The store refuses the original's next intent once the resume is recorded: the append runs once."""
    world.write("s.dal", 'run("sleep 2")\nrun("echo sent >> out.txt")\n')
    a = world.spawn("run", "s.dal")

    def started() -> str | None:
        from dal.receipts.store import NoStore

        try:
            with world.store() as s:
                rows = s.list_runs(limit=None)
        except NoStore:  # not made yet
            return None
        return rows[0]["run_id"] if rows and rows[0]["status"] == "running" else None

    rid = world.wait_for(started, 30, "the run to be recorded")
    time.sleep(0.3)
    env = world.env(**_other_host(world, tmp_path))
    b = subprocess.run([sys.executable, "-m", "dal", "resume", rid], cwd=world.ws, env=env, text=True,
                       capture_output=True, timeout=120)
    assert b.returncode == 0, b.stderr
    assert a.wait(60) == 2
    err = a.stderr.read()
    assert "error[store]" in err and "continued this run's operation" in err, err
    assert world.lines("out.txt") == ["sent"]
    _assert_names_its_successor(world, rid, err)
