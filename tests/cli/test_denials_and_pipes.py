"""Issue 15, points 1 and 2: a denied run() is said at once on stderr, and a closed pipe ends `dal` quietly."""

from __future__ import annotations

import json
import re
import shlex
import sqlite3

from dalshell import Shell


def test_a_denied_run_is_reported_at_once_with_place_reason_and_hint(dal: Shell) -> None:
    dal.write("s.dal", 'let r = run("ls notes/*.md")\nprint("after: " + r.status)\n')
    p = dal("run", "s.dal")
    assert p.returncode == 0 and p.stdout == "after: denied\n"
    err = p.stderr
    assert "warning[denied]: run(\"ls notes/*.md\") was denied: shell syntax not allowed: glob *" in err
    assert " --> s.dal:1:9" in err and "^^^^" in err
    assert "find notes -name '*.md'" in err  # the hint
    closing = err.strip().splitlines()[-1]
    assert closing.startswith("dal: completed") and "1 effect (1 denied)" in closing


def test_each_denial_is_reported_before_the_script_goes_on(dal: Shell) -> None:
    """The warning is on stderr when it happens, not at the end: the script's later output comes after it."""
    dal.write("s.dal", 'run("curl http://example.invalid")\nprint("between")\nrun("cat /etc/passwd")\n')
    p = dal.sh("dal run s.dal 2>&1")
    out = p.stdout
    first, between, second = (out.index("run(\"curl"), out.index("between"), out.index("run(\"cat /etc/passwd\")"))
    assert first < between < second
    assert "--allow-read=PATH" in out  # the reads-outside hint; curl's reason names its own remedy
    assert "2 effects (2 denied)" in out


def test_quiet_says_nothing_and_an_allowed_run_says_no_denials(dal: Shell) -> None:
    dal.write("s.dal", 'run("ls *")\n')
    assert dal("run", "-q", "s.dal").stderr == ""
    dal.write("ok.dal", 'run("true")\n')
    p = dal("run", "ok.dal")
    assert "denied" not in p.stderr and "· 1 effect ·" in p.stderr


def test_a_closed_pipe_ends_quietly_and_the_run_keeps_its_receipt(dal: Shell) -> None:
    dal.write("many.dal", "for i in range(0, 100000) {\n    print(i)\n}\n")
    p = dal.sh("dal run many.dal | head -2")
    assert p.stdout == "0\n1\n"
    assert p.stderr == ""  # no internal error, no traceback, nothing about Python
    assert p.returncode == 141  # 128 + SIGPIPE, as `seq 1 100000 | head -2` under pipefail
    shown = json.loads(dal("receipt", "show", "latest", "--json").stdout)
    assert shown["status"] == "interrupted" and "SIGPIPE" in shown["error"]["message"]
    with sqlite3.connect(dal.cwd / ".dal" / "dal.db") as db:
        assert db.execute("select count(*) from runs").fetchone()[0] == 1


def test_a_closed_pipe_on_a_listing_is_quiet_too(dal: Shell) -> None:
    dal.write("s.dal", 'print("x")\n')
    for _ in range(3):
        dal("run", "-q", "s.dal")
    p = dal.sh("dal receipts | head -1")
    assert p.stdout.startswith("RUN") and p.stderr == ""


def test_a_denied_argv_command_is_reported_too(dal: Shell) -> None:
    dal.write("s.dal", 'let r = run(["cat", "/etc/passwd"])\nprint(r.status)\n')
    p = dal("run", "s.dal")
    assert p.returncode == 0 and p.stdout == "denied\n"
    assert "warning[denied]: run(\"cat /etc/passwd\") was denied: reads outside the allowed roots" in p.stderr
    assert "1 effect (1 denied)" in p.stderr


def _followed(hint_line: str, path: str) -> str:
    """The --allow-write flag a hint gives, with PATH spelled out as a person following it would."""
    flag = re.search(r"--allow-write=(\S+?),? ", hint_line)
    assert flag is not None, hint_line
    return "--allow-write=" + shlex.split(flag.group(1))[0].replace("PATH", path)


def test_following_the_write_hint_allows_the_new_root_and_keeps_the_workspace(dal: Shell, tmp_path_factory) -> None:
    # The old hint said "add a write root with --allow-write=PATH": that flag replaces the workspace as the
    # write root at a run's start, so the workspace's own write was then denied.
    outside = tmp_path_factory.mktemp("outside")
    dal.write("w.dal", f'run("echo far > {outside}/far.txt")\nrun("echo near > near.txt")\n')
    first = dal("run", "w.dal")
    assert "1 denied" in first.stderr and (dal.cwd / "near.txt").exists()
    line = next(ln for ln in first.stderr.splitlines() if "help: writes are allowed" in ln)
    (dal.cwd / "near.txt").unlink()
    again = dal("run", _followed(line, str(outside)), "w.dal")
    assert "denied" not in again.stderr, again.stderr
    assert (outside / "far.txt").read_text() == "far\n" and (dal.cwd / "near.txt").read_text() == "near\n"


def test_the_write_hint_of_a_narrowed_run_names_its_roots(dal: Shell, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    dal.write("w.dal", f'run("echo far > {outside}/far.txt")\nrun("echo out > out/o.txt")\n')
    first = dal("run", "--allow-write=out", "w.dal")
    line = next(ln for ln in first.stderr.splitlines() if "help: writes are allowed" in ln)
    assert "writes are allowed only in out;" in line
    again = dal("run", _followed(line, str(outside)), "w.dal")
    assert "denied" not in again.stderr, again.stderr
    assert (outside / "far.txt").exists() and (dal.cwd / "out" / "o.txt").exists()


def test_a_script_running_dal_is_told_why_not_and_never_to_allow_it(dal: Shell) -> None:
    dal.write("inner.dal", 'print("inner")\n')
    dal.write("outer.dal", 'print(run("dal run inner.dal").status)\n')
    p = dal("run", "outer.dal")
    assert p.stdout == "denied\n"
    assert "a script does not run dal itself (it could decide its own approvals)" in p.stderr
    assert "--allow-run=dal" not in p.stderr
