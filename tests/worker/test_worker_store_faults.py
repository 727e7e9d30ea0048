"""A worker whose run store refuses: a lock held past the busy timeout while a job ends, a
store file replaced by a damaged one. The log says so in a line or two, never a traceback, the worker does
not spin, and the job is finished once the store answers, each effect once."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path

import pytest
from worker_queue import Queue

from dal.worker.worker import StoreTrouble


def test_a_store_locked_past_the_busy_timeout_while_a_job_ends_is_one_line_and_the_job_is_finished(
        queue: Queue) -> None:
    q = queue
    q.write("s.dal", 'run("echo a >> count.txt")\nrun("sleep 1")\nrun("echo b >> count.txt")\n')
    assert q.cli("submit", "s.dal", "--key", "k").code == 0
    w = q.worker("--lease", "30", DAL_STORE_TIMEOUT="0.3")
    q.wait_for(lambda: q.lines("count.txt"), 30, "the job to start")
    time.sleep(0.4)  # inside `sleep 1`: the append's result is journaled
    # An operator's sqlite3 shell with a transaction open, for longer than the busy timeout, as the job ends.
    held = sqlite3.connect(q.db, isolation_level=None)
    held.execute("BEGIN EXCLUSIVE")
    time.sleep(2.5)
    held.execute("ROLLBACK")
    held.close()
    q.wait_for(lambda: q.job(1)["state"] == "done", 30, "the job to be done")
    w.terminate()
    assert w.wait(30) == 0
    log = q.logs()
    assert "Traceback" not in log and "internal error" not in log, log
    assert "refused to record where the job goes" in log and "the worker routes it once this process ends" in log
    assert ".;" not in log, log  # one message a line, not two spliced
    assert "could not reach the run store" in log and "the run store is back" in log, log
    assert len(log.splitlines()) < 15, log  # a few lines, not one per try
    assert q.lines("count.txt") == ["a", "b"]  # nothing lost, nothing twice


def test_a_worker_waits_out_a_damaged_store_and_says_so_once_then_that_it_is_back(queue: Queue) -> None:
    q = queue
    q.write("s.dal", 'finish("ok")\n')
    assert q.cli("submit", "s.dal", "--key", "k0").code == 0
    w = q.started(q.worker())  # --poll 0.05: a spin would be thousands of tries
    q.wait_for(lambda: q.job(1)["state"] == "done", 30, "the first job")
    good = q.db.with_name("dal.db.good")
    os.rename(q.db, good)
    q.db.write_bytes(os.urandom(65536))  # a bad restore, a disk error
    time.sleep(3)
    os.replace(good, q.db)
    q.wait_for(lambda: "the run store is back" in q.logs(), 30, "the worker to see the store back")
    assert q.cli("submit", "s.dal", "--key", "k1").code == 0
    q.wait_for(lambda: q.job(2)["state"] == "done", 30, "a job submitted after")
    w.terminate()
    assert w.wait(30) == 0
    log = q.logs()
    assert "Traceback" not in log, log
    assert log.count("the run store refused") == 1, log
    tries = int(re.search(r"the run store is back, after [\d.]+ s refusing \((\d+) tr", log).group(1))
    assert 2 <= tries <= 10, log  # the poll (0.05 s), doubling: about 7 in 3 s


def test_the_refusal_is_said_once_then_reminded_now_and_then_with_a_wait_that_grows_to_its_cap() -> None:
    said: list[str] = []
    now = [1000.0]
    t = StoreTrouble(1.0, said.append, cap=8.0, remind=60.0, clock=lambda: now[0])
    waits = []
    for _ in range(40):
        waits.append(t.failed(OSError("server closed the connection")))
        now[0] += waits[-1]
    assert 0.8 <= waits[0] <= 1.2 and 1.6 <= waits[1] <= 2.4
    assert all(6.4 <= w <= 9.6 for w in waits[4:])  # capped, each 20% either way
    assert said[0].startswith("the run store refused: server closed the connection; trying again in 1 s")
    reminders = said[1:]
    assert 3 <= len(reminders) <= 6 and all("still refuses, since" in r and "(the same error)" in r
                                            for r in reminders)
    t.failed(OSError("no such host"))
    now[0] += 61
    t.failed(OSError("no such host"))
    assert said[-1].endswith(": no such host")
    t.ok()
    assert said[-1].startswith("the run store is back, after ") and "(42 tries)" in said[-1]
    n = len(said)
    t.ok()
    assert len(said) == n  # said once
    t.failed(OSError("again"))
    assert said[-1].startswith("the run store refused: again; trying again in 1 s")



def test_a_bug_in_a_jobs_process_is_one_line_in_the_log_and_its_traceback_in_a_file(tmp_path: Path) -> None:
    from dal.worker.worker import Worker

    said: list[str] = []
    w = Worker(tmp_path / ".dal" / "dal.db", say=said.append)
    try:
        {}["spec"]  # a genuine bug, wherever it is
    except KeyError as e:
        w._internal_error("job 7 (k)", 7, e)
    (line,) = said
    assert "job 7 (k): internal error in DAL (KeyError: 'spec'); please report it, with " in line, line
    (kept,) = (tmp_path / ".dal" / "worker-errors").iterdir()
    assert str(kept) in line and "Traceback" not in line
    text = kept.read_text()
    assert "Traceback (most recent call last)" in text and "KeyError: 'spec'" in text


@pytest.mark.parametrize("kind", ["full", "locked"])
def test_a_store_that_refuses_each_runs_start_sends_the_job_back_with_backoff_never_parked(
        queue: Queue, kind: str) -> None:
    """Every run's first store write refused (a disk full, a lock held past the busy timeout: the fault hook
    of docs/durability.md): the job goes back to the queue after a growing backoff, attempt after attempt,
    not counted as a failure and never parked for a person; once the store takes writes again, the next
    worker finishes it, each effect once."""
    q = queue
    q.write("s.dal", 'operation("k")\nrun("echo a >> out.txt")\nrun("echo b >> out.txt")\n')
    assert q.cli("submit", "s.dal", "--max-attempts", "1").code == 0
    w = q.worker("--backoff", "0.2", DAL_TEST_STORE_FAULT=f"{kind}:1")
    q.wait_for(lambda: q.job(1)["streak"] >= 3, 60, "three refused attempts")
    w.terminate()
    assert w.wait(30) == 0
    job = q.job(1)
    assert job["state"] in ("scheduled", "ready"), job  # not parked, not dead
    assert job["failures"] == 0 and job["streak"] >= 3, job
    assert "the run store refused, so it is tried again in" in job["note"], job["note"]
    log = q.logs()
    assert "→ parked" not in log and "Traceback" not in log, log
    assert log.count("→ scheduled") >= 3, log
    waits = [float(x) for x in re.findall(r"tried again in ([\d.]+) s", log)]
    assert waits[-1] > waits[0], waits  # the backoff grows
    assert q.lines("out.txt") == []  # no effect ran without its intent journaled
    finisher = q.worker("--until-idle")
    assert finisher.wait(60) == 0, q.logs()
    assert q.job(1)["state"] == "done" and q.lines("out.txt") == ["a", "b"]
