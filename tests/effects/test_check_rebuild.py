"""The default toolset cannot be shifted (issue 27): the executor runs the argv the check rebuilt -- every
option by its full name, values attached, `--` before the operands -- never the script's spelling, so a
word the program would read differently from the check (a prefix, a cluster, an option after an operand)
cannot move a path past it. Walks leave DAL's hidden folders out instead of refusing `grep -rn TODO .`, a
script's pattern never hides a path from the check, and a probe of where a symlink leads is not told.

The rebuilt argv is held to the real programs as the script's spelling is (test_effects_models.py): the
same files touched, the same output.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from test_effects_models import CASES, Watch, _covered, _model_paths, _setup

from dal.effects import EffectContext, Policy, execute_checked
from dal.effects.classify.check import check_command, find_program
from dal.effects.classify.programs import analyze_argv

_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


def _rebuilt(command: str, top: Path) -> tuple[str, ...]:
    use = analyze_argv(tuple(shlex.split(command)), lambda p: (top / p).is_dir())
    assert use is not None and use.unsafe is None and use.argv is not None, (command, use)
    return use.argv


def _run(argv: tuple[str, ...], top: Path) -> subprocess.CompletedProcess[bytes]:
    exe = find_program(argv[0])
    assert exe is not None
    return subprocess.run([exe, *argv[1:]], cwd=top, stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
                          env={**_ENV, "HOME": str(top)})  # fmt: skip


def _fresh(top: Path) -> None:
    if top.exists():
        shutil.rmtree(top)
    top.mkdir()
    _setup(top)
    for path in top.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))  # diff -u prints the times


def _shown(out: bytes) -> bytes:
    """diff repeats its options in the headers of a recursive comparison: `diff -- D/A E/A`."""
    return re.sub(rb"^diff (.*?)-- ", rb"diff \1", out, flags=re.M)


@pytest.mark.parametrize(("command", "reads", "writes"), CASES)
def test_the_rebuilt_argv_touches_what_the_model_says_and_prints_what_the_scripts_spelling_does(
    tmp_path: Path, command: str, reads: object, writes: object
) -> None:
    top = tmp_path / "s"
    _fresh(top)
    written = _run(tuple(command.split()), top)
    after = {p.name: p.read_bytes() for p in top.iterdir() if p.is_file()}
    _fresh(top)
    use = analyze_argv(tuple(command.split()), lambda p: (top / p).is_dir())
    assert use is not None and use.unsafe is None
    if use.argv is None:  # echo, test, find...: no options parsed, run as written
        assert command.split()[0] in ("test", "[", "find", "seq", "sleep", "echo", "printf", "true", "false"), command
        return
    argv = use.argv
    again = analyze_argv(argv, lambda p: (top / p).is_dir())
    assert again is not None and again.argv == argv, "rebuilding the rebuilt argv changes it"
    model_reads, model_writes, trees = _model_paths(again)
    assert (model_reads, model_writes) == _model_paths(use)[:2]
    watch = Watch(top)
    rebuilt = _run(argv, top)
    opened, changed = watch.events()
    for path in sorted(changed):
        assert _covered(path, model_writes, trees), f"{argv} changed {path}; the model writes {model_writes}"
    for path in sorted(opened - changed):
        assert _covered(path, model_reads | model_writes, trees), f"{argv} opened {path}"
    assert (rebuilt.returncode, _shown(rebuilt.stdout)) == (written.returncode, written.stdout), argv
    assert {p.name: p.read_bytes() for p in top.iterdir() if p.is_file()} == after, argv


@pytest.mark.parametrize(("command", "rebuilt"), [
    # A prefix of a long option: the program would take the full name, or another one the model lacks.
    ("cp --t=D A", ("cp", "--target-directory=D", "--", "A")),
    ("sort --out S A", ("sort", "--output=S", "--", "A")),
    # A cluster, a detached value, an option after an operand: one word each, before `--`.
    ("sort -ro S A", ("sort", "-r", "-oS", "--", "A")),
    ("cut -d '' -f1 A", ("cut", "-d", "", "-f1", "--", "A")),
    ("grep -e -x -- -r", ("grep", "-e-x", "--", "-r")),
    ("cat A -n", ("cat", "-n", "--", "A")),
    # The obsolete forms the program takes only before its options stay there.
    ("head -2c A", ("head", "-2c", "--", "A")),
    ("tail +3 A", ("tail", "+3", "--", "A")),
    ("sort -o S +1 -2 A", ("sort", "+1", "-2", "-oS", "--", "A")),
    ("uniq -c +2 -12 A", ("uniq", "+2", "-c", "-12", "--", "A")),
])  # fmt: skip
def test_each_option_is_spelled_in_full_with_its_value_attached(tmp_path: Path, command: str,
                                                                 rebuilt: tuple[str, ...]) -> None:
    assert _rebuilt(command, tmp_path) == rebuilt


def test_the_obsolete_forms_mean_the_same_rebuilt(tmp_path: Path) -> None:
    _setup(tmp_path)
    out = lambda cmd: _run(_rebuilt(cmd, tmp_path), tmp_path).stdout  # noqa: E731
    assert out("tail +3 A") == b"a\nc\n"
    assert out("head -2c A") == b"b\n"
    assert out("sort +1 -2 A") == out("sort -k2,2 A")
    _run(_rebuilt("uniq +0 A OUT", tmp_path), tmp_path)
    assert (tmp_path / "OUT").read_text() == "b\na\nc\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with a run store holding a secret, and a canary outside it."""
    w = tmp_path / "ws"
    (w / ".dal").mkdir(parents=True)
    (w / ".dal" / "dal.db").write_text("TODO s3cr3t-from-the-store\n")
    (w / "sub" / ".dal").mkdir(parents=True)
    (w / "sub" / ".dal" / "dal.db").write_text("TODO s3cr3t-nested\n")
    (w / "notes.md").write_text("TODO write the notes\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "canary.txt").write_text("TODO canary\n")
    return w


def _execute(command: str, ws: Path) -> tuple[str, str]:
    """Check `command` under the default policy and run it without the wall (the check alone holds)."""
    policy = Policy.default(ws)
    decision = check_command(command, policy)
    assert decision.allowed, decision.reason
    r = execute_checked(command, decision, EffectContext(policy, use_sandbox=False))
    return r.status, r.stdout


@pytest.mark.parametrize("command", ["grep -rn TODO .", "grep -rl --include='*.md' TODO .", "grep -r TODO",
                                     "grep -r --exclude-dir='[^.]dal' s3cr3t .", "grep -rn --exclude-dir='*' TODO ."])
def test_a_recursive_grep_runs_and_leaves_the_run_stores_out(ws: Path, command: str) -> None:
    status, out = _execute(command, ws)
    assert "s3cr3t" not in out
    if "s3cr3t" not in command and "'*'" not in command:
        assert status == "completed" and "notes.md" in out, out


def test_a_pattern_the_script_gives_never_hides_a_folder_from_the_check(ws: Path) -> None:
    """`[^.]dal` is `.dal` to Python's fnmatch and anything but to glibc: a walk that skipped by it missed
    what grep read. Only exact names are skipped; a hidden file the walk meets is still refused."""
    (ws / "keep").mkdir()
    os.link(ws.parent / "outside" / "canary.txt", ws / "keep" / "hard")  # below a folder a glob would skip
    for pattern in ("[^.]eep", "k*", "kee?", "k\\eep", "keep/"):
        d = check_command(f"grep -r --exclude-dir='{pattern}' x .", Policy.default(ws))
        assert not d.allowed and "hard links" in d.reason, (pattern, d.reason)
    assert check_command("grep -r --exclude-dir=keep x .", Policy.default(ws)).allowed


def test_a_store_kept_elsewhere_in_the_tree_is_left_out_by_its_name(ws: Path) -> None:
    records = ws / "records"
    records.mkdir()
    (records / "run.json").write_text("TODO s3cr3t-receipt\n")
    policy = Policy.default(ws).hiding([records])
    d = check_command("grep -rn TODO .", policy)
    assert d.allowed, d.reason
    argv = d.plan.simple_commands()[0].argv
    assert argv == ("grep", "-r", "-n", "--exclude-dir=.dal", "--exclude-dir=records", "--", "TODO", ".")
    r = execute_checked("grep -rn TODO .", d, EffectContext(policy, use_sandbox=False))
    assert "s3cr3t" not in r.stdout and "notes.md" in r.stdout


def test_diff_of_two_trees_leaves_the_run_stores_out(ws: Path) -> None:
    other = ws / "other"
    (other / ".dal").mkdir(parents=True)
    (other / ".dal" / "dal.db").write_text("different\n")
    (ws / "mine" / ".dal").mkdir(parents=True)
    (ws / "mine" / ".dal" / "dal.db").write_text("TODO s3cr3t-from-the-store\n")
    status, out = _execute("diff -r --no-dereference mine other", ws)
    assert "s3cr3t" not in out and "different" not in out


@pytest.mark.parametrize("command", ["find . -xtype l", "find . -xtype f", "find . -readable", "find sub -executable",
                                     "find . -printf '%p %Y\\n'", "ls -lF sub", "ls -l --indicator-style=slash sub",
                                     "ls --color=always sub", "ls -lRF"])
def test_where_a_symlink_leads_outside_is_not_told(ws: Path, command: str) -> None:
    """A link to a path outside (there or not) must get the same answer: a denial, before anything runs."""
    (ws / "sub" / "there").symlink_to(ws.parent / "outside" / "canary.txt")
    (ws / "sub" / "gone").symlink_to(ws.parent / "outside" / "nothing-here")
    d = check_command(command, Policy.default(ws))
    assert not d.allowed and "leads outside the allowed roots" in d.reason, d.reason
    (ws / "sub" / "there").unlink()
    d = check_command(command, Policy.default(ws))
    assert not d.allowed and "leads outside the allowed roots" in d.reason, d.reason


@pytest.mark.parametrize("command", ["find . -xtype l", "find . -printf '%%Y %p\\n'", "ls -lF sub", "ls -l sub",
                                     "find . -type l", "ls -F sub"])
def test_links_inside_and_commands_that_do_not_follow_them_stay_allowed(ws: Path, command: str) -> None:
    (ws / "sub" / "in").symlink_to("../notes.md")
    (ws / "sub" / "dangling").symlink_to("missing")
    if "xtype" in command or "%%" in command or "-lF" in command:
        assert check_command(command, Policy.default(ws)).allowed
    (ws / "sub" / "out").symlink_to(ws.parent / "outside" / "canary.txt")
    if "xtype" not in command and "-lF" not in command:
        assert check_command(command, Policy.default(ws)).allowed, command


def test_dal_policy_check_shows_what_runs(ws: Path) -> None:
    import json
    import subprocess
    import sys

    cmd = "grep -rn TODO . > out.txt 2>&1 && sort --o=x -r notes.md | tee -a log; cat <notes.md"
    r = subprocess.run([sys.executable, "-m", "dal", "policy", "check", cmd], cwd=ws, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    shown = ("grep -r -n --exclude-dir=.dal -- TODO . >out.txt 2>&1 && sort --output=x -r -- notes.md "
             "| tee -a -- log; cat -- <notes.md")
    assert f"  runs:       {shown}" in r.stdout.splitlines(), r.stdout
    r = subprocess.run([sys.executable, "-m", "dal", "policy", "check", "--json", cmd], cwd=ws, capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    assert json.loads(r.stdout)["runs"] == shown
