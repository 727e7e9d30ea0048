"""A keyed run executing on another machine, seen from this one: `dal receipt show` and `dal receipts` name the
machine (the holder of its key's lock says which), so the person at 3 a.m. knows where to look. The run's process
is made another machine's for real: another boot id and another node name in that process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.pg.test_pg_key_lock import _lock_backends
from tests.pg.world import World

ELSEWHERE = """\
import os
import dal.core.liveness as _p
_p._BOOT_ID[:] = ['00000000-0000-4000-8000-0000000000bb']
_u = os.uname()
os.uname = lambda: os.uname_result((_u.sysname, 'buildhost-7', _u.release, _u.version, _u.machine))
"""


def test_a_run_on_another_host_is_shown_running_there(world: World, tmp_path: Path) -> None:
    there = tmp_path / "buildhost"
    there.mkdir()
    (there / "sitecustomize.py").write_text(ELSEWHERE, encoding="utf-8")
    world.write("s.dal", 'run("sleep 30")\n')
    run = subprocess.Popen([sys.executable, "-m", "dal", "run", "--key", "k", "s.dal"], cwd=world.ws, text=True,
                           env=world.env(PYTHONPATH=f"{there}{os.pathsep}{world.env()['PYTHONPATH']}",
                                         DAL_STOP_GRACE="0.2"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        world.wait_for(lambda: _lock_backends(world.url, "k"), 30, "the run to take its key lock")
        shown = world.dal("receipt", "show", "k")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith("running") and f"(process {run.pid} on buildhost-7," in shown.stdout, \
            shown.stdout
        listed = world.dal("receipts")
        line = [r for r in listed.stdout.splitlines() if r.startswith("run_")][0]
        assert " running on buildhost-7 " in f" {line} ", listed.stdout
        rows = json.loads(world.dal("receipts", "--json").stdout)["runs"]
        assert [(r["status"], r.get("host")) for r in rows] == [("running", "buildhost-7")]
        assert world.dal("receipts", "--status", "running").stdout.count("buildhost-7") == 1
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(60)
    # Ended: no host named any more (the receipt says what happened; where it ran is not a state).
    assert "buildhost-7" not in world.dal("receipts").stdout
