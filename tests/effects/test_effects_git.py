"""The git model (for policies that allow git): what agents run is allowed; every option that runs a program
is denied; every option and operand that is a path is checked against the roots; the repository git will use
and the remotes it will reach are looked at on disk. The hostile corpus executes the attacks; this file pins
the decisions and their reasons."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dal.effects import Policy, check_command
from dal.effects.check import find_program

pytestmark = pytest.mark.skipif(find_program("git") is None, reason="git not installed")


def _git(ws: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(ws)})  # fmt: skip


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("git")
    ws = root / "ws"
    (ws / "docs").mkdir(parents=True)
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_text("secret\n")
    (ws / "notes.txt").write_text("TODO\n")
    (ws / "docs" / "a.md").write_text("# A\n")
    _git(ws, "init", "-q", "-b", "main", ".")
    _git(ws, "config", "user.email", "a@example.com")
    _git(ws, "config", "user.name", "a")
    _git(ws, "remote", "add", "origin", "https://example.com/repo.git")
    _git(ws, "remote", "add", "mirror", "git@example.com:repo.git")
    _git(ws, "remote", "add", "local", "./bare")
    _git(ws, "add", ".")
    _git(ws, "commit", "-q", "-m", "init")
    # A hand-made bare repository inside the workspace: its config and hooks are not protected.
    for d in ("objects", "refs", "hooks"):
        (ws / "bare" / d).mkdir(parents=True)
    (ws / "bare" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "bare" / "config").write_text("[core]\n\tbare = true\n")
    (ws / "p.patch").write_text("diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n"
                                "@@ -1 +1 @@\n-TODO\n+DONE\n")  # fmt: skip
    (ws / "evil.patch").write_text("diff --git a/x/dal.toml b/x/dal.toml\nnew file mode 100644\n--- /dev/null\n"
                                   "+++ b/x/dal.toml\n@@ -0,0 +1 @@\n+[run]\n")  # fmt: skip
    (ws / "hooks.patch").write_text("diff --git a/.gitconfig b/.gitconfig\nnew file mode 100644\n--- /dev/null\n"
                                    "+++ b/.gitconfig\n@@ -0,0 +1 @@\n+[core]\n")  # fmt: skip
    return ws


@pytest.fixture(scope="module")
def policy(repo: Path) -> Policy:
    return Policy.load(repo, allow_run=["git"])


ALLOW = [
    ("git status", "local"),
    ("git status --porcelain -uno", "local"),
    ("git diff", "local"),
    ("git diff --cached --stat", "local"),
    ("git diff HEAD -- notes.txt", "local"),
    ("git diff --no-index notes.txt docs/a.md", "local"),
    ("git log --oneline -5", "local"),
    ("git log --author Bob --since '2 weeks ago' -- docs", "local"),
    ("git log -p -1 --ext-diff", "local"),  # drivers come from the (protected) configuration
    ("git log --output=log.txt", "local"),
    ("git show --stat HEAD", "local"),
    ("git show HEAD:notes.txt", "local"),
    ("git blame -L 1,1 notes.txt", "local"),
    ("git grep -n TODO", "local"),
    ("git grep -e TODO -- docs", "local"),
    ("git ls-files -z", "local"),
    ("git rev-parse --show-toplevel", "local"),
    ("git describe --always --dirty", "local"),
    ("git add notes.txt", "local"),
    ("git add -A", "local"),
    ("git commit -m 'a message' --allow-empty", "local"),
    ("git commit -F notes.txt", "local"),
    ("git branch -a", "local"),
    ("git branch -u origin/main", "local"),
    ("git checkout -b feature", "local"),
    ("git checkout main -- notes.txt", "local"),
    ("git switch -c other", "local"),
    ("git restore --staged notes.txt", "local"),
    ("git reset --hard HEAD", "local"),
    ("git stash", "local"),
    ("git stash pop", "local"),
    ("git stash push -m wip -- notes.txt", "local"),
    ("git tag -a v1 -m 'release'", "local"),
    ("git merge --no-ff -m merge other", "local"),
    ("git rebase main", "local"),
    ("git cherry-pick -x HEAD", "local"),  # -x here appends a line; it is rebase's -x that runs a command
    ("git revert --no-edit HEAD", "local"),
    ("git mv notes.txt docs/", "local"),
    ("git rm --cached notes.txt", "local"),
    ("git rm -r --cached .", "local"),
    ("git rm docs/a.md", "local"),
    ("git apply p.patch", "local"),
    ("git apply --check evil.patch", "local"),
    ("git format-patch -1 -o patches", "local"),
    ("git archive -o out.tar HEAD", "local"),
    ("git bundle create repo.bundle HEAD", "local"),
    ("git worktree add wt", "local"),
    ("git init sub", "local"),
    ("git clone https://example.com/x.git", "external"),
    ("git clone . copy", "external"),
    ("git fetch origin", "external"),
    ("git pull --rebase origin main", "external"),
    ("git push -u origin main", "external"),
    ("git push https://example.com/y.git main", "external"),
    ("git ls-remote origin", "external"),
    ("git remote -v", "external"),
    ("git --no-pager log", "local"),
    ("git --version", "local"),
]

DENY = [
    # global options that point git elsewhere or set configuration
    ("git -C .. status", "-C"),
    ("git --git-dir=bare log", "--git-dir"),
    ("git --git-d=bare log", "--git-dir"),
    ("git --work-tree=.. status", "--work-tree"),
    ("git -c core.fsmonitor=x status", "-c"),
    ("git -ccore.pager=x log", "-c"),
    ("git --config-env=core.pager=X log", "--config-env"),
    ("git --exec-path=. status", "--exec-path"),
    ("git --bare log", "--bare"),
    ("git -p log", "pager"),
    ("git --frob log", "global option DAL does not know"),
    # options that run programs
    ("git grep --open-files-in-pager=x TODO", "pager"),
    ("git grep --open=x TODO", "pager"),
    ("git grep -Ox TODO", "pager"),
    ("git clone -u x https://e/r", "names a program"),
    ("git clone --upload-pack=x . c", "names a program"),
    ("git clone --upl x . c", "names a program"),
    ("git fetch --upload-pack=x origin", "names a program"),
    ("git push --receive-pack=x origin", "names a program"),
    ("git push --exec=x origin", "names a program"),
    ("git ls-remote --upload-pack=x origin", "names a program"),
    ("git archive --remote=origin HEAD", "another repository"),
    ("git rebase -x 'make test' main", "shell command"),
    ("git rebase --exec=x main", "shell command"),
    ("git rebase -i main", "editor"),
    ("git bisect run make", "runs a program"),
    ("git merge -s evil other", "git-merge-STRATEGY"),
    ("git pull --strategy=evil origin", "git-merge-STRATEGY"),
    ("git commit -S -m x", "gpg"),
    ("git tag -s v2 -m x", "gpg"),
    ("git log --show-signature", "gpg"),
    ("git log --format=%GS", "gpg"),
    ("git clone --template=docs . c", "hooks"),
    ("git init --template=docs x", "hooks"),
    ("git clone -c core.pager=x . c", "configuration"),
    ("git clone --recurse-submodules https://e/r", "submodules"),
    ("git fetch --recurse-submodules origin", "submodules"),
    ("git clone --separate-git-dir=g https://e/r", "configuration"),
    ("git init --bare b2", "not protected"),
    ("git log --help", "man"),
    ("git help log", "man"),
    ("git config core.pager x", "configuration"),
    ("git submodule update", "nested"),
    ("git difftool", "external tools"),
    ("git clean -fdx", "the run store"),
    ("git stash -u", "untracked"),
    ("git maintenance start", "schedules"),
    ("git frobnicate", "not a git subcommand DAL knows"),
    ("git st", "not a git subcommand DAL knows"),  # an alias, which may run anything
    # paths outside the roots or protected
    ("git diff --no-index ../outside/secret.txt notes.txt", "outside"),
    ("git diff ../outside/secret.txt notes.txt", "outside"),
    ("git log --output=../out.txt", "outside"),
    ("git format-patch -o ../out -1", "outside"),
    ("git format-patch --output-directory=.git/hooks -1", "protected"),
    ("git archive --output=../a.tar HEAD", "outside"),
    ("git archive --add-file=../outside/secret.txt HEAD", "outside"),
    ("git bundle create ../b HEAD", "outside"),
    ("git worktree add ../wt", "outside"),
    ("git clone https://e/r ../elsewhere", "outside"),
    ("git clone https://e/dal.toml.git", "protected"),  # the folder it makes is named dal.toml
    ("git commit -F ../outside/secret.txt", "outside"),
    ("git commit --template=../outside/secret.txt", "outside"),
    ("git blame --contents ../outside/secret.txt notes.txt", "outside"),
    ("git grep -f ../outside/secret.txt", "outside"),
    ("git ls-files --exclude-from=../outside/secret.txt", "outside"),
    ("git checkout -- dal.toml", "protected"),
    ("git restore .dal", "protected"),
    ("git mv notes.txt dal.toml", "protected"),
    ("git mv docs .git/hooks", "protected"),
    ("git rm -r .", "workspace itself"),
    ("git rm '*.txt'", "pattern"),
    ("git checkout -- ':(glob)*'", "pattern"),
    ("git rm --pathspec-from-file=notes.txt", "cannot be checked"),
    ("git apply evil.patch", "protected"),
    ("git apply hooks.patch", "protected"),
    ("git apply --directory=.git x", "cannot read the patch"),
    ("git apply", "standard input"),
    ("git am", "standard input"),
    ("git apply --unsafe-paths p.patch", "outside the work tree"),
    # remotes
    ("git push ./bare main", "hooks of the repository at bare"),
    ("git push local main", "hooks of the repository at bare"),  # a configured remote's URL
    ("git fetch", "hooks of the repository at bare"),  # every configured remote, when none is named
    ("git remote add evil ./bare", "hooks of the repository at bare"),
    ("git push mirror main", "ssh"),
    ("git clone git@example.com:r.git", "ssh"),
    ("git clone ext::sh c", "git-remote-ext"),
    ("git fetch 'fd::3'", "git-remote-fd"),
    ("git clone foo://x c", "git-remote-foo"),
    ("git push ../outside main", "outside"),
]


@pytest.mark.parametrize(("command", "klass"), ALLOW)
def test_everyday_git_is_allowed(command: str, klass: str, policy: Policy) -> None:
    d = check_command(command, policy)
    assert d.allowed, d.reason
    assert d.effect_class == klass


@pytest.mark.parametrize(("command", "why"), DENY)
def test_git_that_runs_programs_or_leaves_the_roots_is_denied(command: str, why: str, policy: Policy) -> None:
    d = check_command(command, policy)
    assert not d.allowed, command
    assert why in d.reason


def test_ssh_remotes_run_when_ssh_is_allowed_too(repo: Path) -> None:
    assert check_command("git push mirror main", Policy.load(repo, allow_run=["git", "ssh"])).allowed


def test_a_gitfile_or_a_bare_workspace_points_git_at_writable_configuration(tmp_path: Path) -> None:
    for d in ("x/objects", "x/refs"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "x" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "x" / "config").write_text("")
    policy = Policy.load(tmp_path, allow_run=["git"])
    assert check_command("git status", policy).allowed  # no repository here: git finds none
    (tmp_path / ".git").write_text("gitdir: x\n")
    d = check_command("git status", policy)
    assert not d.allowed and "repository at x, whose config a script may write" in d.reason
    (tmp_path / ".git").unlink()
    for d2 in ("objects", "refs"):
        (tmp_path / d2).mkdir()
    (tmp_path / "HEAD").write_text("ref: refs/heads/main\n")
    d = check_command("git log", policy)
    assert not d.allowed and "repository at ., whose config" in d.reason


def test_hooks_path_in_the_workspace_is_denied(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", ".")
    _git(tmp_path, "config", "core.hooksPath", "myhooks")
    d = check_command("git commit -m x", Policy.load(tmp_path, allow_run=["git"]))
    assert not d.allowed and "core.hooksPath" in d.reason


def test_a_repository_above_the_workspace_is_not_writable_by_scripts(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", ".")
    ws = tmp_path / "sub"
    ws.mkdir()
    policy = Policy.load(ws, allow_run=["git"])
    assert check_command("git status", policy).allowed
    d = check_command("git commit -m x", policy)
    assert not d.allowed and "outside the allowed roots" in d.reason


def test_a_swallowed_value_cannot_hide_a_path_option(policy: Policy) -> None:
    # If git read `--output=../x` as an option (the model took -S for one with a value, say), it would
    # write outside: the model refuses to guess.
    d = check_command("git log -S --output=../x", policy)
    assert not d.allowed and "--output" in d.reason


def test_git_home_configuration_is_protected(repo: Path) -> None:
    policy = Policy.load(repo, allow_run=["git"])
    for cmd in ("printf '[alias]\\n\\tst = !sh\\n' > .gitconfig", "mkdir -p .config/git && touch .config/git/config"):
        d = check_command(cmd, policy)
        assert not d.allowed and "protected" in d.reason, cmd
    assert os.path.exists(repo / ".git" / "config")
