"""SIGTERM drains a worker: no new claims, its running jobs stop as resumable and go back to ready, it
exits 0 once its children are gone; another worker then finishes them, each effect once."""

from __future__ import annotations

import signal
import time

import pytest
from worker_queue import Queue


def script(name: str) -> str:
    return (f'operation("{name}")\n'
            'for i in range(10) {\n'
            f'    run("echo " + str(i) + " >> {name}.txt")\n'
            '    run("sleep 0.2")\n'
            '}\n')


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])  # systemd; a closed terminal
def test_sigterm_drains_the_worker_and_another_finishes_its_jobs(queue: Queue, sig: int) -> None:
    q = queue
    for name in ("left", "right", "later"):
        q.write(f"{name}.dal", script(name))
        assert q.cli("submit", f"{name}.dal").code == 0
    w = q.worker("--concurrency", "2", "--lease", "5")
    q.wait_for(lambda: q.lines("left.txt") and q.lines("right.txt"), 30, "both jobs to start")
    t0 = time.monotonic()
    w.send_signal(sig)  # the worker alone: it tells its children
    assert w.wait(30) == 0, q.logs()
    assert time.monotonic() - t0 < 5  # the command under way finished, the runs stopped at their next step
    jobs = q.jobs()
    assert [jobs[i]["state"] for i in (1, 2, 3)] == ["ready", "ready", "ready"], q.logs()
    for i in (1, 2):
        assert jobs[i]["last_status"] == "interrupted" and jobs[i]["last_retry"] == "resume"
        assert jobs[i]["attempts"] == 1 and jobs[i]["streak"] == 0 and jobs[i]["lease_owner"] is None
    assert jobs[3]["attempts"] == 0  # never claimed while draining
    done_before = len(q.lines("left.txt"))
    assert 0 < done_before < 10
    finisher = q.worker("--until-idle", "--concurrency", "3")
    assert finisher.wait(60) == 0, q.logs()
    assert all(j["state"] == "done" for j in q.jobs().values())
    for name in ("left", "right", "later"):
        assert q.lines(f"{name}.txt") == [str(i) for i in range(10)], name
    statuses = [r["status"] for r in q.check_store()]
    assert statuses.count("interrupted") == 2 and statuses.count("completed") == 3


def test_cancelling_a_running_job_stops_its_run_and_keeps_the_operations_journal(queue: Queue) -> None:
    q = queue
    q.write("left.dal", script("left"))
    assert q.cli("submit", "left.dal").code == 0
    w = q.worker("--lease", "1")
    q.wait_for(lambda: len(q.lines("left.txt")) >= 2, 30, "the job to start")
    r = q.cli("job", "cancel", "1", "--note", "wrong day")
    assert r.code == 0 and "its run stops at its next effect" in r.out
    q.wait_for(lambda: "no longer this worker's" in q.logs(), 30, "the run to stop")
    stopped = len(q.lines("left.txt"))
    time.sleep(0.5)
    assert len(q.lines("left.txt")) == stopped < 10  # nothing ran after the cancel took hold
    assert q.job(1)["state"] == "cancelled" and q.job(1)["note"] == "wrong day"
    # The operation is not over: a new job of the key continues its journal, and nothing runs twice.
    again = q.cli("submit", "left.dal")
    assert again.code == 0 and "submitted job 2" in again.out
    q.wait_for(lambda: q.job(2)["state"] == "done", 60, "the new job to finish")
    w.send_signal(signal.SIGTERM)
    assert w.wait(30) == 0
    assert q.lines("left.txt") == [str(i) for i in range(10)]
