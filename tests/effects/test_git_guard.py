"""A commit, the stash or the index that records a folder passing for a git directory, a `.git` component or a
protected path must not survive the command (dal/effects/guard/gitguard.py; issue 12).

Every route is EXECUTED through run() as a script would, next to a marker the planted core.fsmonitor would
create; then the operator's own routine git -- `git reset --hard`, `git checkout -- .`, `git stash pop`,
`git switch`, `git status` -- runs OUTSIDE any wall, and nothing planted may come back or run.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

import dal.effects.guard.gitguard as gitguard
from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.result import EffectResult

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
walled = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")

_ENV = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "op", "GIT_AUTHOR_EMAIL": "op@e", "GIT_COMMITTER_NAME": "op",
        "GIT_COMMITTER_EMAIL": "op@e", "LC_ALL": "C"}


@pytest.fixture(autouse=True)
def _git_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sh` below stands in for what git itself may write: with `sh` in the pipeline the wall shows `.git`
    read-only as a whole (executor.locks_git; test_wall.py::test_sh_cannot_write_anything_of_git), so these
    routes would fail at their first write. The guard is tested against the wall git alone gets."""
    from dal.effects.exec import executor

    monkeypatch.setattr(executor, "locks_git", lambda pipeline: False)


def operator(ws: Path, *cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The operator's own git, outside DAL and any wall, with a HOME of its own."""
    env = {**_ENV, "HOME": str(ws.parent)}
    return subprocess.run(["git", *cmd], cwd=cwd or ws, env=env, capture_output=True, text=True, timeout=60)


def repo(tmp_path: Path) -> tuple[Path, Path]:
    """The operator's repository (the workspace) and the marker path the script's fsmonitor would create."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for cmd in (("init", "-q", "-b", "main"), ("config", "user.name", "op"), ("config", "user.email", "op@e")):
        operator(ws, *cmd)
    (ws / "README").write_text("hello\n")
    (ws / ".gitignore").write_text(".dal/\n")
    operator(ws, "add", "README", ".gitignore")
    operator(ws, "commit", "-qm", "init")
    return ws, tmp_path / "MARKER"


def run(ws: Path, command: str, allow: tuple[str, ...] = ("git",), **kw: object) -> EffectResult:
    return run_effect(command, EffectContext(policy=Policy.load(ws, allow_run=list(allow)), **kw))  # type: ignore[arg-type]


def sh(ws: Path, script: str, **kw: object) -> EffectResult:
    return run(ws, "sh -c " + shlex.quote(script), ("sh", "git"), **kw)


def config_text(ws: Path, marker: Path) -> str:
    return (f"[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = {ws}/x\n"
            f"\tfsmonitor = \"touch {marker}; false\"\n")


def refs(ws: Path) -> str:
    return operator(ws, "for-each-ref", "--format=%(refname) %(objectname)").stdout + (ws / ".git/HEAD").read_text()


def assert_nothing_comes_back(ws: Path, marker: Path) -> None:
    """The operator's routine ways to throw away what an agent did, then `git status` in x/ and at the top."""
    for cmd in (("reset", "-q", "--hard"), ("checkout", "--", "."), ("stash",), ("stash", "pop"), ("switch", "main"),
                ("status",)):
        operator(ws, *cmd)
        assert not (ws / "x" / "HEAD").exists(), cmd
        if (ws / "x").is_dir():
            operator(ws, "status", cwd=ws / "x")
    assert not marker.exists(), "the script's core.fsmonitor ran in the operator's git"
    every = operator(ws, "log", "--all", "--format=%H").stdout.split()
    for commit in every:
        listed = operator(ws, "ls-tree", "-r", "--name-only", commit).stdout.split()
        assert "x/HEAD" not in listed or "x/objects/keep" not in listed, commit
    listed = operator(ws, "ls-files").stdout.split()
    assert not ("x/HEAD" in listed and "x/refs/keep" in listed)


def failed_and_put_back(r: EffectResult, before: str, ws: Path, path: str = "x/HEAD") -> None:
    assert r.status == "failed" and r.code == 126, (r.status, r.stderr)
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"dal: git: {path}") and "put back as they were before the command" in first, r.stderr
    assert path in r.summary  # what the receipt's effect item says
    assert refs(ws) == before


