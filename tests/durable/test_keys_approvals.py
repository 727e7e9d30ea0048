"""Operation keys (duplicates, new attempts), the approval gate (approve, deny, resume), `dal resolve`,
divergence between an edited script and the journal, and the errors of the decision commands."""

from __future__ import annotations

import signal

import pytest

SEND = """\
let body = run("cat input.txt")
let sent = run("echo report | tee -a outbox.txt")
print("sent:", sent.status, "/", sent)
"""


def test_same_key_three_times_runs_effects_once(durable) -> None:
    d = durable
    d.write("append.dal", 'let r = run("echo line >> append.txt")\nprint(r)\n')
    codes = [d.cli("run", "--key", "nightly", "append.dal").code for _ in range(3)]
    assert codes == [0, 0, 0]
    assert d.lines("append.txt") == ["line"]
    first, second, third = d.check_store()
    assert first["status"] == "completed"
    assert [second["status"], third["status"]] == ["skipped", "skipped"]
    assert second["skipped_of"] == third["skipped_of"] == first["run_id"]
    assert second["effects"]["count"] == third["effects"]["count"] == 0
    assert third["attempts"] == {"invocations": 3, "new": 1, "resumes": 0, "duplicates": 2}
    shown = d.cli("receipt", "show", "nightly")
    assert "invocations  3 (1 new, 0 resumed, 2 duplicate)" in shown.out
    assert f"already completed in {first['run_id']}" in shown.out


def test_operation_in_the_script_is_a_key(durable) -> None:
    d = durable
    d.write("op.dal", 'operation("weekly-report")\nrun("echo line >> append.txt")\n')
    assert d.cli("run", "op.dal").code == 0
    again = d.cli("run", "op.dal")
    assert again.code == 0 and "skipped" in again.err
    assert d.lines("append.txt") == ["line"]
    assert d.latest()["key"] == "weekly-report"
    d.write("late.dal", 'run("echo x >> late.txt")\noperation("too-late")\n')
    late = d.cli("run", "late.dal")
    assert late.code == 1 and "must come before the first run()" in late.err


def test_failed_run_with_its_key_starts_a_new_attempt(durable) -> None:
    d = durable
    d.write("flaky.dal", 'let r = run("cat missing.txt")\nif not r.ok { fail("missing.txt is not there yet") }\n')
    assert d.cli("run", "--key", "flaky", "flaky.dal").code == 1
    d.write("missing.txt", "here\n")
    assert d.cli("run", "--key", "flaky", "flaky.dal").code == 0
    first, second = d.check_store()
    assert second["previous_run"] == first["run_id"]
    assert second["attempts"] == {"invocations": 2, "new": 2, "resumes": 0, "duplicates": 0}


def test_a_rejected_script_does_not_reopen_a_completed_key(durable) -> None:
    d = durable
    d.write("ok.dal", 'run("echo line >> append.txt")\n')
    assert d.cli("run", "--key", "k", "ok.dal").code == 0
    d.write("broken.dal", "let = \n")
    assert d.cli("run", "--key", "k", "broken.dal").code == 2
    assert d.cli("run", "--key", "k", "ok.dal").code == 0
    assert d.latest()["status"] == "skipped"
    assert d.lines("append.txt") == ["line"]


def test_approval_gate_approve_resume_runs_the_effect_once(durable) -> None:
    d = durable
    d.write("send.dal", SEND)
    gate = d.cli("run", "--key", "send:q3", "--require-approval=tee", "send.dal")
    assert gate.code == 3, gate
    assert not (d.ws / "outbox.txt").exists()
    held = d.latest()
    rid = held["run_id"]
    assert held["status"] == "waiting"
    assert held["external_effect"] == "pending_approval"
    assert held["retry"] == "escalate"
    pending = held["effects"]["items"][-1]
    assert (pending["seq"], pending["status"], pending["command"]) == (2, "pending_approval",
                                                                      "echo report | tee -a outbox.txt")
    assert "`echo report | tee -a outbox.txt`" in held["blocker"]
    assert f"dal approve {rid} --effect 2" in gate.err
    waiting = d.cli("receipts", "--waiting")
    assert rid in waiting.out

    approved = d.cli("approve", rid, "--note", "figures checked")
    assert approved.code == 0, approved
    assert "approved effect 2" in approved.out and f"dal resume {rid}" in approved.out
    resumed = d.cli("resume", rid)  # the policy flags (--require-approval=tee) come from the store
    assert resumed.code == 0, resumed
    assert "sent: completed / report" in resumed.out
    assert d.lines("outbox.txt") == ["report"]
    done = d.latest()
    assert done["status"] == "completed" and done["previous_run"] == rid
    assert done["external_effect"] == "performed"
    sent = done["effects"]["items"][1]
    assert "approved by" in sent["reason"] and "figures checked" in sent["reason"]
    assert done["effects"]["items"][0]["replayed"] is True
    assert done["attempts"] == {"invocations": 2, "new": 1, "resumes": 1, "duplicates": 0}
    assert rid not in d.cli("receipts", "--waiting").out

    # Nothing sends it again: not the same key, not another resume, not another approval.
    assert d.cli("run", "--key", "send:q3", "--require-approval=tee", "send.dal").code == 0
    again = d.cli("resume", rid)
    assert again.code == 2 and "already continued" in again.err
    late = d.cli("approve", rid)
    assert late.code == 2 and "already continued" in late.err
    assert d.lines("outbox.txt") == ["report"]
    d.check_store()


