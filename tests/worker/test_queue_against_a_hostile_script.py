"""A hostile script against the queue, executed: each test runs the attack with real workers,
real SQLite and the real wall, next to its canaries, and asserts what an operator would notice."""

from __future__ import annotations

import json
import os
import signal

from worker_queue import Queue


def submit(q: Queue, script: str, *flags: str) -> int:
    r = q.cli("submit", script, "--json", *flags)
    assert r.code == 0, r.err
    return json.loads(r.out)["job"]["job_id"]


def test_a_script_cannot_squat_the_keys_dal_gives_jobs_and_slots(queue: Queue) -> None:
    """04: job:N and schedule:NAME:<slot> are DAL's; a script's operation() may not name them."""
    q = queue
    q.write("real.dal", 'run("printf real >> report.txt")\n')
    q.write("squat.dal", 'operation("job:3")\nprint("squatter ran")\n')
    r = q.cli("submit", "squat.dal")
    assert r.code == 2 and "error[runtime]" in r.err and "squat.dal:1:11" in r.err and "^^^^^^^" in r.err
    assert "'job:' which DAL keeps" in r.err.replace(",", "") and "nothing submitted" in r.err
    assert not q.db.exists() or q.jobs() == {}
    q.write("squat2.dal", 'operation("schedule:nightly:2026-12-01T12:30:00Z")\nprint("squatter")\n')
    r = q.cli("submit", "squat2.dal", "--in", "1d")
    assert r.code == 2 and "squat2.dal:1:11" in r.err
    # The operator cannot collide with DAL's keys by accident either.
    r = q.cli("submit", "real.dal", "--key", "job:2")
    assert r.code == 2 and "--key" in r.err
    # Run directly (not through the queue), the builtin refuses the same key where it is called.
    r = q.run("run", "squat.dal")
    assert r.code != 0 and "squat.dal:1:1" in r.err and "'job:'" in r.err and "squatter ran" not in r.out
    # The operator's keyless jobs 1..3 all run.
    for _ in range(3):
        submit(q, "real.dal")
    assert q.worker("--until-idle").wait(60) == 0, q.logs()
    assert q.lines("report.txt") == ["realrealreal"]
    assert {j["key"]: j["state"] for j in q.jobs().values()} == {"job:1": "done", "job:2": "done", "job:3": "done"}


def test_a_surrogate_key_is_the_scripts_error_not_a_damaged_store(queue: Queue) -> None:
    """06: the literal key is checked like the builtin checks it; nothing says the store is damaged."""
    q = queue
    q.write("s.dal", 'operation("k\\ud800")\nrun("printf ok >> done.txt")\n')
    r = q.cli("submit", "s.dal")
    assert r.code == 2 and "s.dal:1:11" in r.err and "lone surrogate" in r.err
    assert "damaged" not in r.err and "rm -f" not in r.err
    r = q.cli("submit", "s.dal", "--key", "k\udcff")  # what argv makes of a byte that is not UTF-8
    assert r.code == 2 and "lone surrogate" in r.err and "damaged" not in r.err
    assert q.lines("done.txt") == []


def test_a_store_refusing_a_surrogate_value_is_not_called_damaged(tmp_path) -> None:  # noqa: ANN001
    import sqlite3

    from dal.receipts.store import StoreDamaged, describe_error

    try:
        sqlite3.connect(":memory:").execute("SELECT ?", ("k\ud800",))
    except UnicodeEncodeError as e:
        err = describe_error(e, tmp_path / "dal.db", "looking up the job of 'k'")
    assert not isinstance(err, StoreDamaged) and "damaged" not in str(err) and "lone surrogate" in str(err)


def test_a_script_asking_for_resume_cannot_escape_max_attempts(queue: Queue) -> None:
    """08: fail({"retry": "resume"}) is a failed attempt like a replay: dead after --max-attempts."""
    q = queue
    q.write("s.dal", 'run("printf x >> attempts.txt")\nfail({"blocker": "flaky", "retry": "resume"})\n')
    job = submit(q, "s.dal", "--key", "res", "--max-attempts", "2")
    assert q.worker("--until-idle", "--backoff", "0.05").wait(60) == 0, q.logs()
    row = q.job(job)
    assert row["state"] == "dead" and row["failures"] == 2 and row["attempts"] == 2, row
    assert "retry resume: 2 of 2 attempts failed" in row["note"]
    assert q.lines("attempts.txt") == ["x"]  # the retry replayed the append from the journal


EVIL = 'let t = env("API_TOKEN")\nrun("id")\nrun("printf %s " + t + " > stolen.txt")\nprint("A-code ran")\n'


