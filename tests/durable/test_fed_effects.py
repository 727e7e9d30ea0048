"""Issue 30: a script writes text to a file (`write_file`) and feeds a program input (`run([...], {"input":
...})`) without building a shell string; both are effects like any run(): checked by the policy, walled,
journaled, exactly once on resume, approved with the text they feed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from dal.core.shellword import fed_command
from dal.effects import EffectContext, Policy, check_argv, execute_checked
from dal.effects.classify.check import Decision
from dal.effects.plan.shell import CommandList, Pipeline, Redirect, SimpleCommand

TRICKY = "it's $HOME; `reboot` * \"q\"\nline two\n"


def test_write_file_writes_the_text_as_it_is_to_a_name_as_it_is(durable) -> None:
    durable.write("w.dal", 'let name = "it\'s $HOME; *.md"\n'
                  'let text = "it\'s $HOME; `reboot` * \\"q\\"\\nline two\\n"\n'
                  'print(write_file(name, text).ok)\n'
                  'write_file(name, "more\\n", {"append": true})\n'
                  'print(run(["wc", "-c"], {"input": text}))\n')
    got = durable.cli("run", "w.dal")
    assert got.code == 0, got.err
    assert got.out == f"true\n{len(TRICKY.encode())}\n"
    assert (durable.ws / "it's $HOME; *.md").read_text() == TRICKY + "more\n"
    receipt = durable.latest()
    first = receipt["effects"]["items"][0]
    assert first["programs"] == ["cat"] and first["writes"] == ["it's $HOME; *.md"] and first["class"] == "local"


def test_write_file_is_walled_like_a_redirection(durable, tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("untouched\n")
    os.symlink(canary, durable.ws / "link.txt")
    durable.write("w.dal", f'print(write_file("{canary}", "x").status)\nprint(write_file("link.txt", "x").status)\n'
                  'print(write_file("dal.toml", "x").status)\nprint(write_file(".dal/dal.db", "x").status)\n'
                  'print(run(["tee", "../canary.txt"], {"input": "x"}).status)\n')
    got = durable.cli("run", "w.dal")
    assert got.out == "denied\n" * 5, (got.out, got.err)
    assert canary.read_text() == "untouched\n"
    assert "[programs.tee]" in (durable.ws / "dal.toml").read_text()


def test_the_wall_alone_refuses_a_write_through_a_link_out(durable, tmp_path: Path) -> None:
    # The check bypassed: a forged decision that allows `cat > link.txt`, link.txt leading out. What DAL
    # opens for the redirection (by descriptor, inside the roots) still refuses it at start.
    canary = tmp_path / "canary.txt"
    canary.write_text("untouched\n")
    os.symlink(canary, durable.ws / "link.txt")
    policy = Policy.default(durable.ws)
    honest = check_argv(["cat"], policy, stdin="x", write_to="plain.txt")
    plan = CommandList((Pipeline((SimpleCommand(("cat",), (Redirect(1, ">", "link.txt"),)),)),))
    forged = Decision(True, "forged", "local", plan=plan, executables=honest.executables, stdin="evil\n")
    result = execute_checked("cat > link.txt", forged, EffectContext(policy=policy))
    assert result.code == 126 and "denied at start" in result.stderr
    assert canary.read_text() == "untouched\n"


def test_input_goes_only_with_the_list_form_and_options_are_checked(durable) -> None:
    for line, message in [
        ('run("sort", {"input": "b\\na\\n"})', "feeds input only to a list of words"),
        ('run(["sort"], {"stdin": "x"})', 'has no option "stdin"'),
        ('run(["sort"], {"input": 3})', "option \"input\" needs a string"),
        ('write_file("a.txt", 3)', "needs a string as the text"),
        ('write_file("", "x")', "empty path"),
    ]:
        durable.write("bad.dal", line + "\n")
        got = durable.cli("run", "bad.dal")
        assert got.code == 1 and message in got.err and "bad.dal:1:" in got.err and "^" in got.err, (line, got.err)
        assert "Traceback" not in got.err


SEND = 'operation("send:1")\nlet text = "report: it\'s done\\n"\nwrite_file("log.txt", text, {"append": true})\n' \
       'run(["tee", "-a", "outbox.txt"], {"input": text})\nprint("sent")\n'


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
def test_a_fed_effect_runs_once_across_a_kill_and_resume(durable) -> None:
    durable.write("send.dal", SEND)
    killed = durable.run("run", "send.dal", DAL_TEST_CRASH_AT="after-result:2")
    assert killed.code == -signal.SIGKILL
    assert durable.lines("outbox.txt") == ["report: it's done"]
    again = durable.run("run", "send.dal")
    assert again.code == 0 and again.out == "sent\n", again.err
    assert durable.lines("log.txt") == ["report: it's done"] and durable.lines("outbox.txt") == ["report: it's done"]
    assert [i["replayed"] for i in durable.latest()["effects"]["items"]] == [True, True]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
def test_an_append_whose_outcome_is_unknown_waits_for_a_person(durable) -> None:
    durable.write("send.dal", SEND)
    assert durable.run("run", "send.dal", DAL_TEST_CRASH_AT="after-exec:1").code == -signal.SIGKILL
    again = durable.run("run", "send.dal")
    assert again.code == 3, again.err  # an append that may have happened is not appended again
    assert durable.lines("log.txt") == ["report: it's done"] and durable.lines("outbox.txt") == []


def test_the_approval_covers_the_text_fed(durable) -> None:
    # The held command spells out the whole input: a person approves the text that will be sent, and a
    # resume runs only a command equal to it (the journal compares the command's text).
    durable.write("send.dal", SEND)
    first = durable.cli("run", "--require-approval", "tee", "send.dal")
    assert first.code == 3, first.err
    held = durable.latest()["effects"]["items"][-1]
    assert held["status"] == "pending_approval"
    assert held["command"] == "printf %s 'report: it'\"'\"'s done\n' | tee -a outbox.txt"
    assert held["command"] == fed_command(("tee", "-a", "outbox.txt"), "report: it's done\n")
    assert fed_command(("tee", "-a", "outbox.txt"), "report: it's done!\n") != held["command"]
    assert durable.cli("approve", "latest").code == 0
    assert durable.cli("resume", "latest").code == 0
    assert durable.lines("outbox.txt") == ["report: it's done"]


def test_a_denied_fed_effect_is_named_as_the_script_called_it(durable) -> None:
    durable.write("d.dal", 'write_file("../out.txt", "x")\nrun(["tee", "../t.txt"], {"input": "y"})\n')
    got = durable.run("run", "d.dal")
    assert 'warning[denied]: write_file("../out.txt", ...) was denied: writes outside the allowed roots' in got.err
    assert 'warning[denied]: run(["tee", "../t.txt"], {"input": ...}) was denied' in got.err
    assert "printf" not in got.err.split("help:")[0]  # not the shell text the script never wrote


def test_input_is_bounded_as_a_command_is_and_appending_in_parts_works(durable) -> None:
    # docs/language.md: the input and the command together are at most 256 KiB, the limit of one run().
    durable.write("big.dal", 'let part = "0123456789"\nfor i in range(13) { part = part + part }\n'
                  'print(write_file("big.txt", part + part + part + part).status)\nwrite_file("big.txt", part)\n'
                  'for i in range(3) { write_file("big.txt", part, {"append": true}) }\n'
                  'print(len(run(["cat", "big.txt"]).stdout))\n')
    got = durable.cli("run", "big.dal")
    assert got.out.splitlines() == ["denied", str(4 * 81920)], (got.out, got.err)
    assert "one run() takes at most 262144" in got.err
