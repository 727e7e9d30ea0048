"""`run([...])`: a command as a list of words (issue 16), executed through the real runner next to canaries,
inside the bubblewrap wall when this machine has it and with the wall turned off by the test hook.

The words are the argv the program receives: shell syntax in an element (`;`, `$(...)`, backquotes, globs,
newlines) is data, an element that looks like an option is analysed as the program will read it (the same
checker as the string form), a NUL is refused before anything starts, and the receipt shows the command as a
shell would quote it.
"""

from __future__ import annotations

import io
import json
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import dal
from dal.effects import Policy, check_argv, check_command, sandbox_status
from dal.runner.build import build_spec
from dal.runner.runner import execute
from dal.runner.spec import RunHooks

HAVE_WALL = sandbox_status()[0]
MODES = [pytest.param(True, id="walled", marks=pytest.mark.skipif(not HAVE_WALL, reason="no bubblewrap")),
         pytest.param(False, id="unwalled")]


@pytest.fixture()
def root() -> Iterator[Path]:
    # Not under /tmp: the wall gives commands a private /tmp, and the canaries must be the real files.
    top = Path(tempfile.mkdtemp(prefix="dal-argv-", dir="/var/tmp"))
    (top / "ws").mkdir()
    (top / "outside").mkdir()
    (top / "outside" / "canary.txt").write_text("CANARY\n")
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _run(root: Path, source: str, walled: bool, **kw: object) -> tuple[dict, str]:
    script = root / "ws" / "s.dal"
    script.write_text(source)
    buf = io.StringIO()
    spec = build_spec(script, workspace=root / "ws", use_sandbox=walled, unsandboxed_as_root=True, **kw)
    report = execute(spec, RunHooks(write=buf.write, handle_signals=False))
    if report.receipt["effects"]["count"] and report.receipt["sandbox"] is not None:
        assert report.receipt["sandbox"]["wall"] == ("bubblewrap" if walled else "none")  # the mode it claims
    return report.receipt, buf.getvalue()


def _untouched(root: Path) -> None:
    assert sorted(p.name for p in (root / "outside").iterdir()) == ["canary.txt"]
    assert (root / "outside" / "canary.txt").read_text() == "CANARY\n"
    for where in (root, root / "ws", root / "outside"):
        assert not list(where.glob("pwned*")), f"a marker appeared in {where}"


HOSTILE = ["; touch ../pwned1", "$(touch ../pwned2)", "`touch pwned3`", "*", "a\nb && touch pwned4", "-n",
           "|touch pwned5", "> pwned6", "'", '"', "\\", "~", "$HOME"]


