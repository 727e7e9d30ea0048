"""The durability attacker's message findings (12a, b, d, e): every `next:` is a move that works, and a line
names what it is about."""

from __future__ import annotations

import json
import re

from dalshell import Shell

LOOP = 'for i in range(5) { run("printf x >> a.log") }\nlet x = 0\nfor i in range(100) { x = x + 1 }\n'


def test_an_exhausted_run_names_the_resume_that_works_and_it_works(dal: Shell) -> None:
    dal.write("s.dal", LOOP)
    p = dal("run", "--max-steps", "200", "s.dal")
    assert p.returncode == 4
    move = re.search(r"`(dal resume \S+ --max-steps) N`", p.stderr)
    assert move, p.stderr
    again = dal(*move.group(1).split()[1:], "5000")
    assert again.returncode == 0, again.stderr
    assert (dal.cwd / "a.log").read_text() == "xxxxx"  # continued from the journal: nothing ran twice


def test_a_divergence_at_the_end_names_no_0_0_location(dal: Shell) -> None:
    # The retry's script ends before the append the failed attempt journaled (a retry replays the read
    # that decided an append, so only a changed script can end early now).
    dal.write("s.dal", 'run("printf x >> a.log")\nfail("x")\n')
    dal("run", "--key", "k", "s.dal")
    dal.write("s.dal", 'print("done")\n')
    p = dal("run", "--key", "k", "s.dal")
    assert "error[divergence]" in p.stderr, p.stderr
    nxt = next(line for line in p.stderr.splitlines() if line.startswith("dal: next:"))
    assert ":0:0" not in nxt and "journal at s.dal " in nxt


def test_resume_of_a_moved_script_names_the_ways_forward(dal: Shell) -> None:
    dal.write("s.dal", 'run("printf x >> a.log")\nrun("echo s | tee -a outbox.txt")\n')
    assert dal("run", "--require-approval=tee", "s.dal").returncode == 3
    (dal.cwd / "s.dal").rename(dal.cwd / "moved.dal")
    assert dal("approve", "latest").returncode == 0
    p = dal("resume", "latest")
    assert p.returncode == 2 and "which is no longer there" in p.stderr and "Put the script back" in p.stderr
    (dal.cwd / "moved.dal").rename(dal.cwd / "s.dal")
    assert dal("resume", "latest").returncode == 0
    assert (dal.cwd / "outbox.txt").read_text() == "s\n" and (dal.cwd / "a.log").read_text() == "x"


def test_a_run_in_another_store_says_so_in_its_closing_line(dal: Shell) -> None:
    dal.write("s.dal", 'print("x")\n')
    p = dal("run", "--store", "other.db", "s.dal")
    assert p.returncode == 0 and f"· store {dal.cwd}/other.db" in p.stderr.splitlines()[-1]
    env = dal("run", "s.dal", env={"DAL_STORE": str(dal.cwd / "env.db")})
    assert "($DAL_STORE)" in env.stderr.splitlines()[-1]
    plain = dal("run", "s.dal")
    assert "· store" not in plain.stderr
    assert json.loads(dal("receipts", "--json").stdout)["runs"][0]["status"] == "completed"


def test_check_warns_about_now_and_env_read_before_operation(dal: Shell) -> None:
    # A value read before operation("K") is not replayed on resume, so the
    # operation stops with a divergence; dal check says so at the read, and --key is the way out.
    dal.write("s.dal", 'let t = now()\noperation("K")\nrun("printf \'at " + str(t) + "\\n\' >> a.log")\n'
              'run("echo sent | tee -a outbox.txt")\n')
    dal.write("fine.dal", 'fn stamp() { return now() }\noperation("K")\nlet t = now()\nprint(stamp(), env("HOME"))\n')
    check = dal("check", "s.dal", "fine.dal")
    assert check.returncode == 0 and check.stderr.count("warning[read-before-operation]") == 1
    assert "`now()` is read before operation()" in check.stderr and "--> s.dal:1:9" in check.stderr
    assert "fine.dal: ok\n" in check.stderr
    # the limit the warning names, executed: the resumed run diverges at effect 1 and sends nothing
    assert dal("run", "--require-approval=tee", "s.dal").returncode == 3
    assert dal("approve", "K").returncode == 0
    resumed = dal("run", "--require-approval=tee", "s.dal")
    assert "error[divergence]" in resumed.stderr and not (dal.cwd / "outbox.txt").exists()
