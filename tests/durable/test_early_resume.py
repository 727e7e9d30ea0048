"""The journal belongs to the operation: an attempt that ends before it reaches the journaled effects
(a budget too small, an edit that fails or does not parse, source nested too deeply) loses nothing, and
the next invocation still replays them. Only a completed run or `--new-attempt` closes the journal."""

from __future__ import annotations

import pytest

SCRIPT = """\
let n = 0
let label = "q3"
let parts = split("a,b,c", ",")
n = n + len(parts)
let body = run("cat input.txt")
run("echo line >> append.txt")
let sent = run("echo report | tee -a outbox.txt")
print("sent:", sent.status, label, n)
"""
RUN = ["run", "--key", "send", "--require-approval=tee"]


def waiting_at_the_gate(d) -> None:
    """A normal invocation stops at the approval gate again, and nothing ran twice."""
    got = d.cli(*RUN, "s.dal")
    assert got.code == 3, got
    held = d.latest()
    assert held["status"] == "waiting" and held["external_effect"] == "pending_approval"
    assert [i["replayed"] for i in held["effects"]["items"][1:2]] == [True]  # the append, from the journal
    assert d.lines("append.txt") == ["line"]
    assert d.lines("outbox.txt") == []


def complete(d) -> None:
    assert d.cli("approve", "send").code == 0
    done = d.cli(*RUN, "s.dal")
    assert done.code == 0, done
    assert done.out == "sent: completed q3 3\n"
    assert d.lines("append.txt") == ["line"]
    assert d.lines("outbox.txt") == ["report"]
    receipts = d.check_store()
    assert receipts[-1]["status"] == "completed"
    assert receipts[-1]["effects"]["items"][1]["replayed"] is True


def test_resumes_with_every_budget_too_small_to_reach_the_gate(durable) -> None:
    d = durable
    d.write("s.dal", SCRIPT)
    assert d.cli(*RUN, "s.dal").code == 3
    ended = []
    for budget in range(1, 60):
        got = d.cli(*RUN, "--max-steps", str(budget), "s.dal")
        if got.code == 3:
            break  # this budget reaches the gate: every smaller one ended the attempt before it
        assert got.code == 4, got
        last = d.latest()
        assert last["status"] == "exhausted"
        ended.append(last["effects"]["count"])
        waiting_at_the_gate(d)
    else:
        pytest.fail("no budget reached the gate")
    # Budgets that ended before the first effect, between the read and the append, and after the append.
    assert ended[0] == 0 and {0, 1, 2} <= set(ended), ended
    complete(d)


def test_early_endings_of_every_kind_then_a_normal_invocation(durable) -> None:
    d = durable
    d.write("s.dal", SCRIPT)
    assert d.cli(*RUN, "s.dal").code == 3
    between = SCRIPT.replace('run("echo line', 'let y = {}["k"]\nrun("echo line')
    endings = [
        ("a syntax error", "let = 1\n" + SCRIPT, (2,)),
        ("a runtime error before the effect", 'let x = 1 + "a"\n' + SCRIPT, (1,)),
        ("fail() before the effect", 'fail("not yet")\n' + SCRIPT, (1,)),
        ("a runtime error between the replayed effects", between, (1,)),
        # nested too deeply to compile (1) or to parse (2): either way the attempt ends before any effect
        ("a value nested too deeply", "let deep = " + "[" * 100_000 + "]" * 100_000 + "\n" + SCRIPT, (1, 2)),
        ("blocks nested too deeply", "if true { " * 100_000 + "}" * 100_000 + "\n" + SCRIPT, (1, 2)),
    ]
    for what, text, codes in endings:
        d.write("s.dal", text)
        got = d.cli(*RUN, "s.dal")
        assert got.code in codes, (what, got)
        assert "Traceback" not in got.err, what
        d.write("s.dal", SCRIPT)
        waiting_at_the_gate(d)
    # Two early endings in a row (one through `dal resume`), then a normal one.
    assert d.cli("resume", "send", "--max-steps", "2").code == 4
    d.write("s.dal", 'let x = 1 + "a"\n' + SCRIPT)
    assert d.cli(*RUN, "s.dal").code == 1
    d.write("s.dal", SCRIPT)
    waiting_at_the_gate(d)
    complete(d)


def test_an_approval_survives_a_resume_that_ends_before_the_gate(durable) -> None:
    d = durable
    d.write("s.dal", SCRIPT)
    assert d.cli(*RUN, "s.dal").code == 3
    approved = d.cli("approve", "send", "--note", "checked")
    assert approved.code == 0 and "applies when the operation next reaches effect" in approved.out
    assert d.cli(*RUN, "--max-steps", "3", "s.dal").code == 4  # ends before the first effect
    assert d.cli("resume", "send", "--max-steps", "12").code == 4  # ends between the effects
    done = d.cli(*RUN, "s.dal")
    assert done.code == 0, done  # the decision was the operation's: the send runs once, approved
    assert d.lines("append.txt") == ["line"] and d.lines("outbox.txt") == ["report"]
    sent = d.latest()["effects"]["items"][2]
    assert "approved by" in sent["reason"] and "checked" in sent["reason"] and sent["replayed"] is False
    assert d.cli(*RUN, "s.dal").code == 0 and d.latest()["status"] == "skipped"
    assert d.lines("outbox.txt") == ["report"]


