"""The hostile corpus, the check's layer (issue 27): every case decided in this one process, no DAL run, no
wall. The executed layers (test_hostile_corpus.py next to canaries; the wall alone with the check bypassed)
say what holds; this one says, in milliseconds a case, what the check decides and why, for every case of the
executed corpus and for the new techniques below: a word the program reads differently from the check (a
prefix, a cluster, a value taken for an option, an obsolete form), a pattern that hides a folder from the
check's walk, a probe of where a link leads.

For the executed corpus, a case's earlier commands really run (without the wall, in a scratch workspace)
when the check allows them, so that the attack is decided against the tree they leave.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import attrs
import pytest
from test_hostile_corpus import CASES, Case, _build

from dal.effects import EffectContext, Policy, execute_checked
from dal.effects.classify.check import check_command, find_program


def _policy(ws: Path, allow: tuple[str, ...] = ()) -> Policy:
    return Policy.load(ws, allow_run=list(allow))


def _decide(ws: Path, case: Case) -> tuple[list[str], str]:
    """Run the case's commands before its attack (those the check allows), then check the attack: (the
    statuses of the earlier commands, the attack's decision as 'allow: ...' or 'deny: ...')."""
    policy = _policy(ws, case.allow)
    os.symlink("/proc/self/environ", ws / "trap_proc" / "environ")
    if (ws / "p.patch").exists():
        (ws / "p.patch").write_text((ws / "p.patch").read_text().replace("{DALPID}", "self"))
    commands = [c.replace("{DALPID}", "self").replace("{WS}", str(ws)) for c in case.commands]
    statuses = []
    for cmd in commands[:-1]:
        d = check_command(cmd, policy)
        if d.allowed and not d.approval_required:
            statuses.append(execute_checked(cmd, d, EffectContext(policy, use_sandbox=False, timeout=10)).status)
        else:
            statuses.append("denied")
    d = check_command(commands[-1], policy)
    return statuses, ("allow: " if d.allowed else "deny: ") + d.reason


