"""A DAL process is taken for gone only where its pid means something: a DAL in another pid namespace (a
container sharing the workspace and the cgroup tree) looked gone from here, so a start here "finished" the
record of its live pipeline and killed its command (its cgroup, its bubblewrap). A real DAL runs in a second
pid namespace (`unshare -p -f --mount-proc`: it is that namespace's pid 1, which here is init, started at
another time); a run here meanwhile leaves its record, cgroup and wall alone and says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dal.effects import owners

ROOT = Path(__file__).resolve().parents[2]


def _records(held: Path) -> list[str]:
    """The records in `held` (not the temporary file one is written as first)."""
    return sorted(p.name for p in held.glob("*.json") if not p.name.startswith(".")) if held.is_dir() else []


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a pid namespace needs root")
def test_a_dal_in_another_pid_namespace_is_not_taken_for_gone(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(tmp_path / "state")}
    subprocess.run(["git", "init", "-q", str(ws)], check=True, env=env)  # the guard holds its refs: a record
    # The container's command runs until this test lets it end (the file `go`), then says it was not killed.
    (ws / "c.dal").write_text(
        "print(run(\"python3 -c 'import os, time\\nwhile not os.path.exists(\\\"go\\\"): time.sleep(0.05)\\n"
        "print(\\\"finished\\\")'\").stdout)\n")
    (ws / "h.dal").write_text('print(run("echo here").stdout)\n')
    inner = subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", sys.executable, "-m", "dal", "run",
                              "--allow-run=python3", "c.dal"], cwd=ws, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        held = ws / ".dal" / "held"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _records(held):
            time.sleep(0.05)
        records = _records(held)
        assert len(records) == 1 and records[0].startswith("1-"), (records, inner.poll())
        here = subprocess.run([sys.executable, "-m", "dal", "run", "h.dal"], cwd=ws, env=env, capture_output=True,
                              text=True, timeout=60)
        assert here.returncode == 0 and here.stdout == "here\n\n", here
        notes = [line for line in here.stderr.splitlines() if "left alone" in line]
        assert any(records[0] in line and "in another pid namespace of this host" in line for line in notes), here
        assert _records(held) == records  # the live pipeline's record stays
    finally:
        (ws / "go").write_text("")
        out, err = inner.communicate(timeout=60)
    assert inner.returncode == 0 and out == "finished\n\n", (inner.returncode, out, err)
    assert _records(held) == []  # its own DAL finished its checks and removed it


def test_what_an_owner_elsewhere_left_is_not_judged_here() -> None:
    me = owners.here()
    pid, start = 999999, 1  # no such process in this namespace
    assert owners.verdict(pid, start, dict(me)) == "gone"
    assert owners.verdict(os.getpid(), owners.start_time(os.getpid()), dict(me)) == "alive"
    assert owners.verdict(pid, start, {**me, "pidns": 1}) is None  # another pid namespace, this boot
    assert owners.verdict(pid, start, {**me, "boot": "another", "host": "elsewhere"}) is None  # another host
    # An earlier boot of this very host (its name and machine id): every process of that boot is gone.
    assert owners.verdict(os.getpid(), 1, {**me, "boot": "earlier"}) == ("gone" if me["machine"] else None)
    assert owners.verdict(pid, start, "unreadable") is None