WALL_OR_NOT = pytest.mark.parametrize("wall", [
    pytest.param(True, marks=walled, id="wall"), pytest.param(False, id="no-wall (the test hook)")])


def hook(wall: bool) -> dict[str, bool]:
    return {} if wall else {"use_sandbox": False, "unsandboxed_as_root": True}


@WALL_OR_NOT
def test_a_merge_of_two_branches_that_assemble_a_git_directory_is_undone(tmp_path: Path, wall: bool) -> None:
    """Finding 03 B, with git alone: each branch holds part of x/{HEAD,objects,refs,config}; the merge commit
    holds them all. Before: the wall removed x/HEAD from the work tree, and `git reset --hard` put it back.
    Without the wall the same undo holds, and the lookalike's HEAD git wrote is removed as the wall would."""
    ws, marker = repo(tmp_path)
    for command in ("git checkout -q -b side", "mkdir -p x", "printf 'ref: refs/heads/main\\n' > x/HEAD",
                    "git add x", "git commit -qm head", "git checkout -q main", "mkdir -p x/objects x/refs",
                    "touch x/objects/keep x/refs/keep", f"printf %s {shlex.quote(config_text(ws, marker))} > x/config",
                    "git add x", "git commit -qm body"):
        r = run(ws, command, **hook(wall))
        assert r.ok, (command, r.stderr)
    before = refs(ws)
    r = run(ws, "git merge -q --no-edit side", **hook(wall))
    failed_and_put_back(r, before, ws)
    assert "in commit " in r.stderr.splitlines()[0]
    assert operator(ws, "status", "--porcelain").stdout == ""  # index and HEAD as before: nothing shows deleted
    assert_nothing_comes_back(ws, marker)


@walled
def test_a_commit_of_files_a_program_made_is_undone(tmp_path: Path) -> None:
    ws, marker = repo(tmp_path)
    before = refs(ws)
    r = sh(ws, f"mkdir -p x/objects x/refs && touch x/objects/keep x/refs/keep && echo 'ref: refs/heads/main' > x/HEAD"
               f" && printf %s {shlex.quote(config_text(ws, marker))} > x/config && git add x && git commit -qm x")
    failed_and_put_back(r, before, ws)
    assert_nothing_comes_back(ws, marker)


def _donor(ws: Path, marker: Path) -> None:
    """A second repository inside the roots, made by the script, whose branch holds the lookalike whole."""
    r = sh(ws, f"git init -q -b main other && cd other && git config user.name a && git config user.email a@e && "
               f"mkdir -p x/objects x/refs && touch x/objects/keep x/refs/keep && printf 'ref: x\\n' > x/HEAD && "
               f"printf %s {shlex.quote(config_text(ws, marker))} > x/config && git add x && git commit -qm x && "
               f"git format-patch -q -1 -o ../patches && git rev-parse HEAD")
    assert (ws / "other" / ".git").is_dir(), r.stderr


@WALL_OR_NOT
def test_a_pull_from_a_repository_the_script_made_is_undone(tmp_path: Path, wall: bool) -> None:
    ws, marker = repo(tmp_path)
    _donor(ws, marker)
    before = refs(ws)
    r = run(ws, "git pull -q --no-rebase --no-edit --allow-unrelated-histories other main", **hook(wall))
    failed_and_put_back(r, before, ws)
    assert not (ws / ".git" / "FETCH_HEAD").exists()  # it too named the commit: gone with the rest
    assert_nothing_comes_back(ws, marker)


@walled
def test_a_fetch_alone_of_such_a_commit_is_undone(tmp_path: Path) -> None:
    """FETCH_HEAD or a remote-tracking ref naming it is enough: `git merge FETCH_HEAD` is one step away."""
    ws, marker = repo(tmp_path)
    _donor(ws, marker)
    before = refs(ws)
    r = run(ws, "git fetch -q other main:refs/remotes/o/main")
    failed_and_put_back(r, before, ws)
    assert "refs/remotes/o/main" not in operator(ws, "for-each-ref").stdout
    assert_nothing_comes_back(ws, marker)


