"""A git command may not read the run store, the receipts or another file scripts never read into the
repository's objects (issue 12).

`git add -A` in a workspace whose `.dal/` holds the store wrote the store's bytes into `.git/objects`; the
guard put the index back, the blobs stayed, and a later `git cat-file --batch-all-objects --batch` copied
the store -- an env() secret an earlier run journaled -- into a workspace file. Now: DAL keeps `.dal/.gitignore`
(`*`), so git does not see the folder; the check denies a `git add` that would reach such a file git does not
ignore (a store or receipts kept elsewhere, a `.dal` folder without the file, --force, --pathspec-from-file);
and the guard removes the objects git wrote from one that it reached anyway.

Every case runs the real git through run(), with the wall and without it, then reads every object back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from effects_workspace import no_bwrap_prefix

from dal.core.gitignored import IGNORE_ALL, ignore_folder
from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.result import EffectResult

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
walled = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")
WALL_OR_NOT = pytest.mark.parametrize("wall", [
    pytest.param(True, marks=walled, id="wall"), pytest.param(False, id="no-wall (the test hook)")])

_ENV = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "op", "GIT_AUTHOR_EMAIL": "op@e", "GIT_COMMITTER_NAME": "op",
        "GIT_COMMITTER_EMAIL": "op@e", "LC_ALL": "C"}
SECRET = "tok-55120937"
NESTED = "tok-nested-4471"


def operator(ws: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    env = {**_ENV, "HOME": str(ws.parent)}
    return subprocess.run(["git", *cmd], cwd=ws, env=env, capture_output=True, text=True, timeout=60)


def workspace(tmp_path: Path, ignored: bool = True) -> Path:
    """A repository whose `.dal/dal.db` holds a secret (with DAL's `.gitignore` unless `ignored` is false)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for cmd in (("init", "-q", "-b", "main"), ("config", "user.name", "op"), ("config", "user.email", "op@e")):
        operator(ws, *cmd)
    (ws / "README").write_text("hello\n")
    (ws / "empty.txt").write_text("")
    operator(ws, "add", "README", "empty.txt")
    operator(ws, "commit", "-qm", "init")
    (ws / ".dal").mkdir()
    (ws / ".dal" / "dal.db").write_text(f"SQLite format 3 ... {SECRET} ...\n")
    if ignored:
        ignore_folder(ws / ".dal")
    return ws


def run(ws: Path, command: str, wall: bool, policy: Policy | None = None) -> EffectResult:
    kw = {} if wall else {"use_sandbox": False, "unsandboxed_as_root": True}
    policy = policy or Policy.load(ws, allow_run=["git"])
    return run_effect(command, EffectContext(policy=policy, **kw))  # type: ignore[arg-type]


def every_object(ws: Path) -> str:
    """What a later command of the script could read back: every object git holds."""
    out = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=ws, capture_output=True,
                         env={**_ENV, "HOME": str(ws.parent)}, timeout=60).stdout
    return out.decode("latin-1")


