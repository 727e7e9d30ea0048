"""kill -9 of workers at random instants with jobs in flight; another worker finishes every job.

Each job appends two lines, copies a file and sends one message (a `tee -a` classed external). A trial
starts a worker, kills it at a random instant (the worker alone, whose children then stop as interrupted;
or the worker and its children at once, as a machine that goes away), a few times over; then a last
worker takes every job over when its lease runs out and finishes it, while the test acts as the person
who resolves effects of unknown outcome (done when the line is there, retry when it is not). Counted at
the end: every line and every send exactly once (0 duplicated, 0 lost), every job done, the store sound.

DAL_WORKER_KILL_TRIALS (default 1) and DAL_WORKER_KILL_SEED make it a longer, bench-like run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

from worker_queue import Queue

JOBS = 6
TRIALS = int(os.environ.get("DAL_WORKER_KILL_TRIALS", "1"))
SEED = int(os.environ.get("DAL_WORKER_KILL_SEED", str(random.randrange(1 << 30))))


def script(k: int) -> str:
    return (f'operation("j{k}")\n'
            'run("cat input.txt")\n'
            f'run("echo {k}-a >> out.txt")\n'
            'run("sleep 0.3")\n'
            f'run("cp input.txt copy-{k}.txt")\n'
            f'run("echo {k}-b >> out.txt")\n'
            f'run("echo {k}-sent | tee -a outbox.txt")\n')


def happened(q: Queue, command: str) -> bool:
    """Whether an effect of unknown outcome took effect, looked up in the world as a person would."""
    if ">> out.txt" in command:
        return command.split()[1] in q.lines("out.txt")
    if "outbox.txt" in command:
        return command.split()[1] in q.lines("outbox.txt")
    return True  # sleep: nothing to redo


def settle_waiting(q: Queue) -> None:
    """The person on call: for each waiting job, say what happened to the effect it waits on."""
    from dal.receipts.store import Store

    for job in q.jobs().values():
        if job["state"] != "waiting":
            continue
        with Store(q.db, readonly=True) as store:
            receipt = store.get_run(job["last_run_id"])
        held = [i for i in receipt["effects"]["items"] if i["status"] in ("uncertain", "pending_approval")]
        assert held, receipt
        h = held[-1]
        outcome = "done" if happened(q, h["command"]) else "retry"
        r = q.cli("resolve", job["key"], "--effect", str(h["seq"]), "--as", outcome, "--note", "looked")
        assert r.code == 0 or "not" in r.err, r


def test_kill_9_of_workers_at_random_instants_loses_and_repeats_nothing(queue: Queue) -> None:
    rng = random.Random(SEED)
    for trial in range(TRIALS):
        q = queue
        if trial:
            for name in ("out.txt", "outbox.txt"):
                (q.ws / name).unlink(missing_ok=True)
        base = trial * JOBS
        for k in range(base, base + JOBS):
            q.write(f"job{k}.dal", script(k))
            r = q.cli("submit", f"job{k}.dal", "--json")
            assert r.code == 0 and json.loads(r.out)["job"]["key"] == f"j{k}", r
        kills = []
        for _ in range(3):
            w = q.worker("--concurrency", "2", "--lease", "1")
            time.sleep(rng.uniform(0.3, 1.6))
            how = rng.choice(("worker", "worker and children"))
            kills.append(how)
            if how == "worker":
                os.kill(w.pid, signal.SIGKILL)
            else:
                os.killpg(w.pid, signal.SIGKILL)
            w.wait(10)
        last = q.started(q.worker("--concurrency", "2", "--lease", "1"))
        end = time.monotonic() + 60
        mine = range(base + 1, base + JOBS + 1)
        while not all(q.job(j)["state"] == "done" for j in mine):
            assert time.monotonic() < end, (f"seed {SEED}, kills {kills}", q.states(), q.logs())
            settle_waiting(q)
            time.sleep(0.1)
        last.send_signal(signal.SIGTERM)
        assert last.wait(30) == 0
        why = f"seed {SEED}, trial {trial}, kills {kills}"
        out, outbox = q.lines("out.txt"), q.lines("outbox.txt")
        want = [f"{k}-{x}" for k in range(base, base + JOBS) for x in ("a", "b")]
        assert sorted(out) == sorted(want), why  # every append once: 0 duplicated, 0 lost
        assert sorted(outbox) == sorted(f"{k}-sent" for k in range(base, base + JOBS)), why
        assert all((q.ws / f"copy-{k}.txt").exists() for k in range(base, base + JOBS))
        receipts = q.check_store()
        assert all(r["status"] != "running" for r in receipts)