def test_approval_from_dal_toml_and_resume_by_key(durable) -> None:
    d = durable
    d.write("dal.toml", '[programs.tee]\nclass = "external"\napproval = true\n')
    d.write("send.dal", SEND)
    assert d.cli("run", "--key", "send:q4", "send.dal").code == 3
    assert d.cli("approve", "send:q4", "--effect", "2").code == 0
    again = d.cli("run", "--key", "send:q4", "send.dal")  # the same --key continues from the gate
    assert again.code == 0, again
    assert d.lines("outbox.txt") == ["report"]


def test_deny_then_resume_hands_the_script_a_denied_result(durable) -> None:
    d = durable
    d.write("send.dal", SEND + 'if not sent.ok { fail({"blocker": str(sent), "retry": "inspect"}) }\n')
    assert d.cli("run", "--key", "send:q3", "--require-approval=tee", "send.dal").code == 3
    denied = d.cli("deny", "latest", "--note", "wrong quarter")
    assert denied.code == 0 and "denied effect 2" in denied.out
    resumed = d.cli("resume", "send:q3")
    assert resumed.code == 1
    assert "sent: denied / denied: approval denied by" in resumed.out
    assert "wrong quarter" in resumed.out
    assert not (d.ws / "outbox.txt").exists()
    last = d.latest()
    assert last["status"] == "failed" and last["external_effect"] == "none"
    assert last["effects"]["items"][1]["status"] == "denied"
    d.check_store()


def test_decision_commands_refuse_clearly(durable) -> None:
    d = durable
    missing = d.cli("approve", "latest")
    assert missing.code == 2 and "no runs yet" in missing.err
    d.write("send.dal", SEND)
    d.write("ok.dal", 'run("echo hi")\n')
    assert d.cli("run", "ok.dal").code == 0
    done = d.latest()["run_id"]
    assert d.cli("run", "--key", "send:q3", "--require-approval=tee", "send.dal").code == 3
    rid = d.latest()["run_id"]

    cases = [
        (("approve", done), f"run {done} is completed, not waiting"),
        (("approve", "run_20200101T000000000Z_abcdef"), "no run run_20200101T000000000Z_abcdef"),
        (("approve", "no-such-key"), "no run, operation or key matches 'no-such-key'"),
        (("approve", rid, "--effect", "1"), f"effect 1 of run {rid} (`cat input.txt`) is not waiting for approval"),
        (("approve", rid, "--effect", "7"), f"run {rid} has no effect 7"),
        (("resolve", rid, "--as", "done"), f"effect 2 of run {rid} (`echo report | tee -a outbox.txt`) is not of "
                                           "unknown outcome: it is waiting for approval; use `dal approve"),
        (("resume", done), f"run {done} is completed: nothing to resume"),
    ]
    for argv, message in cases:
        got = d.cli(*argv)
        assert got.code == 2, (argv, got)
        assert message in got.err, (argv, got.err)
        assert got.err.count("\n") == 1, got.err  # one line
    assert not (d.ws / "outbox.txt").exists()