@walled
def test_a_cherry_pick_of_an_object_copied_in_is_undone(tmp_path: Path) -> None:
    """The objects arrive without any ref (copied into .git/objects, which git must be able to write); the
    cherry-pick makes the commit that references them."""
    ws, marker = repo(tmp_path)
    _donor(ws, marker)
    oid = operator(ws / "other", "rev-parse", "HEAD").stdout.strip()
    r = sh(ws, "cp -r other/.git/objects/. .git/objects/ && echo copied")
    assert r.ok and "copied" in r.stdout, r.stderr  # no ref names them: nothing to undo yet
    before = refs(ws)
    r = run(ws, f"git cherry-pick --allow-empty {oid}")
    failed_and_put_back(r, before, ws)
    assert_nothing_comes_back(ws, marker)


@walled
def test_am_of_a_patch_is_undone(tmp_path: Path) -> None:
    ws, marker = repo(tmp_path)
    _donor(ws, marker)
    patch = next((ws / "patches").iterdir()).relative_to(ws)
    before = refs(ws)
    r = run(ws, f"git am -q {patch}")  # the check reads the patch's paths: refused before anything runs
    assert r.status == "denied" and "passes for a git repository" in r.summary, r.summary
    r = sh(ws, f"git am -q {patch}")  # through sh the check cannot see it: the commit git makes is undone
    failed_and_put_back(r, before, ws)
    assert_nothing_comes_back(ws, marker)


@walled
def test_a_stash_that_holds_it_is_undone(tmp_path: Path) -> None:
    """The stash commit holds the index and the work tree: the operator's `git stash pop` would write x/HEAD."""
    ws, marker = repo(tmp_path)
    for command in ("mkdir -p x/objects x/refs", "touch x/objects/keep x/refs/keep", "git add x", "git commit -qm x"):
        assert run(ws, command).ok, command
    before = refs(ws)
    r = sh(ws, f"echo 'ref: refs/heads/main' > x/HEAD && printf %s {shlex.quote(config_text(ws, marker))} > "
               "x/config && git add -f x && git stash -q")
    failed_and_put_back(r, before, ws)
    assert operator(ws, "stash", "list").stdout == ""
    assert_nothing_comes_back(ws, marker)


@walled
def test_checkout_of_a_path_from_a_branch_that_completes_it_is_undone(tmp_path: Path) -> None:
    """`git checkout side -- x` writes side's x/HEAD into the index next to main's x/objects and x/refs."""
    ws, marker = repo(tmp_path)
    for command in ("git checkout -q -b side", "mkdir -p x", "printf 'ref: x\\n' > x/HEAD", "git add x",
                    "git commit -qm head", "git checkout -q main", "mkdir -p x/objects x/refs",
                    "touch x/objects/keep x/refs/keep", "git add x", "git commit -qm body"):
        assert run(ws, command).ok, command
    before = refs(ws)
    r = run(ws, "git checkout side -- x")
    failed_and_put_back(r, before, ws)
    assert "in .git/index" in r.stderr.splitlines()[0]
    assert_nothing_comes_back(ws, marker)


@walled
def test_a_dot_git_component_or_a_protected_name_in_a_commit_is_undone(tmp_path: Path) -> None:
    """Trees git itself would refuse (`.git/hooks/pre-commit`, made with mktree) and a nested dal.toml."""
    ws, _ = repo(tmp_path)
    before = refs(ws)
    r = sh(ws, "B=$(echo 'id > /tmp/pwned' | git hash-object -w --stdin) && "
               "H=$(printf '100755 blob %s\\tpre-commit\\n' $B | git mktree) && "
               "G=$(printf '040000 tree %s\\thooks\\n' $H | git mktree) && "
               "T=$(printf '040000 tree %s\\t.Git\\n' $G | git mktree) && "
               "C=$(git commit-tree -p HEAD -m x $T) && git update-ref refs/heads/main $C")
    failed_and_put_back(r, before, ws, ".Git")
    before = refs(ws)
    r = sh(ws, "mkdir -p sub && printf '[run]\\nallow = [\"sh\"]\\n' > sub/dal.toml && git add sub && "
               "git commit -qm policy")
    failed_and_put_back(r, before, ws, "sub/dal.toml")
    assert "sub/dal.toml" not in operator(ws, "ls-tree", "-r", "--name-only", "HEAD").stdout
    assert "sub/dal.toml" not in operator(ws, "ls-files").stdout