def test_a_job_a_slot_and_a_resume_run_the_text_that_was_checked(queue: Queue) -> None:
    """03: another (narrower) script rewrites a job's script file; the job, every slot of a schedule and a
    resume of a waiting run still run the text checked at submit, under their wider policy: the
    rewritten code never runs with it."""
    q = queue
    q.write("b.dal", 'let r = run("id -u")\nprint("B: uid", trim(r.stdout))\n')
    q.write("evil.txt", EVIL)
    q.write("a.dal", 'run("cp evil.txt b.dal")\n')  # untrusted, default policy: it may write workspace files
    wide = ("--allow-run=id", "--allow-env=API_TOKEN")
    r = q.cli("schedule", "add", "tick", "--cron", "* * * * * *", "b.dal", *wide)
    assert r.code == 0, r.err
    assert q.cli("schedule", "pause", "tick").code == 0
    a = submit(q, "a.dal", "--key", "job-a", "--priority", "10")
    b = submit(q, "b.dal", "--key", "job-b", *wide)
    assert q.worker("--until-idle", "--concurrency", "1", API_TOKEN="s3cr3t-token").wait(60) == 0, q.logs()
    assert (q.ws / "b.dal").read_text(encoding="utf-8") == EVIL  # the attack did rewrite the file
    assert q.states() == {a: "done", b: "done"}
    assert f"[job {b}] B: uid {os.getuid()}" in q.logs()
    # The schedule was added before the rewrite: its slots run the text it was added with.
    assert q.cli("schedule", "resume", "tick").code == 0
    w = q.worker(API_TOKEN="s3cr3t-token")
    q.wait_for(lambda: any(j["schedule"] == "tick" and j["state"] == "done" for j in q.jobs().values()), 30,
               "a slot to run")
    assert q.cli("schedule", "pause", "tick").code == 0
    w.send_signal(signal.SIGTERM)
    assert w.wait(30) == 0
    assert "A-code ran" not in q.logs() and not (q.ws / "stolen.txt").exists()
    slot = next(j for j in q.jobs().values() if j["schedule"] == "tick")
    receipt = json.loads(q.run("receipt", "show", slot["last_run_id"], "--json").out)
    assert [e["command"] for e in receipt["effects"]["items"]] == ["id -u"]
    assert receipt["script"]["path"] == "b.dal"  # named as the operator gave it

    # A kept copy that does not have its digest any more is refused before anything runs.
    q.write("c.dal", 'run("printf c >> c.txt")\n')
    c = submit(q, "c.dal", "--key", "job-c")
    kept = json.loads(q.job(c)["spec"])["script"]
    assert "/.dal/scripts/sha256-" in kept
    with open(kept, "w", encoding="utf-8") as f:
        f.write('run("printf tampered >> c.txt")\n')
    assert q.worker("--until-idle").wait(60) == 0, q.logs()
    row = q.job(c)
    assert row["state"] == "parked" and "c.dal changed since it was submitted" in row["note"], row
    assert q.lines("c.txt") == []


def test_dal_resume_refuses_a_script_rewritten_while_the_run_waited(queue: Queue) -> None:
    """03 b: a waiting run's script, rewritten by a default-policy script, is not resumed under the run's
    policy; put back, it resumes."""
    q = queue
    good = 'run("printf a >> log.txt")\nrun("echo report | tee -a outbox.txt")\n'
    q.write("send.dal", good)
    r = q.run("run", "--key", "send", "--require-approval=tee", "--allow-run=id", "send.dal")
    assert r.code == 3, r.err
    q.write("evil.txt", good + 'let u = run("id")\nrun("printf %s \\"" + trim(u.stdout) + "\\" > pwned.txt")\n')
    q.write("other.dal", 'run("cp evil.txt send.dal")\n')
    assert q.run("run", "other.dal").code == 0
    assert q.cli("approve", "send").code == 0
    r = q.run("resume", "send")
    assert r.code != 0 and "send.dal changed since run run_" in r.err and "nothing ran" in r.err, r.err
    assert not (q.ws / "pwned.txt").exists() and q.lines("outbox.txt") == []
    q.write("send.dal", good)
    r = q.run("resume", "send")
    assert r.code == 0, r.err
    assert q.lines("outbox.txt") == ["report"] and q.lines("log.txt") == ["a"] and not (q.ws / "pwned.txt").exists()


