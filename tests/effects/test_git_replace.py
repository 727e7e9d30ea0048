"""A ref under refs/replace/ makes every git the operator runs show another object in place of the one it
names: a blob of the script's for a tracked `sub/dal.toml`, which `git show` prints and a routine `git checkout`
writes into the work tree. The git model denies a push or fetch that stores a ref outside
refs/heads, refs/tags and refs/remotes; the git guard fails closed on any change to refs/replace/ and on a new
ref naming neither a commit nor a tree, however it was made (gitguard.py, gitmodel.py).

Each route is EXECUTED through run(); then the operator's own git, outside any wall, must show and check out
the operator's policy, and a later `dal run` in `sub/` must not run sh.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from test_git_guard import WALL_OR_NOT, hook, operator, repo, run, sh

from dal.effects.exec import executor

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git not installed")

POLICY = "[run]\n"
EVIL = '[run]\nallow = ["sh"]\n'


@pytest.fixture(autouse=True)
def _git_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in test_git_guard.py: `sh` stands in for what git itself may write, under the wall git alone gets."""
    monkeypatch.setattr(executor, "locks_git", lambda pipeline: False)


def tracked_policy(tmp_path: Path) -> tuple[Path, str, str]:
    """The operator's repository with a tracked sub/dal.toml; (workspace, its blob, the script's blob)."""
    ws, _ = repo(tmp_path)
    (ws / "sub").mkdir()
    (ws / "sub" / "dal.toml").write_text(POLICY)
    operator(ws, "add", "sub/dal.toml")
    operator(ws, "commit", "-qm", "policy")
    (ws / "evil.txt").write_text(EVIL)
    evil = operator(ws, "hash-object", "-w", "evil.txt").stdout.strip()
    return ws, operator(ws, "rev-parse", "HEAD:sub/dal.toml").stdout.strip(), evil


def assert_the_operators_git_shows_the_policy(ws: Path) -> None:
    assert operator(ws, "for-each-ref", "refs/replace/").stdout == ""
    assert operator(ws, "show", "HEAD:sub/dal.toml").stdout == POLICY
    operator(ws, "checkout", "-q", "HEAD~1")
    operator(ws, "checkout", "-q", "main")
    assert (ws / "sub" / "dal.toml").read_text() == POLICY


def test_the_replace_ref_would_swap_the_tracked_policy(tmp_path: Path) -> None:
    """What the checks below hold against, run by the operator's own git: the script's text comes out."""
    ws, old, evil = tracked_policy(tmp_path)
    operator(ws, "push", "-q", ".", f"{evil}:refs/replace/{old}")
    assert operator(ws, "show", "HEAD:sub/dal.toml").stdout == EVIL


@WALL_OR_NOT
@pytest.mark.parametrize("refspec", ["{evil}:refs/replace/{old}", "+{evil}:refs//replace/{old}",
                                     "{evil}:refs/notes/x", "refs/tags/blob:refs/replace/{old}"])
def test_a_push_to_refs_replace_is_put_back(tmp_path: Path, wall: bool, refspec: str) -> None:
    """The check no longer reads refspecs (issue 27): a replace ref fails the command and is put back by the
    guard (git itself refuses `refs//replace`); a new ref under refs/notes/ naming the script's blob fails
    closed and is put back too (the guard lets a command make refs to commits and trees only)."""
    ws, old, evil = tracked_policy(tmp_path)
    operator(ws, "tag", "blob", evil)  # the operator's: a tag naming the script's blob
    r = run(ws, "git push -q . " + shlex.quote(refspec.format(evil=evil, old=old)), **hook(wall))
    assert r.status == "failed" and r.code in (126, 128), r
    if "notes" in refspec:
        assert r.code == 126 and "a blob: DAL lets a command make refs to commits and trees only" in r.stderr, r
    assert operator(ws, "for-each-ref", "refs/notes/").stdout == ""
    assert_the_operators_git_shows_the_policy(ws)


