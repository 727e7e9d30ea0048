"""What a retry (the attempt after a failed or exhausted one) runs again and what it replays.

A retry replays everything up to the last journaled effect that must not run twice (an append, a send,
anything a person decided) and runs reads and idempotent writes again only after it: run again before it,
an idempotent write undoes what the replayed append did, and a read sees the operation's own effect and
takes the other path. A retry that takes another path may drop what it no longer asks for when nothing
there must not run twice, at the end of the script too; a retry that was interrupted is continued as a
retry; a retry reads env() again; and a person may say to run again a failed effect the journal replays.
Each test counts what the effects did in the files they write."""

from __future__ import annotations

import pytest


def _two_attempts(d, script: str, *, fix: str = "ready") -> None:
    d.write("s.dal", script)
    first = d.cli("run", "--key", "k", "s.dal")
    assert first.code == 1, first  # the read that comes last fails the first attempt
    d.write(fix, "")
    again = d.cli("run", "--key", "k", "s.dal")
    assert again.code == 0, again
    assert d.latest()["status"] == "completed"


WRITE_THEN_APPEND = {
    "> file": ('run("echo header > report.txt")\nrun("echo line >> report.txt")\n', "report.txt",
               ["header", "line"]),
    "cp": ('run("cp tpl.txt out.txt")\nrun("printf \'appended\\\\n\' >> out.txt")\n', "out.txt",
           ["template", "appended"]),
    "rm -f": ('run("rm -f sent.log")\nrun("printf \'sent 1\\\\n\' >> sent.log")\n', "sent.log", ["sent 1"]),
}


@pytest.mark.parametrize("case", sorted(WRITE_THEN_APPEND))
def test_a_retry_does_not_run_again_a_write_that_a_replayed_append_came_after(durable, case) -> None:
    d = durable
    head, name, want = WRITE_THEN_APPEND[case]
    d.write("tpl.txt", "template\n")
    _two_attempts(d, head + 'let r = run("test -f ready")\nif not r.ok { fail("not ready") }\nfinish("ok")\n')
    assert d.lines(name) == want  # the append's line is still there, once
    items = d.latest()["effects"]["items"]
    assert [i["replayed"] for i in items] == [True, True, False]  # the read after the append ran again
    d.check_store()


def test_check_then_act_completes_on_retry(durable) -> None:
    """The read before a send decided it: replayed, it does not see the send and diverge."""
    d = durable
    d.write("outbox.txt", "")
    _two_attempts(d, 'let c = run("grep -c msg1 outbox.txt")\n'
                     'if trim(c.stdout) == "0" { run("echo msg1 | tee -a outbox.txt") }\n'
                     'let r = run("test -f ready")\nif not r.ok { fail("not ready") }\nfinish("done")\n')
    assert d.lines("outbox.txt") == ["msg1"]
    assert d.cli("run", "--key", "k", "s.dal").code == 0 and d.latest()["status"] == "skipped"


def test_a_retry_that_ends_before_a_denied_command_it_no_longer_asks_for_completes(durable) -> None:
    d = durable
    d.write("mode", "A\n")
    d.write("s.dal", 'run("printf \'x\\\\n\' >> log.txt")\nlet m = run("cat mode")\nif m.stdout == "A\\n" {\n'
                     '  let r = run("curl -s https://example.com/hook")\n  if not r.ok { fail("hook not allowed") }\n'
                     '}\nfinish("done")\n')
    first = d.cli("run", "--key", "k", "s.dal")
    assert first.code == 1 and d.latest()["effects"]["items"][-1]["status"] == "denied", first
    d.write("mode", "B\n")  # path B needs no hook
    again = d.cli("run", "--key", "k", "s.dal")
    assert again.code == 0, again
    assert d.lines("log.txt") == ["x"]
    assert d.cli("run", "--key", "k", "s.dal").code == 0 and d.latest()["status"] == "skipped"


INTERRUPTED_RETRY = """\
run("printf 'a0\\n' >> a.log")
let m = run("cat mode")
if trim(m.stdout) == "A" {
  run("cp a.log copyA.txt")
  let r = run("test -f readyA")
  if not r.ok { fail("not ready") }
}
run("printf 'a1\\n' >> a.log")
finish("ok")
"""


