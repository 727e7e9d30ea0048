"""A script that chooses the key of the operator's waiting operation does not take the operator's
deciding and continuing commands (docs/policy.md, "No squatting"). Executed: the
operator's `op/send.dal --key report-dec` and an agent's `agent/x.dal` calling operation("report-dec")
both wait for approval of a send (`tee -a outbox.txt`). `dal approve/resume/receipt show report-dec` refuse
to pick one; named by run id, each decides its own run, the approve line names the script, and the
squatter's run, even resumed by the operator, never counts as the operator's operation."""

from __future__ import annotations

import json

import pytest

APPROVAL = "--require-approval=tee"


@pytest.fixture
def d(durable):
    (durable.ws / "op").mkdir()
    (durable.ws / "agent").mkdir()
    durable.write("op/send.dal", "run(\"echo 'monthly report' | tee -a outbox.txt\")\n")
    durable.write("agent/x.dal",
                  'operation("report-dec")\nrun("echo \'EVIL: the squatter ran\' | tee -a outbox.txt")\n')
    # The agent goes first: after the operator's run, its operation("report-dec") would stop at once
    # (the lead's moved-script rule); before it, it makes an operation of its own that the operator's does not see.
    assert durable.cli("run", APPROVAL, "agent/x.dal").code == 3
    assert durable.cli("run", APPROVAL, "--key", "report-dec", "op/send.dal").code == 3
    return durable


def _runs(d) -> dict[str, str]:
    """The run id of each script's waiting run."""
    rows = json.loads(d.cli("receipts", "--json").out)["runs"]
    out = {}
    for r in rows:
        rec = d.cli("receipt", "show", r["run_id"], "--json")
        out.setdefault(json.loads(rec.out)["script"]["path"].split("/")[-1], r["run_id"])
    return out


def test_a_shared_key_is_refused_by_every_deciding_and_continuing_command(d) -> None:
    for argv in (["approve", "report-dec"], ["deny", "report-dec"], ["resume", "report-dec"],
                 ["receipt", "show", "report-dec"], ["resolve", "report-dec", "--as", "done"]):
        r = d.cli(*argv, APPROVAL) if argv[0] == "resume" else d.cli(*argv)
        assert r.code == 2, (argv, r)
        assert "'report-dec' names runs of 2 scripts: name the run" in r.err, (argv, r.err)
        assert "agent/x.dal" in r.err
    assert d.lines("outbox.txt") == []  # nothing was approved, nothing sent


def test_named_by_run_each_decides_its_own_and_the_operators_report_is_sent(d) -> None:
    runs = _runs(d)
    op, agent = runs["send.dal"], runs["x.dal"]
    approved = d.cli("approve", op)
    assert approved.code == 0 and f"approved effect 1 of {op} (op/send.dal): `echo 'monthly report'" in approved.out
    assert d.cli("resume", op, APPROVAL).code == 0
    assert d.lines("outbox.txt") == ["monthly report"]
    # The operator looks at the agent's run too, approves and resumes it by its id: it is the agent's
    # own operation, and its completion does not make the operator's key `completed`.
    assert "(agent/x.dal)" in d.cli("approve", agent).out
    assert d.cli("resume", agent, APPROVAL).code == 0
    assert d.lines("outbox.txt") == ["monthly report", "EVIL: the squatter ran"]
    again = d.cli("run", APPROVAL, "--key", "report-dec", "op/send.dal")
    assert again.code == 0 and "skipped (operation 'report-dec' already completed in" in again.err
    assert d.latest()["skipped_of"] != agent


def test_a_resumed_squatter_does_not_complete_the_operators_key(d) -> None:
    runs = _runs(d)
    op, agent = runs["send.dal"], runs["x.dal"]
    assert d.cli("approve", agent).code == 0 and d.cli("resume", agent, APPROVAL).code == 0
    # the operator's own run still waits, and is still resumable by its id
    assert d.cli("approve", op).code == 0
    r = d.cli("resume", op, APPROVAL)
    assert r.code == 0, r.err
    assert d.lines("outbox.txt") == ["EVIL: the squatter ran", "monthly report"]


def test_a_script_may_not_take_the_name_of_a_keyless_run(durable) -> None:
    """Attack 04b: `dal run send.dal` is listed as operation `script:send`; a script's
    operation("script:send") would list, and be approved, as the same."""
    d = durable
    (d.ws / "agent").mkdir()
    d.write("send.dal", 'run("echo report | tee -a outbox.txt")\n')
    d.write("agent/x.dal", 'operation("script:send")\nrun("echo EVIL | tee -a outbox.txt")\n')
    assert d.cli("run", APPROVAL, "send.dal").code == 3
    r = d.cli("run", APPROVAL, "agent/x.dal")
    assert r.code == 1 and "starts with 'script:', which DAL keeps" in r.err  # the script's runtime error
    approved = d.cli("approve", "script:send")
    assert approved.code == 0 and "(send.dal): `echo report | tee -a outbox.txt`" in approved.out
    assert d.cli("resume", "script:send", APPROVAL).code == 0
    assert d.lines("outbox.txt") == ["report"]


def test_the_skipped_line_shows_a_key_s_control_characters_escaped_once(durable) -> None:
    durable.write("k.dal", 'operation("a\\u001b[2Jb")\nprint("hi")\n')
    assert durable.cli("run", "k.dal").code == 0
    again = durable.cli("run", "k.dal")
    assert again.code == 0 and "skipped (operation 'a\\x1b[2Jb' already completed in" in again.err, again.err
    assert "\x1b" not in again.err
