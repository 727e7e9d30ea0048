"""git's abbreviated long options (issue 12), now that git runs only inside a wall
(issue 27) and its model no longer carries git's option tables.

git's parse-options takes any unambiguous prefix of a long option for it: `git stash push --al` is `--all` and
removed every untracked and ignored file, the run store with it; `git grep --untr` is `--untracked` and
searched `.dal/dal.db`. The model reads an abbreviation of a denied, path or value option as that option; one
of a flag it reads as given, and the wall holds what git then does: executed inside the wall next to the run
store and the policy, and denied where no wall can start.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from effects_workspace import no_bwrap_prefix

from dal.effects import EffectContext, Policy, run_effect, sandbox_status

walled = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap does not work here")
WALL_OR_NOT = pytest.mark.parametrize("wall", [pytest.param(True, marks=walled, id="wall"),
                                               pytest.param(False, id="no-wall")])


def _git(repo: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C"})  # fmt: skip


@pytest.mark.parametrize(("command", "why"), [
    ("git clone --upload=x u d", "names a program to run"),
    ("git commit --reedit=HEAD", "runs an editor"),
    ("git grep --open-files=less x", "pager"),
    ("git fetch --upl=x origin", "names a program to run"),
    ("git rebase --exe=sh", "runs a shell command"),
])  # fmt: skip
def test_an_abbreviation_of_a_denied_option_is_denied(tmp_path: Path, command: str, why: str) -> None:
    from dal.effects import check_command

    ws = tmp_path / "ws"
    ws.mkdir()
    _git(str(ws), "init", "-q")
    decision = check_command(command, Policy.load(ws, allow_run=["git"]))
    assert not decision.allowed and why in decision.reason, decision


# -- the attacks, executed --------------------------------------------------------------------------------

_ENV = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "op", "GIT_AUTHOR_EMAIL": "op@e", "GIT_COMMITTER_NAME": "op",
        "GIT_COMMITTER_EMAIL": "op@e", "LC_ALL": "C"}
SECRET = "tok-83620114"


def operator(ws: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    env = {**_ENV, "HOME": str(ws.parent)}
    return subprocess.run(["git", *cmd], cwd=ws, env=env, capture_output=True, text=True, timeout=60)


def workspace(tmp_path: Path) -> Path:
    """A repository with the operator's untracked policy, a run store holding a secret, a nested store."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for cmd in (("init", "-q", "-b", "main"), ("config", "user.name", "op"), ("config", "user.email", "op@e")):
        operator(ws, *cmd)
    (ws / "README").write_text("hello\n")
    operator(ws, "add", "README")
    operator(ws, "commit", "-qm", "init")
    (ws / "dal.toml").write_text('[run]\nallow = ["git"]\n')
    (ws / ".dal").mkdir()
    (ws / ".dal" / "dal.db").write_text(f"SQLite format 3 ... {SECRET} ...\n")
    (ws / "sub" / ".dal").mkdir(parents=True)
    (ws / "sub" / ".dal" / "dal.db").write_text("nested\n")
    return ws


def run(ws: Path, command: str, wall: bool, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Inside the wall, or where none can start (DAL_WALL=none: git is then denied)."""
    if wall:
        monkeypatch.delenv("DAL_WALL", raising=False)
    else:
        monkeypatch.setenv("DAL_WALL", "none")
    return run_effect(command, EffectContext(policy=Policy.load(ws, allow_run=["git"]), unsandboxed_as_root=True))


def intact(ws: Path) -> None:
    assert (ws / ".dal" / "dal.db").read_text().endswith(f"{SECRET} ...\n")
    assert (ws / "dal.toml").exists() and (ws / "sub" / ".dal" / "dal.db").exists()


@WALL_OR_NOT
@pytest.mark.parametrize("flags", ["--al", "--include-untr", "--a -q", "--all"])
def test_a_stash_of_untracked_files_under_any_spelling_leaves_the_store(tmp_path: Path, wall: bool, flags: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace(tmp_path)
    real = tmp_path / "real"
    shutil.copytree(ws, real, symlinks=True)
    operator(real, "stash", "push", *flags.split())  # git itself: the store and the policy are gone
    assert not (real / ".dal").exists() and not (real / "dal.toml").exists()
    r = run(ws, f"git stash push {flags}", wall, monkeypatch)
    assert wall or r.status == "denied", r
    intact(ws)


@WALL_OR_NOT
@pytest.mark.parametrize("command", ["git grep --untr -a -h -o -E 'tok-[0-9]+'",
                                     "git grep --no-ind -a -h -o -E 'tok-[0-9]+' ."])
def test_a_grep_of_untracked_files_under_any_spelling_does_not_print_the_store(
        tmp_path: Path, wall: bool, command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace(tmp_path)
    real = subprocess.run(shlex.split(command), cwd=ws, capture_output=True, text=True, env={**_ENV, "HOME": "/"})
    assert SECRET in real.stdout  # git itself reads the store
    r = run(ws, command, wall, monkeypatch)
    assert SECRET not in r.stdout + r.stderr
    assert wall or r.status == "denied", r


@pytest.mark.parametrize("wall", [pytest.param(True, marks=walled, id="wall"), pytest.param(False, id="no-wall")])
def test_dal_run_of_the_reproduction(tmp_path: Path, wall: bool) -> None:
    """End to end: `dal run` of `git stash push --al -q` with the real store of an earlier run."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for cmd in (("init", "-q", "-b", "main"), ("config", "user.name", "op"), ("config", "user.email", "op@e")):
        operator(ws, *cmd)
    (ws / "README").write_text("hello\n")
    operator(ws, "add", "README")
    operator(ws, "commit", "-qm", "init")
    dal = [sys.executable, "-m", "dal"]
    env = {**os.environ, "HOME": str(tmp_path)}
    (ws / "e.dal").write_text('run("echo earlier")\n')
    subprocess.run([*dal, "run", "--key", "earlier", "e.dal"], cwd=ws, env=env, capture_output=True, timeout=120)
    assert (ws / ".dal" / "dal.db").exists()
    (ws / "dal.toml").write_text('[run]\nallow = ["git"]\n')
    (ws / "s.dal").write_text('run("git stash push --al -q")\nrun("echo after")\n')
    prefix: list[str] = []
    flags = []
    if not wall:
        got = no_bwrap_prefix(tmp_path)
        if got is None:
            pytest.skip("needs root and unshare to hide bubblewrap")
        prefix, flags = got, ["--unsandboxed-as-root"]
    r = subprocess.run([*prefix, *dal, "run", *flags, "--key", "attack", "s.dal"], cwd=ws, env=env,
                       capture_output=True, text=True, timeout=120)
    assert (ws / ".dal" / "dal.db").exists() and (ws / "dal.toml").exists(), r.stdout + r.stderr
    listed = subprocess.run([*dal, "receipts"], cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    assert "earlier" in listed.stdout and "attack" in listed.stdout, listed.stdout
