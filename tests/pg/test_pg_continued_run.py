"""A run the operation went on without: its key lock's session was cut and a taker on
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

from tests.pg.test_pg_key_lock import OTHER_BOOT, _cut, _lock_backends
from tests.pg.world import World

# Run A waits for the file `go` (a read each 0.1 s) before its append: the test lets it go on only once the run
# that continues it is recorded, however slow the machine.


def _spawn_elsewhere(world: World, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dal", *args], cwd=world.ws, text=True,
                            env=world.env(**_other_host(world, tmp_path)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _continued(world: World, rid: str) -> str | None:
    with world.store() as s:
        return (s.run_row(rid) or {}).get("resumed_by")


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


def _open_gate(fifo: Path, *procs: subprocess.Popen[str]) -> None:
    """Let every `cat FIFO` reading `fifo` end (a writer opens, writes a line, closes), again and again until
    `procs` have ended: a reader that opens the FIFO late still gets its end."""
    end = time.monotonic() + 60
    while any(p.poll() is None for p in procs) and time.monotonic() < end:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader yet (ENXIO)
            time.sleep(0.05)
            continue
        try:
            os.write(fd, b"go\n")
        finally:
            os.close(fd)
        time.sleep(0.05)


def test_a_run_whose_lock_was_lost_and_taken_on_another_host_ends_naming_the_run_that_continued_it(
        world: World, tmp_path: Path) -> None:
    """Run A's lock session is cut while A is inside its first effect (a read that waits for the test); run B, on
    another host, buries A and continues the operation; then A's read ends, and A ends at its next intent."""
    os.mkfifo(world.ws / "gate")
    world.write("s.dal", 'run("cat gate")\nrun("echo sent >> out.txt")\n')
    a = world.spawn("run", "--key", "k", "s.dal")
    world.wait_for(lambda: _lock_backends(world.url, "k"), 60, "run A to take its key lock")
    with world.store() as s:
        rid = world.wait_for(lambda: s.newest_run_of_key("k"), 60, "run A to be recorded")["run_id"]
    _cut(world.url, "k")
    b = _spawn_elsewhere(world, tmp_path, "run", "--key", "k", "s.dal")
    world.wait_for(lambda: _continued(world, rid), 60, "run B to continue run A")
    _open_gate(world.ws / "gate", a, b)
    assert a.wait(60) == 2
    err = a.stderr.read()
    assert "no longer holds the lock of operation 'k'" in err, err
    assert b.wait(60) == 0, b.stderr.read()
    assert world.lines("out.txt") == ["sent"]
    later = _assert_names_its_successor(world, rid, err)
    with world.store() as s:
        assert s.get_run(later)["status"] == "completed"


def test_a_keyless_run_resumed_from_another_host_while_it_runs_starts_no_second_append(world: World,
                                                                                       tmp_path: Path) -> None:
    """A run without a key holds its own run id's lock (`run:RUN`); that lock's session cut while it runs, `dal
    resume` on another host cannot see its process and buries it. The original's next intent is refused (the
    lost lock's fence, or the store's record of the resume): the append runs once."""
    # Inside its first effect (a read that waits for the test) when its lock's session is cut: no intent of it
    # comes before the resume is recorded.
    os.mkfifo(world.ws / "gate")
    world.write("s.dal", 'run("cat gate")\nrun("echo sent >> out.txt")\n')
    a = world.spawn("run", "s.dal")

    def started() -> str | None:
        from dal.receipts.store import NoStore

        try:
            with world.store() as s:
                rows = s.list_runs(limit=None)
        except NoStore:  # not made yet
            return None
        return rows[0]["run_id"] if rows and rows[0]["status"] == "running" else None

    rid = world.wait_for(started, 60, "the run to be recorded")
    _cut(world.url, "run:" + rid)
    b = _spawn_elsewhere(world, tmp_path, "resume", rid)
    world.wait_for(lambda: _continued(world, rid), 60, "the resume to be recorded")
    _open_gate(world.ws / "gate", a, b)
    assert a.wait(60) == 2
    err = a.stderr.read()
    assert "error[store]" in err, err
    assert "continued this run's operation" in err or f"no longer holds the lock of operation 'run:{rid}'" in err, err
    assert b.wait(60) == 0, b.stderr.read()
    assert world.lines("out.txt") == ["sent"]
    _assert_names_its_successor(world, rid, err)
