"""A decision is read when the run reaches the effect, in the transaction that journals what the run does
there: the newest decision wins, whenever the run started, and one that comes after the run acted is
refused as too late. A decision is bound to what the person was shown: the command, and the attempt chain
of the run they named."""

from __future__ import annotations

import time

import pytest

GATED = '[programs.tee]\nclass = "external"\napproval = true\n'
WORK = "let x = 0\nfor i in range(8000000) { x = x + 1 }\n"  # seconds of work before the gate
STEPS = "--max-steps=1000000000"


def _resume_in_the_window(d, waiting: str):
    """`dal resume k` as a child, returned once it has recorded its run (and is working towards the gate)."""
    from dal.receipts.store import Store

    proc = d.spawn("resume", "k", STEPS)
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        with Store(d.db, readonly=True) as store:
            newest = store.runs_of_key("k", limit=1)[0]
        if newest["run_id"] != waiting and newest["status"] == "running":
            return proc, newest["run_id"]
        time.sleep(0.02)


def _gated(d, tail: str = "", work: str = WORK) -> str:
    d.write("dal.toml", GATED)
    d.write("s.dal", "run(\"printf 'a0\\n' >> a.log\")\n" + work
            + 'let r = run("echo send1 | tee -a outbox.txt")\nif not r.ok { fail("the send was denied") }\n' + tail)
    assert d.cli("run", "--key", "k", STEPS, "s.dal").code == 3
    return d.latest()["run_id"]


@pytest.mark.parametrize("first,then", [("approve", "deny"), ("deny", "approve")])
def test_the_newest_decision_at_the_gate_wins(durable, first, then) -> None:
    d = durable
    waiting = _gated(d)
    assert d.cli(first, "k").code == 0
    proc, resuming = _resume_in_the_window(d, waiting)
    changed = d.cli(then, "k", "--note", "changed my mind")
    assert changed.code == 0, changed
    assert f"applies to run {resuming}, which is resuming now" in changed.out, changed.out
    out, err = proc.communicate(timeout=120)
    if then == "deny":
        assert proc.returncode == 1, err
        assert d.lines("outbox.txt") == []
        assert d.latest()["effects"]["items"][1]["status"] == "denied"
    else:
        assert proc.returncode == 0, err
        assert d.lines("outbox.txt") == ["send1"]
    assert d.lines("a.log") == ["a0"]
    d.check_store()


def test_a_corrected_resolution_is_the_one_used(durable) -> None:
    """`resolve --as done`, a resume starts, the person corrects it to `--as retry`: it is sent, once."""
    d = durable
    d.write("s.dal", WORK + 'run("echo send1 | tee -a outbox.txt")\nrun("printf \'after\\\\n\' >> a.log")\n')
    killed = d.run("run", "--key", "k", STEPS, "s.dal", DAL_TEST_CRASH_AT="after-intent:1")
    assert killed.code in (-9, 137)
    held = d.cli("resume", "k", STEPS)
    assert held.code == 3, held
    assert d.cli("resolve", "k", "--as", "done").code == 0
    proc, resuming = _resume_in_the_window(d, d.latest()["run_id"])
    fixed = d.cli("resolve", "k", "--as", "retry", "--note", "it did not go out")
    assert fixed.code == 0 and f"applies to run {resuming}, which is resuming now" in fixed.out, fixed
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert d.lines("outbox.txt") == ["send1"]
    assert d.lines("a.log") == ["after"]
    assert d.latest()["effects"]["items"][0]["summary"] != "outcome unknown; resolved as done"


def test_a_decision_after_the_run_acted_is_refused_as_too_late(durable) -> None:
    d = durable
    d.write("dal.toml", GATED)
    d.write("s.dal", "run(\"printf 'a0\\n' >> a.log\")\nrun(\"sleep 3 && echo send1 | tee -a outbox.txt\")\n")
    assert d.cli("run", "--key", "k", "s.dal").code == 3
    waiting = d.latest()["run_id"]
    assert d.cli("approve", "k").code == 0
    proc = d.spawn("resume", "k")
    from dal.receipts.store import Store

    deadline = time.monotonic() + 30
    while True:  # until the resume has journaled the send's intent: it is sending
        assert time.monotonic() < deadline and proc.poll() is None
        with Store(d.db, readonly=True) as store:
            rid = store.runs_of_key("k", limit=1)[0]["run_id"]
            if rid != waiting and any(e["seq"] == 2 for e in store.journal(rid)):
                break
        time.sleep(0.02)
    late = d.cli("deny", "k", "--note", "stop")
    assert late.code == 2, late
    assert "too late" in late.err and "right now" in late.err, late.err
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert d.lines("outbox.txt") == ["send1"]
    with Store(d.db, readonly=True) as store:
        assert [r["decision"] for r in store.approvals(rid)] == []  # nothing recorded for the late deny
    d.check_store()


