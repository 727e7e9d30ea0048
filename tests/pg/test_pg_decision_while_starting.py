"""A decision recorded while an invocation of the key holds its lock but has not recorded its run yet applies to
that invocation (it reads decisions when it reaches the effect). The PostgreSQL store's lock names its holder
(pid and machine) as the SQLite store's flock does: `dal approve` says so on either store, asked of the store's
own `key_holder` (one reader of who holds a key)."""

from __future__ import annotations

import os
import socket

from tests.pg.world import World


def test_a_decision_while_a_run_of_the_key_is_starting_names_that_process(world: World) -> None:
    world.write("dal.toml", '[programs.tee]\nclass = "external"\napproval = true\n')
    world.write("s.dal", 'run("echo send1 | tee -a outbox.txt")\n')
    gated = world.dal("run", "--key", "k", "s.dal")
    assert gated.returncode == 3, gated.stderr
    with world.store(readonly=False) as s:
        waiting = s.find_run("k")["run_id"]
        lock = s.operation_lock("k")
        lock.acquire("run_20990101T000000000Z_000001")  # what a starting runner does first
        try:
            said = world.dal("approve", "k")
        finally:
            lock.release()
    assert said.returncode == 0, said.stderr
    here = os.uname().nodename or socket.gethostname()
    assert f"applies to the run process {os.getpid()} on {here} is starting now" in said.stdout, said.stdout
    assert f"if it stops before, `dal resume {waiting}`" in said.stdout
    assert world.lines("outbox.txt") == []
    resumed = world.dal("resume", "k")
    assert resumed.returncode == 0, resumed.stderr
    assert world.lines("outbox.txt") == ["send1"]