@walled
def test_ordinary_git_work_is_untouched(tmp_path: Path) -> None:
    """Commits, branches, a merge of ordinary branches, a rebase, the stash; a tracked fixture that is a bare
    repository and a tracked dal.toml are the operator's, not the script's."""
    ws, _ = repo(tmp_path)
    fixture = ws / "tests" / "fx.git"
    for sub in ("objects", "refs"):
        (fixture / sub).mkdir(parents=True)
        (fixture / sub / "keep").write_text("")
    (fixture / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "dal.toml").write_text("[run]\n")
    operator(ws, "add", "tests", "dal.toml")
    operator(ws, "commit", "-qm", "fixture")
    for command in ("git checkout -q -b feature", "touch a.txt", "git add a.txt", "git commit -qm a",
                    "git checkout -q main", "touch b.txt", "git add b.txt", "git commit -qm b",
                    "git merge -q --no-edit feature", "git checkout -q -b topic", "touch c.txt", "git add c.txt",
                    "git commit -qm c", "git rebase -q feature", "touch d.txt", "git add d.txt", "git stash -q",
                    "git stash pop -q", "edit", "git commit -qam d", "git tag v1", "git branch -D feature"):
        if command == "edit":  # the operator edits the policy; the script's `commit -a` takes it as it is
            (ws / "dal.toml").write_text("[run]\n# the operator's edit\n")
            continue
        r = run(ws, command)
        assert r.ok and "dal: git:" not in r.stderr, (command, r.stderr)
    log = operator(ws, "log", "--format=%s").stdout.split()
    assert log[:2] == ["d", "c"] and "Merge" in operator(ws, "log", "--format=%s", "main").stdout
    assert "the operator's edit" in operator(ws, "show", "HEAD:dal.toml").stdout and (fixture / "HEAD").exists()


@walled
def test_past_its_bound_the_guard_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = repo(tmp_path)
    monkeypatch.setattr(gitguard, "_MAX_COMMITS", 2)
    before = refs(ws)
    r = sh(ws, "for i in 1 2 3; do git commit -q --allow-empty -m $i; done")
    assert r.code == 126 and "more than 2 new commits to check" in r.stderr, r.stderr
    assert refs(ws) == before
    assert run(ws, "git commit -q --allow-empty -m one").ok  # within the bound: kept
    monkeypatch.setattr(gitguard, "_MAX_FILES", 3)
    for i in range(4):
        operator(ws, "branch", f"b{i}")
    r = run(ws, "git status")
    assert r.code == 126 and "denied at start: git's state cannot be held" in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the unwalled hook runs as root only with unsandboxed_as_root")
def test_a_linked_worktree_index_is_checked_too_and_without_the_wall(tmp_path: Path) -> None:
    """`.git/worktrees/NAME/index` is verified like the main one; with the wall off (the test hook), the same
    undo holds for git alone."""
    ws, marker = repo(tmp_path)
    operator(ws, "worktree", "add", "-q", "wt")
    before = (ws / ".git" / "worktrees" / "wt" / "index").read_bytes()
    r = sh(ws, "cd wt && mkdir -p y/objects y/refs && touch y/objects/k y/refs/k y/HEAD && git add y",
           use_sandbox=False, unsandboxed_as_root=True)
    assert r.code == 126 and "y/" in r.stderr.splitlines()[0] and "worktrees/wt/index" in r.stderr, r.stderr
    assert (ws / ".git" / "worktrees" / "wt" / "index").read_bytes() == before
    assert not (ws / "wt" / "y" / "HEAD").exists()  # removed, as the wall's walk would (no wall here)
    # only objects/ and refs/ staged: the HEAD on disk in that worktree's y/ completes it
    r = sh(ws, "cd wt && touch y/HEAD && git add y/objects y/refs", use_sandbox=False, unsandboxed_as_root=True)
    assert r.code == 126 and "y/objects" in r.stderr.splitlines()[0], r.stderr
    assert (ws / ".git" / "worktrees" / "wt" / "index").read_bytes() == before
    r = run(ws, "git merge -q --no-edit nothing-here", use_sandbox=False, unsandboxed_as_root=True)
    assert r.status == "failed"  # an ordinary failure stays one
    assert not marker.exists()


