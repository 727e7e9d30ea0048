"""A worker paused past its lease (SIGSTOP) cannot journal a new effect once another worker took the job
over; when it is still paused one lease later, the worker that took over kills it. Either way every
append happens exactly once."""

from __future__ import annotations

import json
import os
import signal

from worker_queue import Queue

SCRIPT = """operation("slow")
for i in range(8) {
    run("echo " + str(i) + " >> out.txt")
    run("sleep 0.25")
}
"""


def runs_of(q: Queue) -> list[dict]:
    from dal.receipts.store import Store

    with Store(q.db, readonly=True) as store:
        return list(reversed(store.list_runs(key="slow", limit=None)))


def intents(q: Queue, run_id: str) -> list[int]:
    from dal.receipts.store import Store

    with Store(q.db, readonly=True) as store:
        return [e["seq"] for e in store.journal(run_id) if e["seq"] > 0]


def pause_mid_run(q: Queue) -> tuple[int, dict, str, list[int]]:
    """A worker runs the job; it is paused (parent and child) while the child sleeps between appends.
    Returns the worker's pid, the job as it was then, the paused run's id and its journaled effects."""
    q.write("slow.dal", SCRIPT)
    assert q.cli("submit", "slow.dal").code == 0
    a = q.worker("--lease", "1", "--concurrency", "1")
    q.wait_for(lambda: len(q.lines("out.txt")) >= 2, 30, "two appends")
    import time

    time.sleep(0.08)  # inside the sleep that follows: not inside a store transaction
    os.killpg(a.pid, signal.SIGSTOP)
    job = q.job(1)
    run_id = runs_of(q)[-1]["run_id"]
    return a.pid, job, run_id, intents(q, run_id)


def test_a_paused_worker_cannot_journal_a_new_effect_after_a_takeover(queue: Queue) -> None:
    q = queue
    a_pid, job, paused_run, journaled = pause_mid_run(q)
    child = json.loads(job["holder"])["pid"]
    b = q.worker("--lease", "1", "--concurrency", "1")
    q.wait_for(lambda: q.job(1)["lease_epoch"] == job["lease_epoch"] + 1, 30, "the takeover")
    # The paused child goes on alone (its parent stays stopped, so no heartbeat can tell it anything): its
    # next journal write is fenced, it stops as interrupted and lets go of the key.
    os.kill(child, signal.SIGCONT)
    q.wait_for(lambda: (r := [x for x in runs_of(q) if x["run_id"] == paused_run]) and r[0]["status"] != "running",
               30, "the paused run to stop")
    os.kill(a_pid, signal.SIGCONT)
    q.wait_for(lambda: q.job(1)["state"] == "done", 60, "the job to complete")
    b.send_signal(signal.SIGTERM)
    assert b.wait(30) == 0
    from dal.receipts.store import Store

    with Store(q.db, readonly=True) as store:
        stopped = store.get_run(paused_run)
    assert stopped["status"] == "interrupted" and stopped["error"]["kind"] == "store"
    assert "taken over" in stopped["error"]["message"] and "did not run" in stopped["error"]["message"]
    assert intents(q, paused_run) == journaled  # not one new intent after the takeover
    assert q.lines("out.txt") == [str(i) for i in range(8)]  # each append once
    assert "lost its lease" in q.logs() or "no longer this worker's" in q.logs()
    q.check_store()


def test_a_worker_still_paused_one_lease_later_is_killed_by_the_one_that_took_over(queue: Queue) -> None:
    q = queue
    _, job, paused_run, _ = pause_mid_run(q)
    b = q.worker("--lease", "1", "--concurrency", "1")
    q.wait_for(lambda: q.job(1)["state"] == "done", 60, "the job to complete")
    b.send_signal(signal.SIGTERM)
    assert b.wait(30) == 0
    assert "killing it" in q.logs()
    assert q.lines("out.txt") == [str(i) for i in range(8)]
    kinds = [r["status"] for r in runs_of(q)]
    assert kinds[-1] == "completed" and paused_run in [r["run_id"] for r in runs_of(q)]
    q.check_store()