@pytest.mark.parametrize("how", ["kill -9", "store fault"])
def test_an_interrupted_retry_is_continued_as_a_retry(durable, monkeypatch, how) -> None:
    """A retry that ran the read again (path B) and stopped before it journaled anything else: the next
    invocation continues it as a retry, not as a resume that would replay path A's entries after it."""
    d = durable
    d.write("mode", "A\n")
    d.write("s.dal", INTERRUPTED_RETRY)
    assert d.cli("run", "--key", "k", "s.dal").code == 1  # not ready
    d.write("mode", "B\n")
    if how == "kill -9":
        stopped = d.run("run", "--key", "k", "s.dal", DAL_TEST_CRASH_AT="after-result:2")
        assert stopped.code == -9 or stopped.code == 137, stopped
    else:
        monkeypatch.setenv("DAL_TEST_STORE_FAULT", "full:4+")  # begin, the cat's intent and result; then no more
        stopped = d.cli("run", "--key", "k", "s.dal")
        monkeypatch.delenv("DAL_TEST_STORE_FAULT")
        assert stopped.code == 2, stopped
    assert d.lines("a.log") == ["a0"]
    going = d.cli("run", "--key", "k", "s.dal")
    assert going.code == 0, going
    assert d.lines("a.log") == ["a0", "a1"]
    d.check_store()


def test_a_failed_append_runs_again_once_a_person_says_so(durable) -> None:
    """A non-idempotent effect that failed (its folder did not exist) is replayed as failed by every
    retry; `dal resolve --as retry`, the person's call, runs it again, once."""
    d = durable
    d.write("s.dal", 'run("printf \'a0\\\\n\' >> a.log")\nlet r = run("printf \'entry\\\\n\' >> out/journal.txt")\n'
                     'if not r.ok { fail("could not write the journal entry") }\nrun("printf \'a1\\\\n\' >> a.log")\n')
    assert d.cli("run", "--key", "k", "s.dal").code == 1
    (d.ws / "out").mkdir()  # the operator fixes the cause
    same = d.cli("run", "--key", "k", "s.dal")
    assert same.code == 1, same  # replayed as failed: it must not run twice without a person
    failed = d.latest()
    rid = failed["run_id"]
    assert not (d.ws / "out" / "journal.txt").exists()
    nxt = d.cli("receipt", "show", rid).out.strip().splitlines()[-1]
    assert f"`dal resolve {rid} --effect 2 --as retry`" in nxt, nxt
    resolved = d.cli("resolve", rid, "--effect", "2", "--as", "retry")
    assert resolved.code == 0, resolved
    assert d.cli("resolve", rid, "--effect", "1", "--as", "retry").code == 2  # completed: not in question
    done = d.cli("resume", rid)
    assert done.code == 0, done
    assert d.lines("out/journal.txt") == ["entry"]
    assert d.lines("a.log") == ["a0", "a1"]
    assert d.cli("run", "--key", "k", "s.dal").code == 0 and d.latest()["status"] == "skipped"
    assert d.lines("out/journal.txt") == ["entry"]
    d.check_store()


def test_a_retry_reads_the_environment_again(durable, monkeypatch) -> None:
    """A configuration the operator fixed after the failure reaches the operation."""
    d = durable
    (d.ws / "out").mkdir()
    d.write("s.dal", 'let target = env("TARGET")\nrun("printf \'a0\\\\n\' >> a.log")\n'
                     'let r = run("test -d " + target)\nif not r.ok { fail("no such target folder: " + target) }\n'
                     'run("printf \'report\\\\n\' >> " + target + "/report.txt")\n')
    monkeypatch.setenv("TARGET", "outt")  # a typo in the configuration
    first = d.cli("run", "--key", "k", "--allow-env=TARGET", "s.dal")
    assert first.code == 1 and "no such target folder: outt" in first.err, first
    monkeypatch.setenv("TARGET", "out")
    fixed = d.cli("run", "--key", "k", "--allow-env=TARGET", "s.dal")
    assert fixed.code == 0, fixed
    assert d.lines("a.log") == ["a0"]
    assert d.lines("out/report.txt") == ["report"]