def test_the_planted_folder_would_run_the_scripts_fsmonitor(tmp_path: Path) -> None:
    """The control: the marker the tests above look for is what the operator's `git status` in x/ makes
    when x/ is left holding HEAD, objects/, refs/ and that config."""
    ws, marker = repo(tmp_path)
    for sub in ("objects", "refs"):
        (ws / "x" / sub).mkdir(parents=True)
    (ws / "x" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "x" / "config").write_text(config_text(ws, marker))
    operator(ws, "status", cwd=ws / "x")
    assert marker.exists()


def _copied_in(ws: Path, marker: Path) -> str:
    """The donor's commit (holding the lookalike) copied into the workspace's objects, no ref naming it."""
    _donor(ws, marker)
    r = sh(ws, "cp -r other/.git/objects/. .git/objects/ && echo copied")
    assert r.ok, r.stderr
    return operator(ws / "other", "rev-parse", "HEAD").stdout.strip()


@walled
def test_a_symlinked_ref_a_shallow_list_hiding_a_parent_and_an_uppercase_ref_are_undone(tmp_path: Path) -> None:
    """A ref made a symlink (git reads through it; a later write in the work tree would change it where no
    check follows) fails closed. A new .git/shallow naming a harmless commit would hide its parent, the
    commit holding the lookalike, from a check that read it: the shallow list from before is used."""
    ws, marker = repo(tmp_path)
    evil = _copied_in(ws, marker)
    before = refs(ws)
    r = sh(ws, f"echo {evil} > evilref && ln -s ../../../evilref .git/refs/heads/evil")
    assert r.code == 126 and "refs/heads/evil (a ref DAL cannot hold: a symbolic link" in r.stderr, r.stderr
    assert refs(ws) == before and not os.path.lexists(ws / ".git" / "refs" / "heads" / "evil")
    r = sh(ws, f"C=$(git commit-tree -p {evil} -m harmless $(git rev-parse HEAD^{{tree}})) && "
               "echo $C > .git/shallow && git update-ref refs/heads/main $C")
    failed_and_put_back(r, before, ws)
    assert not (ws / ".git" / "shallow").exists()
    r = sh(ws, f"echo {evil.upper()} > .git/refs/heads/up")  # git reads hex in either case
    failed_and_put_back(r, before, ws)
    assert_nothing_comes_back(ws, marker)


@walled
def test_the_receipt_says_what_was_put_back(tmp_path: Path) -> None:
    """At 3 a.m. the receipt is what the operator reads: the effect item names the path, the commit and the undo."""
    import dal

    ws, marker = repo(tmp_path)
    setup = ("git checkout -q -b side", "mkdir -p x", "printf 'ref: x\\n' > x/HEAD", "git add x", "git commit -qm head",
             "git checkout -q main", "mkdir -p x/objects x/refs", "touch x/objects/keep x/refs/keep", "git add x",
             "git commit -qm body")
    script = "".join(f"run({json_str(c)})\n" for c in setup)
    receipt = dal.run(script, workspace=ws, policy={"allow_run": ["git"]})
    assert all(i["status"] == "completed" for i in receipt.to_dict()["effects"]["items"]), receipt.to_dict()
    before = refs(ws)
    receipt = dal.run('run("git merge -q --no-edit side")\n', workspace=ws, policy={"allow_run": ["git"]})
    item = receipt.to_dict()["effects"]["items"][-1]
    assert item["status"] == "failed" and item["code"] == 126, item
    assert item["summary"].startswith("command failed (exit 126): dal: git: x/HEAD (x would pass for a git directory")
    assert "in commit " in item["summary"] and "put back as they were before the command" in item["summary"]
    assert refs(ws) == before
    assert_nothing_comes_back(ws, marker)


