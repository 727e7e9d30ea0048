"""Routing by retry class, end to end: real `dal worker` processes, real SQLite, real bubblewrap.

Every class: none → done; resume (the run's process died) → ready at once, and a crash loop backs off;
replay → scheduled with backoff, dead after max attempts; inspect, repair → parked until
`dal job retry`; escalate (an approval, an uncertain effect) → waiting, woken by `dal approve`,
`dal deny` and `dal resolve`. A worker never decides for a person: a waiting job stays waiting until one
does."""

from __future__ import annotations

import json
import signal
import time

from worker_queue import Queue


def submit(q: Queue, script: str, *flags: str) -> int:
    r = q.cli("submit", script, "--json", *flags)
    assert r.code == 0, r.err
    return json.loads(r.out)["job"]["job_id"]


def test_every_retry_class_routes_its_job(queue: Queue) -> None:
    q = queue
    q.write("ok.dal", 'operation("ok")\nrun("echo ok >> done.txt")\n')
    q.write("replay.dal", 'run("echo try >> replay.txt")\nfail({"retry": "replay", "blocker": "not there yet"})\n')
    q.write("inspect.dal", 'run("cat input.txt")\nfail("the figures look wrong")\n')
    q.write("repair.dal", 'let n = 1\nrun("cat input.txt")\nprint(n + "x")\n')
    q.write("rejected.dal", 'print("fine for now")\n')
    q.write("approve.dal", 'run("echo report | tee -a outbox.txt")\n')
    q.write("deny.dal", 'let r = run("echo spam | tee -a outbox.txt")\nrun("echo " + r.status + " >> denied.txt")\n')
    q.write("own.dal", 'run("cat input.txt")\nfail({"retry": "escalate", "blocker": "a person must look"})\n')
    q.write("append.dal", 'run("echo once >> app.txt")\n')
    q.write("loop.dal", 'run("cat input.txt")\n')
    ok = submit(q, "ok.dal")
    replay = submit(q, "replay.dal", "--key", "replay", "--max-attempts", "3")
    inspect = submit(q, "inspect.dal", "--key", "inspect")
    repair = submit(q, "repair.dal", "--key", "repair")
    rejected = submit(q, "rejected.dal", "--key", "rejected")
    approve = submit(q, "approve.dal", "--key", "send", "--require-approval=tee")
    deny = submit(q, "deny.dal", "--key", "spam", "--require-approval=tee")
    own = submit(q, "own.dal", "--key", "own")
    append = submit(q, "append.dal", "--key", "append", "--queue", "crashy")
    loop = submit(q, "loop.dal", "--key", "loop", "--queue", "loop")
    # Broken after it was submitted: the job runs the text that was checked at submit (docs/workers.md).
    q.write("rejected.dal", 'print("broken" \n')
    assert q.job(ok)["key"] == "ok"  # the script's own literal key

    main = q.worker("--until-idle", "--backoff", "0.05", "--concurrency", "2")
    crashy = q.worker("--until-idle", "--queue", "crashy", DAL_TEST_CRASH_AT="after-exec:1")
    looping = q.worker("--queue", "loop", "--backoff", "60", DAL_TEST_CRASH_AT="before-intent:1")
    assert main.wait(60) == 0 and crashy.wait(60) == 0, q.logs()

    jobs = q.jobs()
    assert jobs[ok]["state"] == "done" and jobs[ok]["last_retry"] == "none"
    assert jobs[replay]["state"] == "dead" and jobs[replay]["failures"] == 3 and jobs[replay]["attempts"] == 3
    assert q.lines("replay.txt") == ["try"]  # each retry replayed the append from the journal
    for job, retry in ((inspect, "inspect"), (repair, "repair")):
        assert jobs[job]["state"] == "parked" and jobs[job]["last_retry"] == retry, jobs[job]
    assert jobs[rejected]["state"] == "done" and f"[job {rejected}] fine for now" in q.logs()
    assert jobs[approve]["state"] == "waiting" and "dal approve" in jobs[approve]["note"]
    assert jobs[deny]["state"] == "waiting"
    assert jobs[own]["state"] == "waiting" and "a person must look" in jobs[own]["note"]
    # Killed after its append ran and before its result was journaled: resumed at once, then held.
    assert jobs[append]["state"] == "waiting" and jobs[append]["attempts"] == 2
    assert "dal resolve" in jobs[append]["note"]
    assert q.lines("outbox.txt") == [] and q.lines("app.txt") == ["once"]

    # A crash loop: three immediate resumes, then backoff.
    q.wait_for(lambda: q.job(loop)["state"] == "scheduled", 30, "the crash loop to back off")
    looping.send_signal(signal.SIGTERM)
    assert looping.wait(30) == 0
    row = q.job(loop)
    assert row["streak"] == 4 and row["attempts"] == 4 and row["run_at"] > time.time() + 10
    assert "4 resumes in a row" in row["note"]

    # Decisions wake what waits for them; parked jobs come back only by an operator's retry.
    r = q.cli("approve", "send")
    assert r.code == 0, r.err
    assert q.job(approve)["state"] == "ready"
    assert q.cli("deny", "spam", "--note", "not ours").code == 0 and q.job(deny)["state"] == "ready"
    r = q.cli("resolve", "append", "--as", "done", "--note", "the line is in app.txt")
    assert r.code == 0, r.err
    assert q.job(append)["state"] == "ready"
    r = q.cli("job", "retry", str(inspect))
    assert r.code == 0 and "ready again" in r.out
    assert q.cli("job", "retry", str(ok)).code == 2  # done is done
    again = q.worker("--until-idle", "--queue", "default", "--queue", "crashy")
    assert again.wait(60) == 0, q.logs()
    jobs = q.jobs()
    assert jobs[approve]["state"] == "done" and jobs[append]["state"] == "done"
    assert jobs[inspect]["state"] == "parked" and jobs[inspect]["attempts"] == 2  # retried, and failed again
    assert jobs[deny]["state"] == "done" and q.lines("denied.txt") == ["denied"]  # the script saw the denial
    assert jobs[own]["state"] == "waiting"  # nobody decided anything about it
    assert q.lines("outbox.txt") == ["report"] and q.lines("app.txt") == ["once"]
    q.check_store()
