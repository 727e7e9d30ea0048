"""Nothing of a command outlives the DAL process that started it: kill -9 at many instants of a pipeline's
start, then look for any process of that pipeline (docs/policy.md, "Killed with DAL")."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dal.effects import sandbox_status
from dal.effects.wall.limits import Cgroup, CommandLimits
from dal.effects.wall.reaper import sweep

HERE = Path(__file__).resolve().parent
HAVE_BWRAP = sandbox_status()[0]


def _cgroups_work() -> bool:
    cg = Cgroup.create(CommandLimits(64, 1 << 20, 1 << 30, 1 << 20, 5))
    if cg is None:
        return False
    cg.close()
    return True


def _survivors(tag: str) -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if tag.encode() in cmd:
            shown = cmd.replace(b"\0", b" ")[-120:].decode(errors="replace")
            out.append(f"{pid}: {shown}")
    return out


def _settled(tag: str) -> list[str]:
    """The survivors once killed processes have had a moment to go (a loaded machine: up to 3 s)."""
    deadline = time.monotonic() + 3
    while True:
        left = _survivors(tag)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _kill_at_instants(ws: Path, wall: bool, cgroups: bool, delays: list[float]) -> tuple[str, int]:
    tag = str(random.randrange(10**8, 10**9))
    (ws / "dal.toml").write_text("")
    command = f"sleep 4.{tag} | tee -a a{tag} | tee -a b{tag}"
    env = {**os.environ, "PYTHONPATH": f"{HERE.parents[1]}:{HERE}"}
    out = subprocess.run([sys.executable, str(HERE / "kill_driver.py"), str(ws), "1" if wall else "0",
                          "1" if cgroups else "0", command, *(f"{d:.2f}" for d in delays)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return tag, int(out.stdout)


# kill instants from before the first fork to after the last stage was let go (a walled stage takes 5-15 ms)
DELAYS = [i * 1.7 for i in range(36)]
WALLS = [pytest.param(False, id="no-wall"),
         pytest.param(True, id="wall", marks=pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable"))]
CGROUPS = [pytest.param(False, id="no-cgroup"),
           pytest.param(True, id="cgroup", marks=pytest.mark.skipif(not _cgroups_work(), reason="no cgroups here"))]


@pytest.mark.parametrize("cgroups", CGROUPS)
@pytest.mark.parametrize("wall", WALLS)
def test_kill_9_at_any_instant_of_a_pipeline_leaves_nothing_after_the_next_start(
        tmp_path: Path, wall: bool, cgroups: bool) -> None:
    tag, killed = _kill_at_instants(tmp_path, wall, cgroups, DELAYS)
    assert killed == len(DELAYS)
    try:
        if not wall:
            # every stage is DAL's own child, killed with it (PR_SET_PDEATHSIG), whenever DAL dies
            assert _settled(tag) == []
        # A bubblewrap's init caught before it armed its own --die-with-parent waits (never running its
        # program unlimited); the next start (dal.effects.guard.recover) kills it: by its cgroup, or by its tag.
        sweep()
        assert _settled(tag) == []
    finally:
        for line in _survivors(tag):
            os.kill(int(line.split(":")[0]), 9)