def test_dal_run_leaves_a_gitignore_in_the_store_folder(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    operator(ws, "init", "-q")
    (ws / "a.dal").write_text('run("echo hi")\n')
    r = subprocess.run([sys.executable, "-m", "dal", "run", "a.dal"], cwd=ws, capture_output=True, text=True,
                       env={**os.environ, "HOME": str(tmp_path)}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (ws / ".dal" / ".gitignore").read_bytes() == IGNORE_ALL
    operator(ws, "add", "-A")  # the operator's own git: the store is not seen
    assert operator(ws, "ls-files").stdout.split() == ["a.dal"]


@WALL_OR_NOT
@pytest.mark.parametrize("add", ["git add -A", "git add .", "git add --al", "git add -A :/", "git add '*'"])
def test_git_add_of_the_whole_tree_leaves_the_store_out(tmp_path: Path, wall: bool, add: str) -> None:
    ws = workspace(tmp_path)
    r = run(ws, add, wall)
    assert r.ok, (r.status, r.stderr, r.decision.reason)
    assert "README" in operator(ws, "ls-files").stdout
    assert not any(".dal" in p for p in operator(ws, "ls-files").stdout.split())
    r = run(ws, "git cat-file --batch-all-objects --batch", wall)
    assert r.ok and "hello" in r.stdout and SECRET not in r.stdout
    assert SECRET not in every_object(ws)


def test_without_the_gitignore_git_itself_reads_the_store(tmp_path: Path) -> None:
    """What the walls below stand in for: the operator's own `git add -A` of such a folder."""
    ws = workspace(tmp_path, ignored=False)
    operator(ws, "add", "-A")
    assert SECRET in every_object(ws)


@pytest.mark.parametrize(("command", "why"), [
    ("git add -f .", "--force"), ("git add --forc .", "--force"), ("git add -f -A", "a pattern with --force"),
    ("git add -f '*.db'", "a pattern with --force"), ("git add -f .dal/dal.db", "protected"),
    ("git add --pathspec-from-file=list", "cannot be checked"), ("git add -A --pathspec-fr=list", "cannot be checked"),
    ("git add .dal", "protected"),
])
@WALL_OR_NOT
def test_forms_that_would_add_ignored_files_are_denied(tmp_path: Path, wall: bool, command: str, why: str) -> None:
    ws = workspace(tmp_path)
    (ws / "list").write_text(".dal/dal.db\n")
    r = run(ws, command, wall)
    assert r.status == "denied" and why in r.decision.reason, (r.status, r.decision.reason)
    assert SECRET not in every_object(ws)


@WALL_OR_NOT
def test_a_store_kept_elsewhere_in_the_workspace(tmp_path: Path, wall: bool) -> None:
    """`--store st/dal.db --receipts rec`: no `.dal` folder, so no `.gitignore`: a `git add` that reaches
    them is denied; one that names other files is not."""
    ws = workspace(tmp_path)
    (ws / "st").mkdir()
    (ws / "st" / "dal.db").write_text(f"{SECRET}\n")
    (ws / "rec").mkdir()
    (ws / "rec" / "run_1.md").write_text(f"{SECRET}\n")
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("x = 1\n")
    policy = Policy.load(ws, allow_run=["git"]).hiding([ws / "st" / "dal.db", ws / "rec"])
    for command in ("git add -A", "git add .", "git add st", "git add rec", "git add ':(glob)**/*.md'"):
        r = run(ws, command, wall, policy)
        reason = r.decision.reason  # a folder named is itself a read scripts never make
        assert r.status == "denied" and any(w in reason for w in ("into the repository's objects", "never read",
                                                                  "in the index")), reason
    r = run(ws, "git add src README", wall, policy)
    assert r.ok, r.stderr
    assert SECRET not in every_object(ws)


@WALL_OR_NOT
def test_a_nested_store_without_the_gitignore(tmp_path: Path, wall: bool) -> None:
    """A nested workspace's `.dal` that no DAL has opened since it writes the file: `git add sub` is denied;
    `git add .` (the check looks only at `.dal` folders of the pathspec's folder and of the workspace) is
    undone after the command by the guard, which removes the object git wrote, and keeps the empty blob a
    tracked file shares with an empty file there. Inside the wall git sees no `.dal` at all."""
    ws = workspace(tmp_path)
    (ws / "sub" / ".dal").mkdir(parents=True)
    (ws / "sub" / ".dal" / "dal.db").write_text(f"{NESTED}\n")
    (ws / "sub" / ".dal" / "empty").write_text("")
    r = run(ws, "git add sub", wall)
    assert r.status == "denied" and "sub/.dal" in r.decision.reason, r.decision.reason
    r = run(ws, "git add .", wall)
    if not wall:
        assert r.status == "failed" and r.code == 126, (r.status, r.stderr)
        assert "sub/.dal/dal.db (protected)" in r.stderr and "removed the 1 object(s)" in r.stderr, r.stderr
    assert NESTED not in every_object(ws) and SECRET not in every_object(ws)
    assert not any(".dal" in p for p in operator(ws, "ls-files").stdout.split())
    assert operator(ws, "fsck", "--no-dangling").returncode == 0  # empty.txt's blob is still there
    assert operator(ws, "show", "HEAD:empty.txt").returncode == 0


@pytest.mark.parametrize("wall", [pytest.param(True, marks=walled, id="wall"), pytest.param(False, id="no-wall")])
def test_the_reproduction_end_to_end(tmp_path: Path, wall: bool) -> None:
    """End to end with `dal run`: an earlier run journals an env() secret; the script's `git add -A`, then
    `git cat-file --batch-all-objects --batch > loot.bin`."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for cmd in (("init", "-q", "-b", "main"), ("config", "user.name", "op"), ("config", "user.email", "op@e")):
        operator(ws, *cmd)
    (ws / "README").write_text("hello\n")
    operator(ws, "add", "README")
    operator(ws, "commit", "-qm", "init")
    dal = [sys.executable, "-m", "dal"]
    env = {**os.environ, "HOME": str(tmp_path), "API_TOKEN": SECRET}
    (ws / "op.dal").write_text('let t = env("API_TOKEN")\nrun("true")\n')
    r = subprocess.run([*dal, "run", "--allow-env", "API_TOKEN", "--key", "deploy", "op.dal"], cwd=ws, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (ws / ".dal" / ".gitignore").unlink()  # a store an older DAL made: this run's start writes it again
    (ws / "s.dal").write_text('run("git add -A")\nrun("git cat-file --batch-all-objects --batch > loot.bin")\n')
    prefix: list[str] = []
    flags: list[str] = []
    if not wall:
        got = no_bwrap_prefix(tmp_path)
        if got is None:
            pytest.skip("needs root and unshare to hide bubblewrap")
        prefix, flags = got, ["--unsandboxed-as-root"]
        env["DAL_WALL"] = "none"  # nor the Landlock wall
    env.pop("API_TOKEN")
    r = subprocess.run([*prefix, *dal, "run", *flags, "--allow-run=git", "--key", "attack", "s.dal"], cwd=ws,
                       env=env, capture_output=True, text=True, timeout=120)
    loot = (ws / "loot.bin").read_bytes() if (ws / "loot.bin").exists() else b""
    if not wall:  # without a wall git does not run at all (wall/kind.py)
        assert "git runs only inside a wall" in r.stdout + r.stderr and not (ws / "loot.bin").exists()
        return
    assert b"hello" in loot, r.stdout + r.stderr  # the cat-file ran
    assert SECRET.encode() not in loot
