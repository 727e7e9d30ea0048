"""Schedules: every slot becomes at most one job with two workers racing for it (a cron schedule every
second, real claiming); the catch-up rule (only the most recent missed slot runs) on a real store with
the slot computation given explicit times; the schedule commands."""

from __future__ import annotations

import json
import signal
import time
from datetime import UTC, datetime

from worker_queue import Queue


def test_each_slot_becomes_one_job_with_two_workers(queue: Queue) -> None:
    q = queue
    q.write("tick.dal", 'run("echo tick >> ticks.txt")\n')
    r = q.cli("schedule", "add", "every-second", "--cron", "* * * * * *", "tick.dal")
    assert r.code == 0 and "schedule every-second added" in r.out, r.err
    a, b = q.worker("--concurrency", "2"), q.worker("--concurrency", "2")
    q.wait_for(lambda: len([j for j in q.jobs().values() if j["state"] == "done"]) >= 3, 30, "three slots run")
    assert q.cli("schedule", "pause", "every-second").code == 0
    time.sleep(0.3)  # a slot fired just before the pause finishes
    q.wait_for(lambda: all(j["state"] == "done" for j in q.jobs().values()), 30, "the slots' jobs to finish")
    for w in (a, b):
        w.send_signal(signal.SIGTERM)
        assert w.wait(30) == 0
    jobs = list(q.jobs().values())
    keys = [j["key"] for j in jobs]
    assert len(keys) == len(set(keys)) >= 3  # one job per slot
    slots = sorted(datetime.strptime(k.split(":", 2)[2], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) for k in keys)
    assert all((b - a).total_seconds() >= 1 for a, b in zip(slots, slots[1:], strict=False))
    assert all(j["schedule"] == "every-second" for j in jobs)
    assert len(q.lines("ticks.txt")) == len(jobs)  # each slot's job ran once
    assert "every-second" in q.logs()
    runs = q.check_store()
    assert all(r["status"] == "completed" for r in runs) and len(runs) == len(jobs)
    listed = json.loads(q.cli("schedule", "list", "--json").out)["schedules"][0]
    assert listed["state"] == "paused" and listed["last_job"] == max(j["job_id"] for j in jobs)


def test_only_the_most_recent_missed_slot_runs(queue: Queue) -> None:
    from dal.receipts.jobs import JobQueue
    from dal.receipts.store import Store
    from dal.worker.schedules import fire_due, slot_key

    q = queue
    q.write("tick.dal", 'run("echo tick >> ticks.txt")\n')
    assert q.cli("schedule", "add", "quarter", "--cron", "*/15 * * * *", "--tz", "Europe/Berlin", "tick.dal").code == 0
    t0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC).timestamp()  # 09:00 in Berlin: a slot
    with Store(q.db) as store:
        jq = JobQueue.of(store)
        jq.set_schedule("quarter", next_at=t0)
        assert fire_due(jq, t0 - 1) == []  # not yet
        first = fire_due(jq, t0 + 5)
        assert [j["key"] for j in first] == [slot_key("quarter", t0)] == ["schedule:quarter:2026-03-01T08:00:00Z"]
        assert fire_due(jq, t0 + 60) == []  # the same slot never twice
        # Workers were away for an hour: four slots came; only the last one (09:00 UTC) runs.
        late = fire_due(jq, t0 + 3600 + 120)
        assert [j["key"] for j in late] == ["schedule:quarter:2026-03-01T09:00:00Z"]
        sched = jq.schedules()[0]
        assert sched["missed"] == 3 and sched["next_at"] == t0 + 3600 + 900
        assert sched["last_job"] == late[0]["job_id"]
        # A second worker racing with the same view of the schedule makes nothing.
        assert jq.fire("quarter", seen_next_at=t0, slot=t0, key="x", next_at=t0 + 900, missed=0) is None
    assert len(q.jobs()) == 2


def test_schedule_commands(queue: Queue) -> None:
    q = queue
    q.write("tick.dal", 'run("echo tick >> ticks.txt")\n')
    q.write("own.dal", 'operation("mine")\nrun("cat input.txt")\n')
    bad = q.cli("schedule", "add", "x", "--cron", "61 * * * *", "tick.dal")
    assert bad.code == 2 and "cron expression '61 * * * *' is not valid" in bad.err
    zone = q.cli("schedule", "add", "x", "--cron", "* * * * *", "--tz", "Mars/Olympus", "tick.dal")
    assert zone.code == 2 and "unknown time zone 'Mars/Olympus'" in zone.err
    own = q.cli("schedule", "add", "x", "--cron", "* * * * *", "own.dal")
    assert own.code == 2 and "must not call operation()" in own.err
    assert q.cli("schedule", "list").out == "no schedules yet\n"
    assert q.cli("schedule", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "tick.dal").code == 0
    dup = q.cli("schedule", "add", "nightly", "--cron", "* * * * *", "tick.dal")
    assert dup.code == 2 and "exists already" in dup.err
    listing = q.cli("schedule", "list")
    assert "nightly  active  30 2 * * *  Europe/Berlin" in listing.out
    assert q.cli("schedule", "pause", "nightly").code == 0
    assert "paused" in q.cli("schedule", "list").out
    resumed = q.cli("schedule", "resume", "nightly")
    assert resumed.code == 0 and "next slot" in resumed.out
    assert q.cli("schedule", "remove", "nightly").code == 0
    assert q.cli("schedule", "remove", "nightly").code == 2  # unknown: a usage error (docs/cli.md)
    assert q.cli("schedule", "list").out == "no schedules yet\n"


def test_until_idle_says_which_schedule_it_leaves_for_another_worker(queue: Queue) -> None:
    # It stopped while a schedule was due in seconds, without a word; a schedule is not a job until its
    # slot comes (one every minute would keep an idle worker for ever), so it says so as it stops.
    q = queue
    q.write("tick.dal", 'run("echo tick >> ticks.txt")\n')
    assert q.cli("schedule", "add", "minutely", "--cron", "* * * * *", "tick.dal").code == 0
    assert q.cli("schedule", "add", "yearly", "--cron", "0 0 1 1 *", "tick.dal").code == 0
    w = q.worker("--until-idle")
    assert w.wait(90) == 0
    log = q.logs()
    assert "idle: schedule minutely is due in " in log and "--until-idle does not wait for a schedule" in log, log
    assert "yearly" not in log