def json_str(text: str) -> str:
    import json

    return json.dumps(text)


@walled
def test_an_operators_symlinked_ref_the_script_replaced_is_put_back_as_a_link(tmp_path: Path) -> None:
    ws, marker = repo(tmp_path)
    head = operator(ws, "rev-parse", "HEAD").stdout.strip()
    (ws / ".git" / "refs" / "heads" / "legacy").symlink_to("main")  # git reads through it (an old layout)
    evil = _copied_in(ws, marker)
    r = sh(ws, f"rm .git/refs/heads/legacy && echo {evil} > .git/refs/heads/legacy")
    assert r.code == 126 and "refs/heads/legacy" in r.stderr, r.stderr
    assert os.readlink(ws / ".git" / "refs" / "heads" / "legacy") == "main"
    assert operator(ws, "rev-parse", "legacy").stdout.strip() == head


@walled
def test_a_pull_from_a_bundle_is_undone(tmp_path: Path) -> None:
    ws, marker = repo(tmp_path)
    _donor(ws, marker)
    assert sh(ws, "cd other && git bundle create -q ../b.bundle main").ok
    before = refs(ws)
    r = run(ws, "git pull -q --no-rebase --no-edit --allow-unrelated-histories b.bundle main")
    failed_and_put_back(r, before, ws)
    assert_nothing_comes_back(ws, marker)


@WALL_OR_NOT
def test_a_replace_ref_that_swaps_a_tracked_policy_file_is_undone(tmp_path: Path, wall: bool) -> None:
    """`git push . BLOB:refs/replace/OID` made every git the operator runs read a tracked
    sub/dal.toml's blob as the script's text (the guard listed only commits and trees a new ref names), and
    a routine `git checkout HEAD~1 && git checkout main` wrote it, so `cd sub && dal run` allowed sh."""
    ws, _ = repo(tmp_path)
    (ws / "sub").mkdir()
    (ws / "sub" / "dal.toml").write_text("[run]\n")
    operator(ws, "add", "sub/dal.toml")
    operator(ws, "commit", "-qm", "policy")
    (ws / "evil.txt").write_text('[run]\nallow = ["sh"]\n')
    old = operator(ws, "rev-parse", "HEAD:sub/dal.toml").stdout.strip()
    assert run(ws, "git add evil.txt", **hook(wall)).ok
    blob = run(ws, "git rev-parse :evil.txt", **hook(wall)).stdout.strip()
    assert run(ws, "git rm -q --cached evil.txt", **hook(wall)).ok
    before = refs(ws)
    for command in (f"git push -q . {blob}:refs/replace/{old}", f"git fetch -q . {blob}:refs/replace/{old}"):
        r = run(ws, command, **hook(wall))  # the guard (the check no longer reads refspecs: issue 27)
        assert r.code == 126 and f"refs/replace/{old} (a replace ref" in r.stderr, (command, r.stderr)
        assert refs(ws) == before and not (ws / ".git" / "refs" / "replace" / old).exists()
        r = sh(ws, command, **hook(wall))  # the same run by another program
        assert r.code == 126 and f"refs/replace/{old} (a replace ref" in r.stderr.splitlines()[0], (command, r.stderr)
        assert refs(ws) == before and not (ws / ".git" / "refs" / "replace" / old).exists()
    assert operator(ws, "show", "HEAD:sub/dal.toml").stdout == "[run]\n"
    operator(ws, "checkout", "-q", "HEAD~1")
    operator(ws, "checkout", "-q", "main")
    assert (ws / "sub" / "dal.toml").read_text() == "[run]\n"


