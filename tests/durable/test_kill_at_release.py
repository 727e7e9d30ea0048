"""A kill -9 while an effect's wall is coming up leaves no intent of an effect that never ran.

Inside bubblewrap the intent is journaled at the wall's release point: every stage's sandbox is set up and
bounded, none has started its program (executor._release). The test-only hook DAL_TEST_CRASH_AT=before-intent
kills DAL exactly there, with the sandbox waiting on its block pipe. The same `dal run --key` again then runs
the effect (it has no intent, so nothing asks a person), and it happens once: the held sandbox never started
its program, and the next start's sweep removes it.
"""

from __future__ import annotations

import signal
import sqlite3
import time

import pytest

from dal.effects import sandbox_status
from dal.effects.wall.reaper import sweep

SCRIPT = 'run("echo report | tee -a outbox.txt")\nrun("echo line | tee -a append.txt")\n'


def _waiting_walls(tag: str) -> list[int]:
    """bubblewrap processes (and their sandbox's init) whose command line holds `tag`, alive (not zombies)."""
    import os

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmd and b"bwrap" in cmd and state not in (b"Z", b"X"):
            found.append(int(pid))
    return found


@pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")
@pytest.mark.parametrize("seq", [1, 2])
def test_a_kill_while_the_wall_comes_up_leaves_no_intent_and_the_effect_runs_once(durable, seq: int) -> None:
    d = durable
    d.write("report.dal", SCRIPT)
    proc = d.spawn("run", "--key", "report", "report.dal", DAL_TEST_CRASH_AT=f"before-intent:{seq}")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (out, err)
    command = "outbox.txt" if seq == 1 else "append.txt"  # in the command line of its stage's bubblewrap
    # Killed at the release point, with the wall up and holding its program (that the wall is up there is
    # pinned in-process by tests/effects/test_wall_spawn.py: a held sandbox left here may be gone already,
    # swept by any other DAL that started meanwhile).
    with sqlite3.connect(d.db) as c:
        journaled = [r[0] for r in c.execute("SELECT seq FROM effects ORDER BY seq")]
    assert journaled == list(range(1, seq)), journaled  # no intent of the effect that never ran
    assert d.lines("outbox.txt") == (["report"] if seq == 2 else [])
    assert d.lines("append.txt") == []

    again = d.cli("run", "--key", "report", "report.dal")
    assert again.code == 0, again
    receipt = d.latest()
    assert receipt["status"] == "completed" and receipt["external_effect"] == "performed"
    assert [i["replayed"] for i in receipt["effects"]["items"]] == [seq == 2, False]
    sweep()  # what the next start does (dal.effects.guard.recover): the held sandbox goes, its program unstarted
    deadline = time.monotonic() + 5
    while _waiting_walls(command) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _waiting_walls(command)
    assert d.lines("outbox.txt") == ["report"]  # sent once
    assert d.lines("append.txt") == ["line"]
    d.check_store()
