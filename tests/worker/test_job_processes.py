"""A worker's job processes (dal/worker/pool.py, jobproc.py): each runs many jobs, one at a time, and is
replaced after --recycle-after jobs or once its memory passed --recycle-memory; a job process killed with
kill -9 mid-job takes only its job with it, which the worker routes, and a new process finishes it from
its journal with no effect made twice."""

from __future__ import annotations

import json
import os
import signal
import time

from worker_queue import Queue


def pids_of_runs(q: Queue) -> list[int]:
    """The process of each run, oldest first."""
    from dal.receipts.store import Store

    with Store(q.db, readonly=True) as store:
        return [store.run_row(r["run_id"])["pid"] for r in reversed(store.list_runs(limit=None))]


def test_a_job_process_runs_many_jobs_and_is_replaced_after_n_of_them_or_past_its_memory(queue: Queue) -> None:
    q = queue
    q.write("s.dal", 'run("echo x >> out.txt")\n')
    for i in range(5):
        assert q.cli("submit", "s.dal", "--key", f"k{i}").code == 0
    w = q.worker("--until-idle", "--concurrency", "1", "--recycle-after", "2")
    assert w.wait(60) == 0, q.logs()
    pids = pids_of_runs(q)
    assert len(pids) == 5 and w.pid not in pids
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4], pids  # two jobs each, one after the other
    assert q.logs().count("ends (recycled after 2 jobs)") == 2, q.logs()
    assert q.lines("out.txt") == ["x"] * 5
    for i in range(5, 7):
        assert q.cli("submit", "s.dal", "--key", f"k{i}").code == 0
    w = q.worker("--until-idle", "--concurrency", "1", "--recycle-memory", "16M")  # less than any job process has
    assert w.wait(60) == 0, q.logs()
    later = pids_of_runs(q)[5:]
    assert len(set(later)) == 2 and not set(later) & set(pids), later
    assert "ends (recycled: its resident memory is " in q.logs()


def test_a_job_process_killed_mid_job_is_replaced_and_its_job_finished_from_the_journal(queue: Queue) -> None:
    q = queue
    q.write("long.dal", 'operation("long")\nrun("echo a >> out.txt")\nrun("sleep 1")\nrun("echo b >> out.txt")\n')
    q.write("short.dal", 'operation("short")\nrun("echo c >> other.txt")\n')
    assert q.cli("submit", "long.dal").code == 0
    w = q.worker("--concurrency", "1", "--lease", "30")
    q.wait_for(lambda: q.lines("out.txt") == ["a"], 30, "the first append")
    time.sleep(0.2)  # inside `sleep 1`: the append's result is journaled
    victim = json.loads(q.job(1)["holder"])["pid"]
    assert victim != w.pid
    os.kill(victim, signal.SIGKILL)  # the job's process alone, as the OOM killer would
    assert q.cli("submit", "short.dal").code == 0
    q.wait_for(lambda: {j["state"] for j in q.jobs().values()} == {"done"}, 60, "both jobs to be done")
    assert w.poll() is None  # the worker lived through it
    w.send_signal(signal.SIGTERM)
    assert w.wait(30) == 0
    assert "job 1 (long): the process running it was killed by SIGKILL → ready" in q.logs(), q.logs()
    assert q.lines("out.txt") == ["a", "b"] and q.lines("other.txt") == ["c"]  # nothing twice, nothing lost
    receipts = q.check_store()
    first, again = [r for r in receipts if r["key"] == "long"]
    assert first["status"] == "interrupted" and again["status"] == "completed"
    assert again["previous_run"] == first["run_id"]
    append, slept, last = again["effects"]["items"]
    assert append["replayed"] is True and not last.get("replayed")  # the append before the kill: from the journal
    pids = pids_of_runs(q)
    assert pids[0] == victim and victim not in pids[1:]  # a new process took the job (and the next one)


def test_reaping_job_processes_leaves_the_worker_s_other_children_alone(tmp_path) -> None:
    # The worker waits for its job processes by pid: a child something else in the worker's process
    # started (a probe, a library's subprocess) keeps its exit status for whoever waits for it.
    import os
    import subprocess
    import time

    from dal.worker.pool import JobProcess
    from dal.worker.worker import Worker

    w = Worker(tmp_path / ".dal" / "dal.db", say=lambda _line: None)
    other = subprocess.Popen(["sh", "-c", "exit 7"])
    a, b = __import__("socket").socketpair()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    w.procs[pid] = JobProcess(pid, a)
    deadline = time.monotonic() + 10
    while w.procs and time.monotonic() < deadline:
        w._reap()
        time.sleep(0.01)
    b.close()
    assert not w.procs  # the job process was reaped ...
    assert other.wait(timeout=10) == 7  # ... and the other child's status was not taken