@pytest.mark.parametrize("walled", MODES)
def test_shell_syntax_in_a_word_is_data(root: Path, walled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAL_ARGV_SECRET", "s3cr3t-value")  # in the DAL process's environment
    words = ["printf", "%s|", *HOSTILE, "$DAL_ARGV_SECRET", "${DAL_ARGV_SECRET}"]
    receipt, out = _run(root, f"print(run({json.dumps(words)}).stdout)\n", walled,
                        policy_flags={"allow_run": ["printf"]})
    assert receipt["status"] == "completed", receipt["error"]
    assert out == "|".join(words[2:]) + "|\n"  # each word arrived whole, as written
    assert "s3cr3t-value" not in out and "s3cr3t-value" not in json.dumps(receipt)
    item = receipt["effects"]["items"][0]
    assert item["command"] == shlex.join(words)
    assert shlex.split(item["command"]) == words  # the receipt quotes as a shell would
    _untouched(root)


@pytest.mark.parametrize("walled", MODES)
def test_a_glob_is_not_expanded_and_a_path_with_blanks_is_one_word(root: Path, walled: bool) -> None:
    ws = root / "ws"
    (ws / "my notes.txt").write_text("spaced\n")
    (ws / "-n").write_text("dashed\n")
    receipt, out = _run(root, 'print(run(["cat", "my notes.txt"]).stdout)\n'
                              'let g = run(["cat", "*.txt"])\nprint(g.status, contains(g.stderr, "No such file"))\n'
                              'print(run(["cat", "--", "-n"]).stdout)\n', walled)
    assert receipt["status"] == "completed", receipt["error"]
    assert out == "spaced\n\nfailed true\ndashed\n\n"
    _untouched(root)


@pytest.mark.parametrize("walled", MODES)
def test_an_option_in_a_word_is_checked_as_the_program_reads_it(root: Path, walled: bool) -> None:
    outside = root / "outside"
    (root / "ws" / "a.txt").write_text("A\n")
    receipt, out = _run(root, f'let r = run(["cp", "-t", {json.dumps(str(outside))}, "a.txt"])\nprint(r.status)\n'
                              f'let s = run(["cp", "--target-directory={outside}", "a.txt"])\nprint(s.status)\n'
                              f'let t = run(["cat", {json.dumps(str(outside / "canary.txt"))}])\nprint(t.status)\n',
                        walled)
    assert out == "denied\ndenied\ndenied\n"
    _untouched(root)


def test_the_words_get_the_same_decision_as_the_string_form(root: Path) -> None:
    ws = root / "ws"
    (ws / "docs").mkdir()
    (ws / "docs" / "a.txt").write_text("x")
    policy = Policy.load(ws, None, allow_run=["git"])
    cases = [["cat", "docs/a.txt"], ["rm", "-rf", "docs"], ["rm", "-rf", "/"], ["sh", "-c", "touch x"],
             ["/bin/cat", "docs/a.txt"], ["git", "push"], ["cp", "docs/a.txt", str(root / "outside")],
             ["ls", "-la", "docs"], ["mkdir", "-p", "out/deep"], ["cd", "docs"], ["python3", "-c", "1"]]
    for words in cases:
        a, s = check_argv(words, policy), check_command(shlex.join(words), policy)
        assert (a.allowed, a.reason, a.effect_class, a.idempotent, a.reads, a.writes, a.programs,
                a.approval_required) == (s.allowed, s.reason, s.effect_class, s.idempotent, s.reads, s.writes,
                                         s.programs, s.approval_required), words
        if a.allowed:  # both run the argv the check rebuilt, the same for either spelling
            assert [c.argv for c in a.plan.simple_commands()] == [c.argv for c in s.plan.simple_commands()]


@pytest.mark.parametrize("walled", MODES)
def test_a_nul_in_a_word_is_refused_and_nothing_starts(root: Path, walled: bool) -> None:
    receipt, out = _run(root, 'let r = run(["touch", "pwned\\u0000x"])\nprint(r.status, r.ok)\n', walled)
    assert out == "denied false\n"
    assert "NUL" in receipt["effects"]["items"][0]["reason"]
    _untouched(root)


def test_bad_lists_are_the_scripts_error_with_a_place(root: Path) -> None:
    receipt, _ = _run(root, 'let n = 3\nrun(["echo", n])\n', False)
    assert receipt["status"] == "failed"
    err = receipt["error"]
    assert err["kind"] == "type" and "element 1 is an integer" in err["message"] and err["line"] == 2
    receipt, _ = _run(root, 'run([])\n', False)
    assert receipt["status"] == "failed" and "empty list" in receipt["error"]["message"]
    receipt, _ = _run(root, 'run(3)\n', False)
    assert receipt["status"] == "failed" and "a list of strings" in receipt["error"]["message"]


def test_an_approved_word_list_runs_once_as_the_words(root: Path) -> None:
    # The approval and the resume go through the journal: the resumed run checks the words again (no
    # re-parse of the quoted text), and the file named with a quote and a `;` is created exactly once.
    ws = root / "ws"
    src = 'operation("argv-approval")\nlet r = run(["touch", "it\'s; done"])\nprint(r.status)\n'
    receipt, _ = _run(root, src, False, policy_flags={"require_approval": ["touch"]})
    assert receipt["status"] == "waiting"
    assert receipt["effects"]["items"][0]["command"] == "touch 'it'\"'\"'s; done'"
    dal.approve(receipt["run_id"], workspace=ws)
    again = dal.resume(receipt["run_id"], workspace=ws, unsandboxed_as_root=True)
    assert again.status == "completed", again.error
    assert (ws / "it's; done").is_file() and not (ws / "done").exists() and not (ws / "it's").exists()
    third = dal.run(ws / "s.dal", workspace=ws, unsandboxed_as_root=True)
    assert third.status == "skipped"
    _untouched(root)


@pytest.mark.parametrize("walled", MODES)
def test_a_word_list_cannot_reach_a_shell_or_a_program_by_path(root: Path, walled: bool) -> None:
    receipt, out = _run(root, 'print(run(["sh", "-c", "touch pwned1"]).status)\n'
                              'print(run(["/bin/sh", "-c", "touch pwned2"]).status)\n'
                              'print(run(["env", "touch", "pwned3"]).status)\n'
                              'print(run(["touch pwned4"]).status)\n'
                              'print(run(["find", ".", "-exec", "touch", "pwned5", ";"]).status)\n', walled)
    assert out == "denied\n" * 5, out
    _untouched(root)
