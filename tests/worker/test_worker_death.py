"""A worker killed with kill -9 by itself (not its process group: its children live on, unsupervised)
takes its children's runs down with it: each child gets SIGTERM from the kernel (PR_SET_PDEATHSIG, set
as the child starts) and stops its run as interrupted at the next step, with its receipt, and the job
goes back to ready."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from worker_queue import Queue

STEPS = 200  # about 20 s of work: far more than the test waits for the child to stop


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (an orphan's zombie, not yet reaped by whoever adopted it, does not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def test_a_worker_killed_by_itself_stops_the_run_of_its_child(queue: Queue) -> None:
    q = queue
    q.write("long.dal", 'operation("long")\n'
            f'for i in range({STEPS}) {{\n'
            '    run("echo " + str(i) + " >> long.txt")\n'
            '    run("sleep 0.1")\n'
            '}\n')
    assert q.cli("submit", "long.dal").code == 0
    w = q.worker("--lease", "60")  # no fencing in this test: only the kernel's signal stops the child
    q.wait_for(lambda: len(q.lines("long.txt")) >= 2, 30, "the job to start")
    child = json.loads(q.job(1)["holder"])["pid"]  # recorded with the run
    assert child != w.pid and _alive(child)
    os.kill(w.pid, signal.SIGKILL)  # the worker alone
    assert w.wait(10) == -signal.SIGKILL
    q.wait_for(lambda: not _alive(child), 8, "the child to stop once its worker died")
    stopped = len(q.lines("long.txt"))
    time.sleep(0.5)
    assert len(q.lines("long.txt")) == stopped < STEPS  # nothing ran after it stopped
    statuses = [r["status"] for r in q.check_store()]
    assert statuses == ["interrupted"], statuses  # stopped by the signal at a step, its receipt written
    job = q.job(1)  # the child routed it on its way out (its lease still held): ready for the next worker
    assert (job["state"], job["last_status"], job["last_retry"]) == ("ready", "interrupted", "resume")
