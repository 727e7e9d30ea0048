"""What a job's waiting run says to do next: a worker continues it, so neither the worker's note, `dal job
show`, `dal receipt show` nor `dal approve` sends the person to `dal resume RUN`, and the script is named as
it was submitted, never as the kept copy of its text (.dal/scripts/sha256-....dal) the worker runs."""

from __future__ import annotations

from worker_queue import Queue


def test_a_waiting_jobs_next_step_is_the_decision_and_a_worker_continues_it(queue: Queue) -> None:
    q = queue
    q.write("send.dal", 'run("echo draft >> log.txt")\nrun("echo sent | tee -a outbox.txt")\n')
    assert q.cli("submit", "--key", "send", "--require-approval=tee", "--receipts", "out",
                 str(q.ws / "send.dal")).code == 0
    assert q.run("worker", "--until-idle", "--poll", "0.05").code == 0
    (job,) = q.jobs().values()
    rid, jid = job["last_run_id"], job["job_id"]
    assert job["state"] == "waiting"
    told = {"note": job["note"], "job show": q.cli("job", "show", str(jid)).out,
            "receipt show": q.cli("receipt", "show", rid).out,
            "receipt file": (q.ws / "out" / f"{rid}.md").read_text(encoding="utf-8")}
    for where, text in told.items():
        assert f"dal approve {rid} --effect 2" in text, (where, text)
        assert "dal resume" not in text and f"job {jid} ready again" in text, (where, text)
    approved = q.cli("approve", rid)
    assert approved.code == 0, approved.err
    said = approved.out + approved.err
    assert "dal resume" not in said and f"applies when job {jid} next reaches effect 2" in said, said
    assert "(send.dal)" in said and ".dal/scripts" not in said, said
    shown = q.cli("receipt", "show", rid, "--json").out
    assert '"send.dal"' in shown and "sha256-" not in shown.split('"rerun"', 1)[1].split("]", 1)[0], shown
    assert q.run("worker", "--until-idle", "--poll", "0.05").code == 0
    assert q.lines("outbox.txt") == ["sent"] and q.jobs()[jid]["state"] == "done"


def test_a_damaged_job_specification_parks_the_job_saying_what_is_wrong(queue: Queue) -> None:
    """One SpecError for a specification DAL cannot run, the runner's (the worker had a second one)."""
    import sqlite3

    from dal.runner.spec import SpecError
    from dal.worker.spec import check_spec

    q = queue
    q.write("s.dal", 'run("echo hi >> log.txt")\n')
    assert q.cli("submit", "--key", "s", "s.dal").code == 0
    with sqlite3.connect(q.db) as c:
        c.execute("UPDATE jobs SET spec = ?", ('{"script": 7}',))
    assert q.run("worker", "--until-idle", "--poll", "0.05").code == 0
    (job,) = q.jobs().values()
    assert job["state"] == "parked" and "the job's run specification" in job["note"], job["note"]
    assert not (q.ws / "log.txt").exists()
    try:
        check_spec({"script": 7})
    except SpecError as e:
        assert str(e).startswith("the job's run specification: ")
    else:
        raise AssertionError("a damaged specification was taken")
