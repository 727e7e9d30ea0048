"""Issue 15, point 7: the rendered receipt answers intent, boundary, attempts, evidence and the next move,
and says who decided what."""

from __future__ import annotations

import json

from dalshell import Shell


def test_a_resumed_run_says_who_approved_and_what_it_could_touch(dal: Shell) -> None:
    dal.write("send.dal",
              'operation("send:1")\nrun("touch sent.txt")\nfinish({"path": "sent.txt", "status": "sent"})\n')
    first = dal("run", "--require-approval", "touch", "send.dal")
    assert first.returncode == 3 and "dal: next:" in first.stderr
    assert dal("approve", "latest", "--note", "checked the recipients").returncode == 0
    resumed = dal("resume", "latest")
    assert resumed.returncode == 0, resumed.stderr
    shown = dal("receipt", "show", "latest").stdout
    facts = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in shown.splitlines()[1:] if line[:2] == "  "
             and not line[2:3].isdigit() and len(line.split(None, 1)) == 2}
    assert facts["intent"] == "the script's target: sent.txt"
    assert facts["boundary"] == "programs touch · writes sent.txt"
    assert "1. touch sent.txt — command completed (approved by " in shown
    decisions = shown[shown.index("\ndecisions\n"):]
    assert "effect 1: approved by " in decisions and "(checked the recipients)" in decisions
    assert "\nnext: nothing to do" in shown
    assert "· 1 effect ·" in resumed.stderr  # one, not "1 effects"


def test_recorded_run_result_names_its_command_in_the_receipt(dal: Shell) -> None:
    # Point 7: the script's own record(...) of a run() result says which command it was, not only
    # "command completed"; a result with output stays its output; the script can read r.command.
    dal.write("made.dal", 'let state = {"attempt": 1, "evidence": []}\n'
              'let seen = run("echo missing")\nstate = record(state, "check", seen)\n'
              'let made = run("touch made.txt")\nstate = record(state, "create", made)\n'
              'print(made.command)\nfinish(state)\n')
    done = dal("run", "made.dal")
    assert done.returncode == 0 and done.stdout == "touch made.txt\n"
    shown = dal("receipt", "show", "latest").stdout
    assert "1. check — missing\n" in shown and "2. create — `touch made.txt` completed\n" in shown
    body = json.loads(dal("receipt", "show", "latest", "--json").stdout)
    assert body["result"]["evidence"][1]["outcome"] == "`touch made.txt` completed"


def _facts(shown: str) -> dict[str, str]:
    return {line.split(None, 1)[0]: line.split(None, 1)[1] for line in shown.splitlines()[1:] if line[:2] == "  "
            and not line[2:3].isdigit() and len(line.split(None, 1)) == 2}


def test_the_boundary_names_every_program_of_every_command(dal: Shell) -> None:
    # `tee`, the program that needed the approval, ran second in its pipeline; `echo` ran after `test`.
    dal.write("draft.txt", "hello\n")
    dal.write("send.dal", 'operation("send:2")\nrun("test -e draft.txt && echo present || echo missing")\n'
              'run("cat draft.txt | tee -a outbox.txt")\nfinish({"status": "sent"})\n')
    assert dal("run", "--require-approval", "tee", "send.dal").returncode == 3
    assert dal("approve", "latest").returncode == 0
    assert dal("resume", "latest").returncode == 0
    assert _facts(dal("receipt", "show", "latest").stdout)["boundary"] == (
        "programs test, echo, cat, tee · writes outbox.txt")
    items = json.loads(dal("receipt", "show", "latest", "--json").stdout)["effects"]["items"]
    assert [i["programs"] for i in items] == [["test", "echo"], ["cat", "tee"]]


def test_a_killed_runs_boundary_names_every_program_too(dal: Shell) -> None:
    # The receipt of a run whose process died is rebuilt from the journal, which keeps the programs.
    dal.write("k.dal", 'run("echo one | tee -a log.txt")\nrun("true")\n')
    killed = dal("run", "k.dal", env={"DAL_TEST_CRASH_AT": "after-result:2"})
    assert killed.returncode < 0 or killed.returncode == 137, killed
    shown = dal("receipt", "show", "latest").stdout
    assert "programs echo, tee, true" in shown
    # Its time and steps died with it: the receipt says so, not "0 ms, 0 of 1,000,000 steps".
    ran = _facts(shown)["ran"]
    assert "at least " in ran and "(to its last journaled effect)" in ran, ran
    assert "steps not recorded (its process died), budget 1,000,000, 2 effects" in ran, ran


def test_a_result_without_a_status_word_is_shown_as_it_is(dal: Shell) -> None:
    dal.write("f.dal", 'finish({"count": 3, "names": ["a", "b"]})\n')
    assert dal("run", "f.dal").returncode == 0
    assert _facts(dal("receipt", "show", "latest").stdout)["result"] == '{"count": 3, "names": ["a", "b"]}'
    dal.write("g.dal", 'finish({"status": "verified"})\n')
    dal("run", "g.dal")
    assert _facts(dal("receipt", "show", "latest").stdout)["result"] == "verified"