def test_a_failed_attempt_is_retried_without_repeating_what_must_not_run_twice(durable) -> None:
    d = durable
    d.write("s.dal", 'run("echo line >> append.txt")\nlet r = run("cat ready.txt")\n'
                     'if not r.ok { fail("ready.txt is not there yet") }\nrun("echo done >> append.txt")\n')
    first = d.cli("run", "--key", "job", "s.dal")
    assert first.code == 1 and d.latest()["retry"] == "inspect"
    d.write("ready.txt", "yes\n")
    again = d.cli("run", "--key", "job", "s.dal")
    assert again.code == 0, again
    # The append was replayed from the journal; the read ran again (the failure was its result).
    items = d.latest()["effects"]["items"]
    assert [(i["command"].split()[0], i["replayed"]) for i in items] == [("echo", True), ("cat", False),
                                                                        ("echo", False)]
    assert d.lines("append.txt") == ["line", "done"]
    assert d.latest()["attempts"] == {"invocations": 2, "new": 2, "resumes": 0, "duplicates": 0}


def test_new_attempt_closes_the_journal_and_runs_everything_again(durable) -> None:
    d = durable
    d.write("s.dal", SCRIPT)
    assert d.cli(*RUN, "s.dal").code == 3
    assert d.cli("approve", "send").code == 0
    # The operator starts over instead: the journal (and the approval in it) no longer applies.
    fresh = d.cli(*RUN, "--new-attempt", "s.dal")
    assert fresh.code == 3, fresh
    held, again = d.receipts()[0], d.latest()
    assert again["previous_run"] == held["run_id"]
    assert [i["replayed"] for i in again["effects"]["items"]] == [False, False, False]
    assert d.lines("append.txt") == ["line", "line"]  # asked for: a new attempt runs every effect again
    assert d.lines("outbox.txt") == []  # the first approval was for the first attempt
    assert "waiting" in d.cli("receipts", "--waiting").out and held["run_id"] not in d.cli("receipts", "--waiting").out
    complete_again = d.cli("approve", "send")
    assert complete_again.code == 0
    assert d.cli(*RUN, "s.dal").code == 0
    assert d.lines("append.txt") == ["line", "line"] and d.lines("outbox.txt") == ["report"]
    # A completed key runs again only when asked to, linked to the run it follows.
    assert d.cli(*RUN, "s.dal").code == 0 and d.latest()["status"] == "skipped"
    completed = [r for r in d.receipts() if r["status"] == "completed"][-1]
    redo = d.cli(*RUN, "--new-attempt", "s.dal")
    assert redo.code == 3
    assert d.latest()["previous_run"] == completed["run_id"]
    assert d.latest()["attempts"]["new"] == 3
    assert d.lines("append.txt") == ["line", "line", "line"]
    d.check_store()


def test_a_retry_may_take_another_path_through_reads_and_idempotent_writes_only(durable) -> None:
    d = durable
    d.write("s.dal", 'let r = run("test -e ready.txt")\nif not r.ok {\n    run("touch marker.txt")\n'
                     '    fail("not ready")\n}\nrun("echo ready >> log.txt")\n')
    assert d.cli("run", "--key", "job", "s.dal").code == 1
    d.write("ready.txt", "")
    again = d.cli("run", "--key", "job", "s.dal")  # the read runs again and takes the other branch
    assert again.code == 0, again
    assert d.lines("log.txt") == ["ready"]
    assert [i["command"] for i in d.latest()["effects"]["items"]] == ["test -e ready.txt", "echo ready >> log.txt"]
    assert d.cli("run", "--key", "job", "s.dal").code == 0 and d.latest()["status"] == "skipped"

    # A read that came before an append decided it: a retry replays it (the append happened on its
    # word), and the attempt fails the same way. A person may say to run the failed read again; when it
    # then leaves the path that holds the append, the append happened and the script no longer accounts
    # for it: a divergence, nothing runs, until the operator starts over.
    d.write("t.dal", 'let r = run("test -e go.txt")\nif not r.ok {\n    run("echo tried >> log2.txt")\n'
                     '    fail("not ready")\n}\nrun("echo went >> log2.txt")\n')
    assert d.cli("run", "--key", "job2", "t.dal").code == 1
    d.write("go.txt", "")
    same = d.cli("run", "--key", "job2", "t.dal")
    assert same.code == 1 and d.latest()["effects"]["items"][0]["replayed"] is True, same
    assert d.lines("log2.txt") == ["tried"]
    assert d.cli("resolve", "job2", "--effect", "1", "--as", "retry").code == 0
    diverged = d.cli("run", "--key", "job2", "t.dal")
    assert diverged.code == 1 and d.latest()["error"]["kind"] == "divergence", diverged
    assert "`echo tried >> log2.txt`" in d.latest()["error"]["message"]
    assert d.lines("log2.txt") == ["tried"]
    assert "--new-attempt" in diverged.err
    over = d.cli("run", "--key", "job2", "--new-attempt", "t.dal")
    assert over.code == 0 and d.lines("log2.txt") == ["tried", "went"]
    d.check_store()
