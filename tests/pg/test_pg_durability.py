"""The durability promises, kept on a PostgreSQL store by the database (advisory locks, SKIP LOCKED claims, the
fence in the journal's INSERT), with the faults injected for real: kill -9 of workers at random instants,
concurrent invocations of one key, approve racing resume, the database server restarted mid-run, and four
workers in separate workspaces draining one queue. Effects are counted in the world (lines appended to
files): 0 duplicated, 0 lost.

DAL_PG_KILL_TRIALS, DAL_PG_RACE_TRIES and DAL_PG_DRAIN_JOBS make the runs longer (bench-like); the defaults
keep the suite within its budget.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.pg.server import PgServer
from tests.pg.world import World

SEED = int(os.environ.get("DAL_PG_SEED", str(random.randrange(1 << 30))))


def job_script(k: int) -> str:
    return (f'operation("j{k}")\n'
            'run("cat input.txt")\n'
            f'run("echo {k}-a >> out.txt")\n'
            'run("sleep 0.3")\n'
            f'run("echo {k}-b >> out.txt")\n'
            f'run("echo {k}-sent | tee -a outbox.txt")\n')


def happened_in(w: World):  # noqa: ANN201 - a predicate over commands
    def happened(command: str) -> bool:
        if ">> out.txt" in command:
            return command.split()[1] in w.lines("out.txt")
        if "outbox.txt" in command:
            return command.split()[1] in w.lines("outbox.txt")
        return True
    return happened


def finish_all(w: World, jobs: range, timeout: float, why: str) -> None:
    """Wait until every job is done, answering for effects of unknown outcome as a person would."""
    end = time.monotonic() + timeout
    happened = happened_in(w)
    while not all(w.states().get(j) == "done" for j in jobs):
        assert time.monotonic() < end, (why, w.states(), w.logs())
        w.settle_waiting(happened)
        time.sleep(0.2)


def counted(w: World, ks: range) -> None:
    assert sorted(w.lines("out.txt")) == sorted(f"{k}-{x}" for k in ks for x in ("a", "b"))  # 0 dup, 0 lost
    assert sorted(w.lines("outbox.txt")) == sorted(f"{k}-sent" for k in ks)


def test_kill_9_of_workers_at_random_instants_loses_and_repeats_nothing(world: World) -> None:
    rng = random.Random(SEED)
    jobs = 6
    for k in range(jobs):
        world.write(f"job{k}.dal", job_script(k))
        assert world.dal("submit", f"job{k}.dal").returncode == 0
    kills = []
    for _ in range(int(os.environ.get("DAL_PG_KILL_TRIALS", "3"))):
        w = world.worker("--concurrency", "2", "--lease", "1")
        time.sleep(rng.uniform(0.5, 2.0))
        how = rng.choice(("worker", "worker and children"))
        kills.append(how)
        os.kill(w.pid, signal.SIGKILL) if how == "worker" else os.killpg(w.pid, signal.SIGKILL)
        w.wait(10)
    last = world.worker("--concurrency", "2", "--lease", "1")
    finish_all(world, range(1, jobs + 1), 120, f"seed {SEED}, kills {kills}")
    # The earlier workers may have finished every job: SIGTERM once this one has started (a SIGTERM while
    # Python still imports ends it by the default action, -15, with nothing claimed).
    log = Path(last.log)  # type: ignore[attr-defined]
    world.wait_for(lambda: "started:" in log.read_text(encoding="utf-8"), 60, "the last worker to start")
    last.send_signal(signal.SIGTERM)
    assert last.wait(30) == 0
    counted(world, range(jobs))
    world.check_receipts()


def test_concurrent_invocations_of_one_key_run_its_effects_once(world: World) -> None:
    world.write("once.dal", 'run("echo ran >> out.txt")\nrun("sleep 0.3")\nrun("echo sent | tee -a outbox.txt")\n')
    procs = [world.spawn("run", "--key", "deploy:7", "--wait", "60", "once.dal") for _ in range(6)]
    codes = [p.wait(120) for p in procs]
    assert codes == [0] * 6, [p.stderr.read() for p in procs if p.stderr]
    assert world.lines("out.txt") == ["ran"] and world.lines("outbox.txt") == ["sent"]
    statuses = Counter(r["status"] for r in world.check_receipts())
    assert statuses == {"completed": 1, "skipped": 5}


def test_approve_racing_resume_executes_the_send_exactly_once(world: World) -> None:
    world.write("send.dal", 'let body = run("cat input.txt")\nlet sent = run("echo report | tee -a outbox.txt")\n')
    rng = random.Random(SEED)
    tries = int(os.environ.get("DAL_PG_RACE_TRIES", "4"))
    for i in range(tries):
        key = f"send:{i}"
        first = world.dal("run", "--key", key, "--require-approval=tee", "send.dal")
        assert first.returncode == 3, first.stderr  # waiting for approval
        resumers = [world.spawn("resume", key) for _ in range(2)]
        time.sleep(rng.uniform(0.0, 0.4))
        approved = world.dal("approve", key, "--note", f"try {i}")
        assert approved.returncode == 0, approved.stderr
        for p in resumers:
            p.wait(120)
        # Whichever run reached the gate before the decision waits; the next resume executes the send.
        for _ in range(3):
            if world.lines("outbox.txt").count("report") == i + 1:
                break
            world.dal("resume", key)
        assert world.lines("outbox.txt") == ["report"] * (i + 1), (i, approved.stdout)
        again = world.dal("run", "--key", key, "--require-approval=tee", "send.dal")
        assert again.returncode == 0  # skipped: done already
    sends = [item for r in world.check_receipts() for item in r["effects"]["items"]
             if item["seq"] == 2 and item["status"] == "completed" and not item["replayed"]]
    assert len(sends) == tries and all("approved by" in s["reason"] for s in sends)


def test_a_database_restart_mid_run_loses_no_job_and_repeats_no_effect(tmp_path: Path) -> None:
    if os.environ.get("DAL_TEST_PG"):
        pytest.skip("restarts only a server the tests started themselves (DAL_TEST_PG names another)")
    server = PgServer.start()
    w = World(tmp_path / "ws", server.new_database())
    try:
        jobs = 6
        for k in range(jobs):
            w.write(f"job{k}.dal", job_script(k))
            assert w.dal("submit", f"job{k}.dal").returncode == 0
        workers = [w.worker("--concurrency", "2", "--lease", "2") for _ in range(2)]
        # Both workers started (a worker that cannot open the store as it starts exits, as it should): the
        # restart is to fall on workers that run.
        w.wait_for(lambda: all("started:" in Path(p.log).read_text(encoding="utf-8") for p in workers), 60,  # type: ignore[attr-defined]
                   "both workers to start")
        w.wait_for(lambda: "→" in w.logs() or "running" in w.states().values(), 60, "the first runs to start")
        time.sleep(0.3)
        server.stop("immediate")  # as a crash of the server would: no checkpoint, connections cut
        time.sleep(2.0)
        server.start_again()
        finish_all(w, range(1, jobs + 1), 180, "after the restart")
        for p in workers:
            p.send_signal(signal.SIGTERM)
        assert [p.wait(60) for p in workers] == [0, 0], w.logs()
        counted(w, range(jobs))
        assert "refused" in w.logs()  # the workers saw the server go, and went on when it came back
        w.check_receipts()
    finally:
        w.stop_all()
        server.close()


def test_four_workers_in_separate_workspaces_drain_the_queue_without_a_duplicate(world: World,
                                                                                 tmp_path: Path) -> None:
    n = int(os.environ.get("DAL_PG_DRAIN_JOBS", "120"))
    world.write("one.dal", 'param n: str\nrun("echo " + n + " >> out.txt")\n')
    keys = [f"drain:{i}" for i in range(n)]
    world.submit_many("one.dal", keys, lambda key: {"n": key.split(":")[1]})
    hosts = []
    for h in range(4):  # four workspaces standing in for four hosts: nothing shared but the database
        home = tmp_path / f"host{h}"
        home.mkdir()
        hosts.append(world.worker("--concurrency", "2", "--lease", "10", "--until-idle", cwd=home))
    assert [p.wait(600) for p in hosts] == [0, 0, 0, 0], world.logs()
    lines = world.lines("out.txt")
    assert len(lines) == n and sorted(lines, key=int) == [str(i) for i in range(n)]  # each exactly once
    assert world.states() and set(world.states().values()) == {"done"}
    with world.store() as s:
        ran = Counter(j["attempts"] for j in s.jobs().list(limit=None))
        by = Counter(w["worker_id"] for w in s.jobs().workers(limit=None) if w["done"])
    assert ran == {1: n}  # no job claimed twice
    assert len(by) >= 2, by  # the work was shared
    assert json.dumps(ran)


def test_an_idle_worker_wakes_on_a_submit_not_at_its_next_poll(world: World) -> None:
    w = world.worker("--poll", "60", "--lease", "10")  # the last --poll wins: it polls once a minute
    log = Path(w.log)  # type: ignore[attr-defined]
    world.wait_for(lambda: "started:" in log.read_text(encoding="utf-8"), 60, "the worker to start")
    time.sleep(1.0)  # past its first look at the queue: now it sleeps in select()
    world.write("now.dal", 'run("echo woke >> out.txt")\n')
    t0 = time.monotonic()
    assert world.dal("submit", "now.dal").returncode == 0
    world.wait_for(lambda: world.lines("out.txt") == ["woke"], 30, "the job to run")
    assert time.monotonic() - t0 < 15  # LISTEN dal_jobs woke it; its poll was 60 s away
    w.send_signal(signal.SIGTERM)
    assert w.wait(30) == 0