def test_a_decision_on_a_run_of_an_attempt_started_over_is_refused(durable) -> None:
    d = durable
    d.write("s.dal", 'run("printf \'prep\\\\n\' >> log.txt")\n'
                     'run("echo " + trim(run("cat msg").stdout) + " | tee -a outbox.txt")\n')
    d.write("msg", "A\n")
    assert d.cli("run", "--key", "k", "--require-approval=tee", "s.dal").code == 3
    r1 = d.latest()["run_id"]
    d.write("msg", "B\n")
    assert d.cli("run", "--key", "k", "--new-attempt", "--require-approval=tee", "s.dal").code == 3
    r2 = d.latest()["run_id"]
    # The person acts on R1's receipt, which showed `echo A`: refused, and nothing is sent.
    stale = d.cli("approve", r1, "--effect", "3")
    assert stale.code == 2 and "started over" in stale.err and r2 in stale.err, stale
    assert d.cli("run", "--key", "k", "--require-approval=tee", "s.dal").code == 3
    assert d.lines("outbox.txt") == []
    assert d.cli("approve", r2).code == 0  # decided about what the operation now proposes
    assert d.cli("run", "--key", "k", "--require-approval=tee", "s.dal").code == 0
    assert d.lines("outbox.txt") == ["B"]


def test_a_decision_on_an_older_run_is_about_what_that_run_showed(durable) -> None:
    d = durable
    d.write("dal.toml", GATED)
    d.write("s.dal", "run(\"printf 'a0\\n' >> a.log\")\nrun(\"echo send1 | tee -a outbox.txt\")\n"
                     "run(\"printf 'a1\\n' >> a.log\")\nrun(\"echo send2-to-everyone | tee -a outbox.txt\")\n")
    assert d.cli("run", "--key", "k", "s.dal").code == 3
    r1 = d.latest()["run_id"]  # waits on effect 2
    assert d.cli("approve", "k").code == 0
    assert d.cli("run", "--key", "k", "s.dal").code == 3  # send1 sent; waits on effect 4
    r2 = d.latest()["run_id"]
    again = d.cli("approve", r1)  # R1's next: line, followed late
    assert again.code == 2, again
    assert "effect 2" in again.err and "effect 4 of run " + r2 in again.err, again.err
    assert d.cli("approve", r1, "--effect", "4").code == 2  # R1 never showed effect 4
    assert d.cli("run", "--key", "k", "s.dal").code == 3
    assert d.lines("outbox.txt") == ["send1"]


def test_a_decision_applies_only_to_the_command_it_was_about(tmp_path) -> None:
    from dal.receipts.store import Store

    with Store(tmp_path / "dal.db") as store:
        store.begin_run("run_20260101T000000000Z_000001", operation="k", key="k")
        store.journal_hold("run_20260101T000000000Z_000001", 2, "echo A | tee -a outbox.txt", "external",
                           detail={"pending": "approval"})
        store.record_approval("run_20260101T000000000Z_000001", 2, "approved", command="echo A | tee -a outbox.txt")
        runs = ["run_20260101T000000000Z_000001"]
        other = store.journal_hold("run_20260101T000000000Z_000001", 2, "echo B | tee -a outbox.txt", "external",
                                   detail={"pending": "approval"}, decided_in=runs, kinds=["approved"])
        assert other is None  # held again: nobody approved `echo B`
        same = store.journal_hold("run_20260101T000000000Z_000001", 2, "echo A | tee -a outbox.txt", "external",
                                  detail={"pending": "approval"}, decided_in=runs, kinds=["approved"])
        assert same is not None and same["decision"] == "approved"


def test_the_store_refuses_a_decision_the_run_at_the_effect_already_acted_on(tmp_path) -> None:
    """The check and the record are one transaction (the CLI checks first; this is the race behind it)."""
    from dal.receipts.store import DecisionTooLate, Store

    rid = "run_20260101T000000000Z_000001"
    with Store(tmp_path / "dal.db") as store:
        store.begin_run(rid, operation="k", key="k")
        store.journal_hold(rid, 2, "echo A | tee -a outbox.txt", "external", detail={"pending": "approval"})
        store.record_approval(rid, 2, "approved", command="echo A | tee -a outbox.txt", unless_acted_by=rid)
        store.journal_intent(rid, 2, "echo A | tee -a outbox.txt", "external", detail={"decision": 1})
        with pytest.raises(DecisionTooLate, match="is executing it now"):
            store.record_approval(rid, 2, "denied", command="echo A | tee -a outbox.txt", unless_acted_by=rid)
        assert [r["decision"] for r in store.approvals(rid)] == ["approved"]


def test_a_decision_while_a_resume_is_starting_says_it_applies_to_that_run(durable) -> None:
    """An invocation holds the key's lock but has not recorded its run yet (it is starting): the decision
    applies to it (it reads decisions at the gate), not to a later `dal resume` that would find the
    operation continued."""
    import os

    from dal.receipts.oplock import KeyLock

    d = durable
    waiting = _gated(d, work="")  # no window to hit: the test holds the key's lock itself
    lock = KeyLock(d.db.parent / "locks", "k")
    lock.acquire("run_20990101T000000000Z_000001")  # what a starting runner does first
    try:
        said = d.cli("approve", "k")
    finally:
        lock.release()
    assert said.code == 0, said
    assert f"applies to the run process {os.getpid()} is starting now" in said.out, said.out
    assert f"if it stops before, `dal resume {waiting}`" in said.out
    assert d.cli("resume", "k", STEPS).code == 0
    assert d.lines("outbox.txt") == ["send1"]
    nothing = d.cli("approve", "k")  # and without a starting runner: the usual line
    assert nothing.code == 2, nothing  # the operation completed: nothing waits