def _corpus() -> list:
    out = []
    for case in CASES:
        marks = [pytest.mark.skip(reason=f"{n} not installed") for n in case.allow if find_program(n) is None]
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The executed corpus's workspace and canaries before any case's own setup, built (git and all) once."""
    root = tmp_path_factory.mktemp("template")
    _build(root, Case("template", ()))
    return root


def _workspace(tmp_path: Path, template: Path, case: Case) -> Path:
    if not case.repo:
        return _build(tmp_path, case)
    root = tmp_path / "root"
    shutil.copytree(template, root, symlinks=True)
    ws = root / "ws"
    if case.setup is not None:
        case.setup(ws)
    return ws


@pytest.mark.parametrize("case", _corpus())
def test_the_check_decides_every_case_of_the_executed_corpus(tmp_path: Path, template: Path, case: Case) -> None:
    """A case the check must hold (no `wall` need, `denies`): the attack, or an earlier command it relies on,
    is denied. A case that needs the wall is decided without an error all the same."""
    if not case.commands:
        pytest.skip("no command: the case is a DAL script alone")
    ws = _workspace(tmp_path, template, case)
    statuses, decision = _decide(ws, case)
    if "wall" in case.needs or not case.denies:
        assert decision.startswith(("allow: ", "deny: ")) and "cannot analyse" not in decision, decision
        return
    assert decision.startswith("deny: ") or "denied" in statuses, f"{case.id}: {statuses} {decision}"
    assert "cannot analyse" not in decision, decision


@attrs.frozen
class Probe:
    """One command checked against the scratch workspace below: whether the check allows it, a fragment of
    its reason, and (for the default toolset) the argv the executor would run."""

    command: str
    allowed: bool
    why: str = ""
    runs: tuple[str, ...] | None = None
    allow: tuple[str, ...] = ()


# The new techniques, and the breaches issue 27 lists where the check has a part.
PROBES = [
    # A prefix the model would resolve one way and the program another: what runs is the full name.
    Probe("cp --t=out notes.txt", True, runs=("cp", "--target-directory=out", "--", "notes.txt")),
    Probe("cp --t ../outside notes.txt", False, "writes outside the allowed roots"),
    Probe("sort --o=x --temp=. notes.txt", True, runs=("sort", "--output=x", "--temporary-directory=.", "--",
                                                       "notes.txt")),  # fmt: skip
    Probe("sort --te ../outside notes.txt", False, "outside the allowed roots"),
    # A cluster whose last letter takes the next word; an option after an operand; a value like an option.
    Probe("sort -rno ../x notes.txt", False, "writes outside the allowed roots"),
    Probe("sort -rno x notes.txt", True, runs=("sort", "-r", "-n", "-ox", "--", "notes.txt")),
    Probe("cat notes.txt -A", True, runs=("cat", "-A", "--", "notes.txt")),
    Probe("grep -e --file=../outside/secret.txt notes.txt", True,
          runs=("grep", "-e--file=../outside/secret.txt", "--", "notes.txt")),
    Probe("grep -f ../outside/secret.txt notes.txt", False, "reads outside the allowed roots"),
    Probe("cut -d '' -f 1 notes.txt", True, runs=("cut", "-d", "", "-f1", "--", "notes.txt")),
    Probe("tee -- -a", True, runs=("tee", "--", "-a")),
    # Negations and last-one-wins where a decision depends on them.
    Probe("cp -r -L sub x", False, "follows symlinks"),
    Probe("cp -rP sub/deeper x", False, "symlink that points outside"),
    Probe("cp -rP docs x", True),
    Probe("cp -r -P -L sub x", False, "follows symlinks"),
    Probe("cp -b -S .toml notes.txt dal", False, "protected"),
    Probe("cp -S .toml --backup=none notes.txt dal", True),
    # The obsolete forms: read as the program reads them, and kept where it reads them.
    Probe("uniq +0 notes.txt dal.toml", False, "protected"),
    Probe("uniq -- +0 notes.txt", True, runs=("uniq", "--", "+0", "notes.txt")),
    Probe("tail +2 notes.txt", True, runs=("tail", "+2", "--", "notes.txt")),
    Probe("tail -2f notes.txt", False, "waits for ever"),
    Probe("sort +1 -2 -o x notes.txt", True, runs=("sort", "+1", "-2", "-ox", "--", "notes.txt")),
    Probe("head -2c notes.txt", True, runs=("head", "-2c", "--", "notes.txt")),
    # A pattern never hides a folder from the check; DAL's own folders are left out by name.
    Probe("grep -rn --exclude-dir=hard TODO .", True, runs=("grep", "-r", "-n", "--exclude-dir=hard",
                                                            "--exclude-dir=.dal", "--", "TODO", ".")),  # fmt: skip
    Probe("grep -rl --include='*.md' --exclude-dir=hard TODO .", True),
    Probe("grep -rn TODO docs sub", True, runs=("grep", "-r", "-n", "--exclude-dir=.dal", "--", "TODO", "docs",
                                                "sub")),  # fmt: skip
    Probe("grep -r --exclude-dir='[^.]ard' TOPSECRET .", False, "hard links"),
    Probe("grep -r --exclude-dir='h*' TOPSECRET .", False, "hard links"),
    Probe("grep -r --exclude-dir=hard TOPSECRET .", True),
    Probe("grep -a s3cr3t .dal/dal.db", False, "run store"),
    Probe("grep -r s3cr3t .dal", False, "run store"),
    Probe("diff -r --no-dereference docs .dal", False, "run store"),
    # Where a symlink leads outside is not told (the link is there; its target may exist or not).
    Probe("find . -xtype l", False, "leads outside"),
    Probe("find trap -readable", False, "leads outside"),
    Probe("find sub -readable", True),  # sub/deeper/secret.txt leads to ../../outside, inside the workspace
    Probe("find . -printf '%Y %p\\n'", False, "leads outside"),
    Probe("ls -lF trap", False, "leads outside"),
    Probe("ls --color=always trap", False, "leads outside"),
    Probe("find docs -xtype l", True),
    Probe("find . -type l -printf '%%Y %l\\n'", True),
    Probe("ls -l trap", True),
    # Reads and writes outside, through a link, into DAL's and git's files.
    Probe("cat trap/secret.txt", False, "reads outside the allowed roots"),
    Probe("cat trap_proc/environ", False, "environ"),
    Probe("touch .git/hooks/pre-commit", False, "protected"),
    Probe("mv notes.txt dal.toml", False, "protected"),
    Probe("rm -rf .", False, "the workspace itself"),
    Probe("date -s 2020-01-01", False, "sets the clock"),
    Probe("find . -delete", False, "deletes files"),
    Probe("find . -newerat ../outside/secret.txt", False, "unknown or unsupported primary"),
    # git reads `--no-X` after `--X` (and the reverse) as the last one given (issue 27).
    Probe("git apply --stat --no-stat p.patch", False, "protected", allow=("git",)),
    Probe("git apply --no-stat --stat p.patch", True, allow=("git",)),
    Probe("git rm --cached --no-cached dal.toml", True, allow=("git",)),  # git runs in the wall, which holds dal.toml
    Probe("git rm --no-cached --cached dal.toml", True, allow=("git",)),
    # curl and wget have no option model: the wall holds them, and the check says so (issue 27's shifts).
    Probe("curl --keepalive --stderr ../x http://example.com/", True, "only the wall keeps it", allow=("curl",)),
    Probe("wget --hsts -O ../x http://example.com/", True, "only the wall keeps it", allow=("wget",)),
    Probe("curl --unix-socket sub/daemon.sock http://example.com/", False, "connects to a socket", allow=("curl",)),
    # git, curl and wget: runs only inside a wall; what the check itself refuses early.
    Probe("curl -K ../outside/secret.txt http://example.com/", False, "-K", allow=("curl",)),
    Probe("git -c core.pager=sh log", False, "git -c", allow=("git",)),
]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The executed corpus's workspace (its links out, to /proc, a tracked policy), a run store holding a
    secret, a file with a hard link outside, read-only here: every probe only checks."""
    root = tmp_path_factory.mktemp("corpus")
    w = _build(root, Case("probes", ()))
    os.symlink("/proc/self/environ", w / "trap_proc" / "environ")
    (w / ".dal").mkdir()
    (w / ".dal" / "dal.db").write_text("TODO s3cr3t\n")
    (w / "hard").mkdir()
    os.link(root / "outside" / "secret.txt", w / "hard" / "secret.txt")
    (w / "out").mkdir()
    (w / "p.patch").write_text("--- a/dal.toml\n+++ b/dal.toml\n@@ -1 +1 @@\n-[run]\n+[run] # changed\n")
    return w


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.command)
def test_each_probe_is_decided_as_the_table_says(ws: Path, probe: Probe) -> None:
    if any(find_program(n) is None for n in probe.allow):
        pytest.skip(f"{', '.join(probe.allow)} not installed")
    d = check_command(probe.command, _policy(ws, probe.allow))
    assert d.allowed == probe.allowed and probe.why in d.reason, d.reason
    if probe.runs is not None:
        assert [c.argv for c in d.plan.simple_commands()] == [probe.runs]