def test_divergence_after_an_edit_names_both_commands_and_the_line(durable) -> None:
    d = durable
    three = 'run("echo one >> append.txt")\nrun("echo two >> append.txt")\nrun("echo three >> append.txt")\n'
    d.write("two.dal", three)
    killed = d.run("run", "--key", "edit", "two.dal", DAL_TEST_CRASH_AT="after-result:2")
    assert killed.code == -signal.SIGKILL
    d.write("two.dal", three.replace("echo two", "echo TWO"))
    got = d.cli("run", "--key", "edit", "two.dal")
    assert got.code == 1
    last = d.latest()
    assert last["status"] == "failed" and last["retry"] == "inspect"
    assert last["error"]["kind"] == "divergence"
    assert last["error"]["line"] == 2
    msg = last["error"]["message"]
    assert "`echo two >> append.txt`" in msg and "`echo TWO >> append.txt`" in msg and "line 2" in msg
    assert "two.dal:2" in got.err
    assert d.lines("append.txt") == ["one", "two"]  # nothing ran: not the edited effect, not the third

    # A script cut short also diverges: the journal holds effects the script no longer asks for.
    d.write("two.dal", 'run("echo one >> append.txt")\n')
    short = d.cli("run", "--key", "edit", "two.dal")
    assert short.code == 1 and d.latest()["error"]["kind"] == "divergence"
    assert "`echo two >> append.txt`" in d.latest()["error"]["message"]
    assert d.lines("append.txt") == ["one", "two"]
    d.check_store()


def test_keyless_crashed_run_resumes_by_run_id(durable) -> None:
    d = durable
    d.write("two.dal", 'run("echo one >> append.txt")\nrun("echo two >> append.txt")\n')
    assert d.run("run", "two.dal", DAL_TEST_CRASH_AT="before-intent:2").code == -signal.SIGKILL
    from dal.receipts.store import Store

    with Store(d.db, readonly=True) as store:
        (row,) = store.list_runs()
    assert row["status"] == "running"
    got = d.cli("resume", row["run_id"][:20])
    assert got.code == 0, got
    assert d.lines("append.txt") == ["one", "two"]
    buried, resumed = d.check_store()
    assert buried["status"] == "interrupted" and buried["effects"]["items"][0]["status"] == "completed"
    assert resumed["previous_run"] == buried["run_id"] and resumed["effects"]["items"][0]["replayed"]


@pytest.mark.parametrize("outcome,expect", [("failed", ["line"]), ("retry", ["line", "line"])])
def test_resolve_failed_or_retry(durable, outcome, expect) -> None:
    d = durable
    d.write("a.dal", 'let r = run("echo line >> append.txt")\nprint(r.status)\n')
    assert d.run("run", "--key", "a", "a.dal", DAL_TEST_CRASH_AT="after-exec:1").code == -signal.SIGKILL
    assert d.cli("run", "--key", "a", "a.dal").code == 3
    assert d.cli("resolve", "a", "--effect", "1", "--as", outcome).code == 0
    got = d.cli("resume", "a")
    assert got.code == 0
    assert got.out.strip() == ("failed" if outcome == "failed" else "completed")
    assert d.lines("append.txt") == expect  # retry is the person's call: it runs again
    d.check_store()


def test_now_and_env_are_replayed_on_resume(durable, monkeypatch) -> None:
    d = durable
    d.write("clock.dal", 'operation("clock")\nlet t = now()\nlet who = env("WHO")\n'
                         'run("echo line >> append.txt")\nprint(t, who)\nrun("echo two >> append.txt")\n')
    first = d.run("run", "clock.dal", "--allow-env=WHO", DAL_TEST_CRASH_AT="before-intent:2", WHO="first")
    assert first.code == -signal.SIGKILL
    monkeypatch.setenv("WHO", "second")
    # operation("clock") chosen by the script continues only under the very policy it started with
    again = d.cli("run", "clock.dal", "--allow-env=WHO")
    assert again.code == 0, again
    assert again.out == first.out  # the same instant and the same value, from the journal
    assert first.out.strip().endswith(" first")
    assert d.lines("append.txt") == ["line", "two"]
    assert d.latest()["key"] == "clock"


@pytest.mark.parametrize("command,policy,held", [
    ("mv inbox.txt done.txt", "", True),
    ("touch stamp.txt", "", False),  # idempotent: simply run again
    ("touch stamp.txt", '[programs.touch]\nidempotent = false\n', True),  # the policy says otherwise
])
def test_unknown_outcome_of_local_effects(durable, command, policy, held) -> None:
    d = durable
    d.write("inbox.txt", "msg\n")
    d.write("dal.toml", (d.ws / "dal.toml").read_text() + policy)
    d.write("one.dal", f'let r = run("{command}")\nprint(r.status)\n')
    assert d.run("run", "--key", "one", "one.dal", DAL_TEST_CRASH_AT="after-exec:1").code == -signal.SIGKILL
    got = d.cli("run", "--key", "one", "one.dal")
    last = d.latest()
    if held:
        assert got.code == 3 and last["effects"]["items"][-1]["status"] == "uncertain"
        assert "not idempotent" in last["blocker"] and f"`{command}`" in last["blocker"]
    else:
        assert got.code == 0 and got.out == "completed\n"
        assert last["effects"]["items"][0]["replayed"] is False
    d.check_store()