@walled
def test_output_of_read_subcommands_and_a_format_patch_suffix_are_held_by_the_wall(tmp_path: Path) -> None:
    """`git reflog -1 --format=%B --output=.git/config` wrote a commit message the script chose into
    .git/config: the operator's `git status` ran its fsmonitor (shortlog, rev-list, blame, stash list/show
    the same); and `format-patch --suffix=/../dal.toml` after `mkdir 0001-s` wrote dal.toml."""
    ws, marker = repo(tmp_path)
    (ws / "dal.toml").write_text("[run]\n")
    operator(ws, "add", "dal.toml")
    operator(ws, "commit", "-qm", "policy")
    config = (ws / ".git" / "config").read_bytes()
    (ws / "m.txt").write_text(f'[core]\n\tfsmonitor = "touch {marker}; false"\n')
    assert run(ws, "git commit -q --allow-empty -F m.txt", **hook(True)).ok
    (ws / "0001-s").mkdir()
    assert run(ws, "git commit -q --allow-empty -m s", **hook(True)).ok
    for command in ("git reflog -2 --format=%B --output=.git/config", "git shortlog --output=dal.toml HEAD",
                    "git rev-list --outp dal.toml HEAD", "git stash list --output=.git/config",
                    "git blame --output=dal.toml README", "git format-patch -1 --suffix=/../dal.toml",
                    "git format-patch -1 --suffix /../dal.toml"):
        r = run(ws, command, **hook(True))
        assert r.status in ("completed", "failed"), (command, r.summary)
    assert (ws / ".git" / "config").read_bytes() == config
    assert (ws / "dal.toml").read_text() == "[run]\n"
    operator(ws, "status")
    assert not marker.exists()
    r = run(ws, "git shortlog --output=out.txt HEAD", **hook(True))  # a write root: runs, and writes it
    assert r.ok and (ws / "out.txt").exists(), r.stderr


@WALL_OR_NOT
def test_git_init_shared_cannot_make_the_repository_world_writable(tmp_path: Path, wall: bool) -> None:
    """`git init --shared=0777` in the existing repository wrote core.sharedRepository into
    .git/config, and the operator's next `git commit` left the index and refs writable by every local user."""
    ws, _ = repo(tmp_path)
    config = (ws / ".git" / "config").read_bytes()
    for command in ("git init -q --shared=0777", "git init --shared", "git init -q --sha=all"):
        r = run(ws, command, **hook(wall))
        assert r.status == "denied" and "core.sharedRepository" in r.summary, (command, r.summary)
    assert (ws / ".git" / "config").read_bytes() == config
    (ws / "README").write_text("changed\n")
    operator(ws, "commit", "-qam", "x")
    assert not (ws / ".git" / "index").stat().st_mode & 0o002


@WALL_OR_NOT
def test_a_fetched_commit_that_changes_a_tracked_lookalikes_config_is_undone(tmp_path: Path, wall: bool) -> None:
    """The repository tracks a bare-repository test fixture, fix/{HEAD,objects/,refs/,config};
    a fetched commit rewrote fix/config (core.worktree, core.fsmonitor). The guard took any change inside a
    folder that passed before as not the script's; the operator's `git status` in fix/ ran the fsmonitor."""
    ws, marker = repo(tmp_path)
    (ws / "fix" / "objects").mkdir(parents=True)
    (ws / "fix" / "refs").mkdir()
    (ws / "fix" / "objects" / "keep").write_text("")
    (ws / "fix" / "refs" / "keep").write_text("")
    (ws / "fix" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "fix" / "config").write_text("[core]\n\tbare = true\n")
    operator(ws, "add", "fix")
    operator(ws, "commit", "-qm", "fixture")
    up = tmp_path / "up"
    assert operator(tmp_path, "clone", "-q", str(ws), str(up)).returncode == 0
    (up / "fix" / "config").write_text(config_text(up, marker).replace(f"{up}/x", f"{ws}/fix"))
    operator(up, "commit", "-qam", "innocent")
    before = refs(ws)
    policy = Policy.load(ws, allow_run=["git"], allow_read=[str(up)])
    r = run_effect(f"git fetch -q {up} main:refs/heads/upstream",
                   EffectContext(policy=policy, **hook(wall)))  # type: ignore[arg-type]
    assert r.code == 126 and "fix/config (fix passes for a git directory" in r.stderr.splitlines()[0], r.stderr
    assert refs(ws) == before
    operator(ws, "merge", "-q", "--ff-only", "upstream")
    operator(ws, "status", cwd=ws / "fix")
    assert not marker.exists()
    assert (ws / "fix" / "config").read_text() == "[core]\n\tbare = true\n"