def test_what_runs_reads_as_the_check_read_it(ws: Path) -> None:
    """The rebuilt argv, checked again, is the same decision and runs the same argv (the executor's recheck
    at start reads what runs, not what the script wrote)."""
    for probe in PROBES:
        if not probe.allowed or probe.allow:
            continue
        first = check_command(probe.command, _policy(ws))
        again = check_command(shlex.join(first.plan.simple_commands()[0].argv), _policy(ws))
        assert again.allowed and again.reads == first.reads and again.writes == first.writes, probe.command
        assert again.plan.simple_commands()[0].argv[: len(first.plan.simple_commands()[0].argv)] == \
            first.plan.simple_commands()[0].argv or "--exclude-dir=.dal" in again.plan.simple_commands()[0].argv


@pytest.mark.skipif(find_program("git") is None, reason="git not installed")
def test_a_read_root_is_for_reading_git_neither_pushes_nor_hard_links_there(tmp_path: Path) -> None:
    """Issue 27: `git push ../shared/up.git` wrote and deleted refs in a read root, and `git clone` from one
    hard-linked its objects into the workspace."""
    ws, shared = tmp_path / "ws", tmp_path / "shared"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", str(shared / "up.git")], check=True, capture_output=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True, capture_output=True)
    reading = Policy.load(ws, allow_run=["git"], allow_read=[str(shared)])
    for command, why in (("git push ../shared/up.git HEAD", "writes and deletes refs"),
                         ("git clone ../shared/up.git c", "hard-links its objects"),
                         ("git clone --no-hardlinks --hardlinks ../shared/up.git c", "")):  # the last one wins
        d = check_command(command, reading)
        assert not d.allowed and why in d.reason, (command, d.reason)
    for command in ("git clone --no-hardlinks ../shared/up.git c", f"git clone file://{shared}/up.git c",
                    "git fetch ../shared/up.git"):
        assert check_command(command, reading).allowed, command
    # In a write root neither rule applies (a repository whose hooks a script may write is refused anyway).
    writing = Policy.load(ws, allow_run=["git"], allow_write=[str(ws), str(shared)])
    for command in ("git push ../shared/up.git HEAD", "git clone ../shared/up.git c"):
        reason = check_command(command, writing).reason
        assert "writes and deletes refs" not in reason and "hard-links" not in reason, reason