def test_a_closed_stdout_loses_output_not_the_run(queue: Queue) -> None:
    """10: a worker whose stdout nobody reads any more (a log pipe that went away) drops the output; every
    job still runs to the end and its receipt says what was dropped. (`dal run | head` is the CLI's: it
    stops as SIGPIPE, tests/cli.)"""
    import subprocess
    import sys

    q = queue
    q.write("j.dal", 'run("printf a >> c.txt")\nprint("report sent")\nrun("printf b >> c.txt")\n')
    ja, jb = submit(q, "j.dal", "--key", "a"), submit(q, "j.dal", "--key", "b")
    p = subprocess.Popen([sys.executable, "-m", "dal", "worker", "--until-idle", "--poll", "0.05"], cwd=q.ws,
                         env=q.env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None
    p.stdout.close()  # nobody reads the worker's stdout any more
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert q.states() == {ja: "done", jb: "done"}, err
    assert sorted(q.lines("c.txt")[0]) == ["a", "a", "b", "b"]
    assert "internal" not in err and "characters were dropped" in err
    receipt = json.loads(q.run("receipt", "show", "a", "--json").out)
    assert receipt["status"] == "completed" and "characters were dropped" in receipt["output"]["undelivered"]


def test_worker_log_lines_and_next_steps_say_the_truth(queue: Queue) -> None:
    """07 d, e: a blocker cannot forge a line of the worker's log; the next: line names no flag the
    operator did not give (the worker's own --store and --wait)."""
    q = queue
    forged = "dal worker w_vm_1_a1b2c3: job 9 (payroll:2026-12): run run_20261201T090000000Z_000000 completed → done"
    q.write("s.dal", 'fail({"blocker": "disk ok\\n' + forged + '\\u001b[2K", "retry": "inspect"})\n')
    q.write("d.dal", 'let k = "B" + ""\noperation(k)\n')
    submit(q, "s.dal", "--key", "innocent")
    d = submit(q, "d.dal", "--key", "A")
    assert q.worker("--until-idle").wait(60) == 0, q.logs()
    lines = q.logs().splitlines()
    assert not any(line.startswith("dal worker w_vm_1_a1b2c3") for line in lines)
    assert any("disk ok\\ndal worker w_vm_1_a1b2c3" in line and "\\x1b[2K" in line for line in lines)
    note = q.job(d)["note"]
    assert "`dal run --key A d.dal`" in note and "--store" not in note and "--wait" not in note, note


def test_submit_in_inf_or_nan_is_a_usage_error(queue: Queue) -> None:
    """07 f: `--in inf`/`nan` is refused before anything is recorded (it was a traceback, then a traceback
    in every `dal job show` of the job)."""
    q = queue
    q.write("s.dal", "print(1)\n")
    for bad in ("inf", "nan", "1e400", "-inf"):
        r = q.cli("submit", "s.dal", "--key", "x", "--in", bad)
        assert r.code == 2 and "--in" in r.err and "Traceback" not in r.err, (bad, r.err)
    assert not q.db.exists() or q.jobs() == {}


def test_a_worker_whose_clock_is_ahead_does_not_take_over_a_live_job(queue: Queue, tmp_path) -> None:  # noqa: ANN001
    """09: worker B's wall clock is 100 s ahead (a clock step, a VM restored): A's job, renewed all along,
    is not taken over, nothing is killed, every effect runs once, the job is done."""
    import time

    q = queue
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import time\n_t = time.time\ntime.time = lambda: _t() + 100\n", encoding="utf-8")
    q.write("s.dal", 'run("printf a >> c.txt")\nrun("printf b >> c.txt; sleep 5")\nrun("printf c >> c.txt")\n')
    job = submit(q, "s.dal", "--key", "clk")
    a = q.started(q.worker("--lease", "2"))
    q.wait_for(lambda: q.lines("c.txt") == ["ab"], 30, "A to be inside its second effect")
    b = q.started(q.worker("--lease", "2", PYTHONPATH=f"{site}:{q.env()['PYTHONPATH']}"))
    q.wait_for(lambda: q.job(job)["state"] == "done", 30, "the job to finish")
    time.sleep(0.5)
    for w in (a, b):
        w.send_signal(signal.SIGTERM)
        assert w.wait(30) == 0
    row = q.job(job)
    assert row["attempts"] == 1 and row["lease_epoch"] == 1, row
    assert q.lines("c.txt") == ["abc"]
    assert "killing" not in q.logs() and "taken over" not in q.logs()


def test_a_repl_session_receipt_names_no_command_that_refuses(tmp_path) -> None:  # noqa: ANN001
    """07 c: a REPL session that ended with an effect held for approval is `completed`; its next: line
    must not send a person to `dal approve` and `dal resume`, which refuse a completed run."""
    import subprocess
    import sys

    from worker_queue import REPO

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DAL_")}, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "dal", "repl", "--require-approval=tee"], cwd=tmp_path, env=env,
                       input='run("echo hi | tee -a out.txt")\n', text=True, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    show = subprocess.run([sys.executable, "-m", "dal", "receipt", "show", "latest"], cwd=tmp_path, env=env,
                          text=True, capture_output=True, timeout=60)
    assert show.stdout.startswith("completed"), show.stdout
    nxt = show.stdout.rstrip().splitlines()[-1]
    assert nxt.startswith("next: nothing to resume") and "dal approve" not in nxt and "dal resume" not in nxt
    assert not (tmp_path / "out.txt").exists()
