"""`dal submit` and the inspection commands: a key with an open job returns it, a completed key records
nothing, the key a script names for itself, bad input refused with nothing recorded; `dal jobs`,
`dal job show|retry|cancel`, `dal workers`."""

from __future__ import annotations

import json
import time

from worker_queue import Queue


def count_jobs(q: Queue) -> int:
    return len(q.jobs()) if q.db.exists() else 0


def test_a_key_with_an_open_job_returns_that_job(queue: Queue) -> None:
    q = queue
    q.write("s.dal", 'run("echo hi >> out.txt")\n')
    first = q.cli("submit", "s.dal", "--key", "report:q3")
    assert first.code == 0 and "submitted job 1 (key report:q3, queue default, ready)" in first.out
    again = q.cli("submit", "s.dal", "--key", "report:q3", "--queue", "other", "--json")
    assert again.code == 0
    got = json.loads(again.out)
    assert got["job"]["job_id"] == 1 and got["job"]["queue"] == "default"
    assert "already has job 1 (ready): nothing submitted" in got["message"]
    assert count_jobs(q) == 1
    # Without a key every submit is a job of its own.
    assert q.cli("submit", "s.dal").code == 0 and q.cli("submit", "s.dal").code == 0
    keys = sorted(j["key"] for j in q.jobs().values())
    assert keys == ["job:2", "job:3", "report:q3"]


def test_a_completed_key_records_nothing_unless_new_attempt(queue: Queue) -> None:
    q = queue
    q.write("s.dal", 'operation("daily")\nrun("echo ran >> out.txt")\n')
    r = q.run("run", "s.dal")  # completed by hand, outside the queue
    assert r.code == 0, r.err
    said = q.cli("submit", "s.dal")
    assert said.code == 0 and "operation 'daily' already completed in run run_" in said.out
    assert "nothing submitted" in said.out and count_jobs(q) == 0
    fresh = q.cli("submit", "s.dal", "--new-attempt", "--json")
    assert fresh.code == 0 and json.loads(fresh.out)["job"]["spec"]["new_attempt"] is True
    w = q.worker("--until-idle")
    assert w.wait(60) == 0, q.logs()
    assert q.job(1)["state"] == "done" and q.lines("out.txt") == ["ran", "ran"]  # started over: ran again
    assert "already completed" in q.cli("submit", "s.dal").out and count_jobs(q) == 1


def test_the_scripts_own_key_and_bad_input(queue: Queue) -> None:
    q = queue
    q.write("own.dal", 'operation("publish:2026-09-02")\nrun("cat input.txt")\n')
    r = q.cli("submit", "own.dal", "--json")
    assert r.code == 0 and json.loads(r.out)["job"]["key"] == "publish:2026-09-02"
    clash = q.cli("submit", "own.dal", "--key", "other")
    assert clash.code == 2 and "differs from the script's own" in clash.err
    q.write("computed.dal", 'operation("day:" + str(now()))\nrun("cat input.txt")\n')
    computed = q.cli("submit", "computed.dal")
    assert computed.code == 2 and "pass --key KEY" in computed.err
    assert q.cli("submit", "computed.dal", "--key", "day:1").code == 0
    q.write("broken.dal", 'run("cat input.txt"\n')
    broken = q.cli("submit", "broken.dal", "--key", "b")
    assert broken.code == 2 and "broken.dal:" in broken.err and "^" in broken.err and "nothing submitted" in broken.err
    missing = q.cli("submit", "nope.dal")
    assert missing.code == 2 and "no such script: nope.dal" in missing.err
    bad_flag = q.cli("submit", "own.dal", "--in", "soon")
    assert bad_flag.code == 2 and "expected a duration" in bad_flag.err
    bad_policy = q.cli("submit", "own.dal", "--policy", "nope.toml")
    assert bad_policy.code == 2 and "nope.toml" in bad_policy.err
    assert sorted(j["key"] for j in q.jobs().values()) == ["day:1", "publish:2026-09-02"]


