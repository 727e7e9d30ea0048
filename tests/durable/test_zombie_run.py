"""A `dal run` killed -9 whose parent never waits for it (an agent host's Popen, a container's PID 1 that is no
init) is a zombie until reaped: it runs nothing, holds no lock, writes no journal. It reads as dead:
`dal receipts` says `died`, `dal resolve` decides about the effect it was executing, `dal resume` continues the
operation — while the zombie still exists. Executed: the test is the parent that does not wait."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from dal.core.liveness import exited, start_time, verdict
from tests.durable.conftest import Durable

POLICY = '[programs.sh]\nclass = "local"\nidempotent = false\n'
SCRIPT = ('run("echo a >> m")\n'
          'run("sh -c \'echo x >> m; sleep 30\'")\n'
          'run("echo b >> m")\n'
          'finish("ok")\n')


def make_zombie(argv: list[str], cwd: os.PathLike[str], env: dict[str, str], ready: object) -> subprocess.Popen[str]:
    """Start `argv`, wait until `ready()`, kill -9 it and do not reap it: a zombie (state Z) until wait()."""
    p = subprocess.Popen(argv, cwd=cwd, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not ready():  # type: ignore[operator]
        assert p.poll() is None, "the run ended before it was killed"
        assert time.monotonic() < deadline, "timed out waiting for the run"
        time.sleep(0.05)
    time.sleep(0.2)
    os.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not exited(p.pid):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return p


def test_a_zombie_is_not_alive() -> None:
    p = subprocess.Popen(["sleep", "30"])
    started = start_time(p.pid)
    assert verdict(p.pid, started, None) == "alive"
    os.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not exited(p.pid):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with open(f"/proc/{p.pid}/stat", "rb") as f:  # still there, start time unchanged: only its state says
        assert f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    assert start_time(p.pid) == started
    assert verdict(p.pid, started, None) == "gone"
    p.wait()


def test_a_killed_unreaped_run_is_died_decidable_and_resumable_while_its_zombie_exists(durable: Durable) -> None:
    durable.write("dal.toml", POLICY)
    durable.write("s.dal", SCRIPT)
    zombie = make_zombie(durable.argv("run", "--key", "k", "s.dal"), durable.ws, durable.env(),
                         lambda: durable.lines("m") == ["a", "x"])
    try:
        listed = durable.run("receipts", "--json")
        assert [r["status"] for r in json.loads(listed.out)["runs"]] == ["died"], listed.out + listed.err
        decided = durable.run("resolve", "k", "--effect", "2", "--as", "done")
        assert decided.code == 0, decided.out + decided.err
        resumed = durable.run("resume", "k")
        assert resumed.code == 0, resumed.out + resumed.err
        assert exited(zombie.pid)  # all of that while the zombie still existed
    finally:
        zombie.wait()
    assert durable.lines("m") == ["a", "x", "b"]  # effect 2 once
    assert [r["status"] for r in durable.check_store()] == ["interrupted", "completed"]