@WALL_OR_NOT
def test_a_fetch_or_a_refmap_into_refs_replace_is_put_back(tmp_path: Path, wall: bool) -> None:
    ws, old, evil = tracked_policy(tmp_path)
    operator(ws, "tag", "blob", evil)
    for command in (f"git fetch -q . refs/tags/blob:refs/replace/{old}",
                    f"git fetch -q --refmap=refs/tags/blob:refs/replace/{old} . refs/tags/blob",
                    f"git pull -q . refs/tags/blob:refs/replace/{old}"):
        r = run(ws, command, **hook(wall))
        assert r.status == "failed" and "a replace ref" in r.stderr, (command, r.summary)
        assert_the_operators_git_shows_the_policy(ws)
    for command, why in (("git remote add --mirror=fetch m .", "refs/replace/ among them"),
                         ("git remote add --mirr=fetch m .", "refs/replace/ among them"),
                         ("git fetch --stdin .", "reads refspecs from standard input")):
        r = run(ws, command, **hook(wall))
        assert r.status == "denied" and why in r.summary, (command, r.summary)
    assert_the_operators_git_shows_the_policy(ws)


@WALL_OR_NOT
def test_a_replace_ref_made_any_way_is_put_back(tmp_path: Path, wall: bool) -> None:
    """The guard, whatever wrote the ref (`sh` stands in for a git the model did not see): the ref goes, the
    command fails naming it, and a later run in sub/ is not widened."""
    ws, old, evil = tracked_policy(tmp_path)
    r = sh(ws, f"git push -q . {evil}:refs/replace/{old}", **hook(wall))
    assert r.status == "failed" and r.code == 126, r
    assert f"refs/replace/{old} (a replace ref" in r.stderr.splitlines()[0], r.stderr
    assert_the_operators_git_shows_the_policy(ws)
    # packed, and a commit replacing a commit: the same
    operator(ws, "pack-refs", "--all")
    r = sh(ws, f"git replace -f HEAD HEAD~1 && git pack-refs --all && git push -q . {evil}:refs/replace/{old}",
           **hook(wall))
    assert r.code == 126 and "a replace ref" in r.stderr, r
    assert_the_operators_git_shows_the_policy(ws)
    assert "policy" in operator(ws, "log", "-1", "--format=%s").stdout


@WALL_OR_NOT
def test_an_operators_replace_ref_the_script_changes_is_put_back(tmp_path: Path, wall: bool) -> None:
    ws, old, evil = tracked_policy(tmp_path)
    operator(ws, "replace", "HEAD~1", "HEAD")  # the operator's own, unrelated
    before = operator(ws, "for-each-ref", "refs/replace/").stdout
    r = sh(ws, f"git push -q -f . {evil}:refs/replace/{old} && git replace -d $(git rev-parse HEAD~1)",
           **hook(wall))
    assert r.code == 126 and "a replace ref" in r.stderr, r
    assert operator(ws, "for-each-ref", "refs/replace/").stdout == before
    assert operator(ws, "--no-replace-objects", "show", "HEAD:sub/dal.toml").stdout == POLICY


@WALL_OR_NOT
def test_a_new_ref_naming_a_blob_fails_closed(tmp_path: Path, wall: bool) -> None:
    """`git tag x BLOB` (allowed by the model): nothing a person's git checks out, nothing the guard lists."""
    ws, _, evil = tracked_policy(tmp_path)
    r = run(ws, f"git tag evil {evil}", **hook(wall))
    assert r.code == 126 and "a blob: DAL lets a command make refs to commits and trees only" in r.stderr, r
    assert operator(ws, "tag").stdout == ""
    assert run(ws, "git tag v1", **hook(wall)).ok  # a tag of a commit is kept
    assert operator(ws, "tag").stdout == "v1\n"


def test_the_script_is_not_widened_by_a_later_run(tmp_path: Path) -> None:
    """Finding 05 end to end, with the wall off: the guard fails the push, and `cd sub && dal run` stays
    narrow."""
    import subprocess
    import sys

    ws, old, evil = tracked_policy(tmp_path)
    r = run(ws, f"git push -q . {evil}:refs/replace/{old}", **hook(False))
    assert r.status == "failed" and r.code == 126, r
    operator(ws, "checkout", "-q", "HEAD~1")
    operator(ws, "checkout", "-q", "main")
    script = tmp_path / "later.dal"
    script.write_text("print(run(\"sh -c 'echo ran > pwned.txt'\"))\n")
    subprocess.run([sys.executable, "-m", "dal", "run", "--unsandboxed-as-root", str(script)], cwd=ws / "sub",
                   capture_output=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert not (ws / "sub" / "pwned.txt").exists()