def test_jobs_job_show_retry_cancel_and_workers(queue: Queue) -> None:
    q = queue
    assert q.cli("jobs").out == "no jobs yet\n" and not q.db.exists()  # read-only: creates nothing
    assert q.cli("workers").out == "no workers yet\n"
    q.write("s.dal", 'run("cat input.txt")\n')
    later = q.cli("submit", "s.dal", "--key", "later", "--in", "1h", "--priority", "3")
    assert later.code == 0 and "scheduled for" in later.out
    assert q.cli("submit", "s.dal", "--key", "now").code == 0
    listing = q.cli("jobs")
    assert listing.code == 0 and listing.out.splitlines()[0].split()[:4] == ["JOB", "STATE", "QUEUE", "KEY"]
    assert "scheduled" in listing.out and "in 60 min" in listing.out
    assert [j["key"] for j in json.loads(q.cli("jobs", "--state", "ready", "--json").out)["jobs"]] == ["now"]
    show = q.cli("job", "show", "1")
    assert show.code == 0 and show.out.startswith("scheduled  job 1  key later") and "next: runs at" in show.out
    spec = json.loads(q.cli("job", "show", "1", "--json").out)["job"]["spec"]
    assert spec["filename"] == "s.dal" and "/.dal/scripts/sha256-" in spec["script"]  # the text checked at submit
    assert q.cli("job", "show", "9").code == 2  # unknown: a usage error (docs/cli.md)
    cancel = q.cli("job", "cancel", "1", "--note", "not needed")
    assert cancel.code == 0 and "is cancelled" in cancel.out and q.job(1)["note"] == "not needed"
    again = q.cli("job", "cancel", "1")
    assert again.code == 2 and "a cancelled job cannot cancel" in again.err
    retried = q.cli("job", "retry", "1")
    assert retried.code == 0 and q.job(1)["state"] == "ready" and q.job(1)["run_at"] <= time.time()
    assert q.cli("job", "retry", "2").code == 2  # a ready job has nothing to retry
    w = q.worker("--until-idle")
    assert w.wait(60) == 0
    workers = json.loads(q.cli("workers", "--json").out)["workers"]
    assert len(workers) == 1 and workers[0]["state"] == "stopped" and workers[0]["done"] == 2
    assert "stopped" in q.cli("workers").out
    assert q.cli("job", "show", "2").out.rstrip().endswith("next: nothing to do")


def test_a_keyless_submit_says_a_second_one_is_a_second_job(queue: Queue) -> None:
    q = queue
    q.write("s.dal", 'run("cat input.txt")\n')
    first, second = q.cli("submit", "s.dal"), q.cli("submit", "s.dal")
    assert "submitted job 1 (key job:1" in first.out and "submitted job 2 (key job:2" in second.out
    assert "without --key" in first.out and "the same script submitted again runs again" in first.out
    keyed = q.cli("submit", "s.dal", "--key", "k")
    assert keyed.code == 0 and "without --key" not in keyed.out
    q.write("own.dal", 'operation("own")\nrun("cat input.txt")\n')
    assert "without --key" not in q.cli("submit", "own.dal").out  # the script names its key


def test_a_key_with_terminal_controls_is_shown_escaped_by_submit_jobs_and_job_show(queue: Queue) -> None:
    q = queue
    q.write("s.dal", 'operation("k\\u001b[2J\\u0007\\u202eX\\u200b")\nprint("hi")\n')
    shown = r"k\x1b[2J\x07\u202eX\u200b"
    said = [q.cli("submit", "s.dal"), q.cli("jobs"), q.cli("job", "show", "1")]
    assert [r.code for r in said] == [0, 0, 0]
    for r in said:
        assert not [c for c in ("\x1b", "\x07", "\u202e", "\u200b") if c in r.out + r.err], r.out
        assert shown in r.out, r.out
    assert q.jobs()[1]["key"] == "k\x1b[2J\x07\u202eX\u200b"  # stored as the script said it
