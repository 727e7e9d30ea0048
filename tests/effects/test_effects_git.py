"""The git model (for policies that allow git): what agents run is allowed; every option that runs a program
is denied; every option and operand that is a path is checked against the roots; the repository git will use
and the remotes it will reach are looked at on disk. The hostile corpus executes the attacks; this file pins
the decisions and their reasons."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_git_guard import walled

from dal.effects import EffectContext, Policy, check_command, run_effect
from dal.effects.classify.check import find_program

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
    ("git rebase --abort", "local"),
    ("git am --abort", "local"),
    ("git cherry-pick --quit", "local"),
    ("git init sub", "local"),  # git makes sub/.git itself
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
    ("git reflog -1 --output=out.txt", "local"),
    ("git format-patch -1 --stdout", "local"),
    ("git format-patch -1 --suffix=.txt -o patches", "local"),
    ("git push origin main:refs/heads/other", "external"),
    ("git push origin +HEAD:main", "external"),
    ("git fetch origin main:refs/remotes/origin/main", "external"),
    ("git fetch --filter blob:none origin", "external"),
    ("git apply --allow-overlap p.patch", "local"),
    ("git clone -4 . copy4", "external"),
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
    ("git maintenance start", "schedules"),
    # paths outside the roots or protected
    ("git apply evil.patch", "protected"),
    ("git apply hooks.patch", "protected"),
    ("git apply --directory=.git x", "cannot read the patch"),
    ("git apply", "standard input"),
    ("git am", "standard input"),
    ("git apply --unsafe-paths p.patch", "outside the work tree"),
    # going on from state kept in .git: a todo list (exec lines run a shell), patches split from a mail
    ("git rebase --continue", "goes on from the state git keeps in .git"),
    ("git rebase --skip", "goes on from the state"),
    ("git rebase --cont", "goes on from the state"),  # abbreviated
    ("git cherry-pick --continue", "goes on from the state"),
    ("git revert --skip", "goes on from the state"),
    ("git am --continue", "goes on from the state"),
    ("git am -r", "goes on from the state"),
    ("git am --patch-format=stgit-series p.patch", "mailboxes only"),
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
    ("git fetch --stdin origin", "standard input"),
]


# Once denied by the model of git's options; git runs only inside a wall (issue 27), which holds them: each is
# executed in the wall next to canaries (test_git_the_wall_holds).
HELD = [
    'git commit -S -m x',
    'git tag -s v2 -m x',
    'git log --show-signature',
    'git log --format=%GS',
    'git stash -u',
    'git frobnicate',
    'git st',
    'git diff --no-index ../outside/secret.txt notes.txt',
    'git diff ../outside/secret.txt notes.txt',
    'git log --output=../out.txt',
    'git format-patch -o ../out -1',
    'git format-patch --output-directory=.git/hooks -1',
    'git archive --output=../a.tar HEAD',
    'git archive --add-file=../outside/secret.txt HEAD',
    'git bundle create ../b HEAD',
    'git worktree add ../wt',
    'git clone https://e/r ../elsewhere',
    'git clone https://e/dal.toml.git',
    'git commit -F ../outside/secret.txt',
    'git commit --template=../outside/secret.txt',
    'git blame --contents ../outside/secret.txt notes.txt',
    'git grep -f ../outside/secret.txt',
    'git ls-files --exclude-from=../outside/secret.txt',
    'git checkout -- dal.toml',
    'git restore .dal',
    'git mv notes.txt dal.toml',
    'git mv docs .git/hooks',
    'git rm -r .',
    "git rm '*.txt'",
    "git checkout -- ':(glob)*'",
    'git rm --pathspec-from-file=notes.txt',
    'git push origin HEAD:refs/replace/0123',
    'git push origin refs/replace/0123',
    'git push origin HEAD:replace/0123',
    'git push origin HEAD:refs/notes/commits',
    'git fetch origin +refs/tags/x:refs/replace/0123',
    'git fetch --refmap=refs/tags/x:refs/replace/0123 origin refs/tags/x',
    'git remote add --mirror=fetch m https://e/r',
    'git reflog --output=dal.toml',
    'git shortlog --output ../out HEAD',
    'git rev-list --output=.git/config HEAD',
    'git blame --output=dal.toml notes.txt',
    'git cherry-pick --output=../x HEAD',
    'git stash show --output=../x',
    'git bundle create b.bundle --output=../x HEAD',
    'git ls-files --outpu=../x',
    'git format-patch -1 --suffix=/../dal.toml',
    'git log --format=%+GS',
    'git reflog --show-signature',
    "git for-each-ref '--format=%(signature)'",
    'git log -S --output=../x',
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


def test_an_unknown_subcommand_is_external_and_never_idempotent(policy: Policy) -> None:
    """An alias or a `git-NAME` program may do anything: a person decides, and it is never run twice."""
    for command in ("git frobnicate", "git st"):
        d = check_command(command, policy)
        assert d.allowed and d.effect_class == "external" and not d.idempotent, (command, d.reason)


def _tree(top: Path) -> dict[str, bytes | str]:
    return {str(p.relative_to(top)): os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
            for p in sorted(top.rglob("*"))}


@walled
@pytest.mark.parametrize("command", HELD)
def test_git_the_wall_holds(command: str, repo: Path, tmp_path: Path) -> None:
    """What the check lets through to git is held by the wall and the git guard: outside the workspace
    nothing changes or is read into an output, and the policy, git's config and hooks stay as they were."""
    root = tmp_path / "root"
    shutil.copytree(repo.parent, root, symlinks=True)
    ws = root / "ws"
    (root / "outside" / "secret.txt").write_text("OUTSIDE-CANARY-7f3a\n")
    outside = _tree(root / "outside")
    protected = {name: _tree(ws / name) if (ws / name).is_dir() else (ws / name).read_bytes()
                 for name in (".git/config", ".git/hooks") if (ws / name).exists()}
    r = run_effect(command, EffectContext(policy=Policy.load(ws, allow_run=["git"])))
    assert r.status in ("completed", "failed", "denied"), r.summary
    assert _tree(root / "outside") == outside and sorted(os.listdir(root)) == ["outside", "ws"], command
    assert "OUTSIDE-CANARY" not in r.stdout + r.stderr + r.summary, command
    assert not (ws / "dal.toml").is_file(), command  # absent before: the wall holds its place
    for name, before in protected.items():
        assert (_tree(ws / name) if (ws / name).is_dir() else (ws / name).read_bytes()) == before, (command, name)


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


def test_git_home_configuration_is_protected(repo: Path) -> None:
    policy = Policy.load(repo, allow_run=["git"])
    for cmd in ("printf '[alias]\\n\\tst = !sh\\n' > .gitconfig", "mkdir -p .config/git && touch .config/git/config"):
        d = check_command(cmd, policy)
        assert not d.allowed and "protected" in d.reason, cmd
    assert os.path.exists(repo / ".git" / "config")


def test_git_state_and_dot_git_anywhere_are_never_written_by_scripts(repo: Path) -> None:
    """Finding 01/04/15: git's state files (todo lists, commondir, legacy remotes, alternates) and any file
    or folder named .git, wherever it is, whether it exists or not."""
    policy = Policy.load(repo, allow_run=["git"])
    for cmd in ("echo 'exec sh' > .git/rebase-merge/git-rebase-todo", "mkdir -p .git/sequencer",
                "echo ../x > .git/commondir", "cp notes.txt .git/rebase-apply/0001", "mkdir -p .git/remotes",
                "echo 'URL: ../x' > .git/remotes/x", "echo x > .git/branches/x",
                "echo /elsewhere > .git/objects/info/alternates", "touch .git/objects/info/http-alternates",
                "printf 'gitdir: ../x\\n' > .git", "printf 'gitdir: ../x\\n' > docs/.git", "mkdir -p docs/.git",
                "mv docs/a.md docs/.git", "cp -r docs sub/.git", "rm -rf .git"):
        d = check_command(cmd, policy)
        assert not d.allowed and "protected" in d.reason, cmd
    for cmd in ("cat .git/HEAD", "ls .git/objects/info", "echo x > docs/.gitignore", "mkdir -p .github/x"):
        assert check_command(cmd, policy).allowed, cmd


def test_folders_that_would_pass_for_git_directories_are_not_made(tmp_path: Path) -> None:
    """A folder with HEAD, objects/ and refs/ (or HEAD and commondir) is a repository to git, and git run in
    or below it reads its config: a script may not assemble one, in one command or over several."""
    ws = tmp_path
    for d in ("tpl/objects", "tpl/refs", "bare/objects", "bare/refs", "parts/objects", "parts/refs"):
        (ws / d).mkdir(parents=True)
    (ws / "tpl" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "bare" / "HEAD").write_text("ref: refs/heads/main\n")
    policy = Policy.load(ws)
    for cmd in ("mkdir -p x/objects x/refs && printf 'ref: refs/heads/main\\n' > x/HEAD",
                "mkdir -p x/refs/heads x/objects | tee x/HEAD", "printf 'ref: x\\n' > parts/HEAD",
                "mkdir -p y/objects && echo ../bare > y/commondir && touch y/HEAD", "cp -r tpl copy",
                "mv tpl moved", "cp -r tpl/objects tpl/refs tpl/HEAD z/", "echo '[core]' > bare/config",
                "mkdir -p bare/hooks", "echo x > bare/HEAD"):
        d = check_command(cmd, policy)
        assert not d.allowed and ("passes for a git repository" in d.reason or "git directory" in d.reason), cmd
    for cmd in ("mkdir -p src/objects src/refs", "echo x > HEAD.txt", "touch parts/notes", "echo x > bare/notes",
                "cp -r parts parts2"):
        assert check_command(cmd, policy).allowed, cmd


def test_legacy_remote_files_and_alternates_are_read_like_the_config(tmp_path: Path) -> None:
    """Finding 04: git takes a remote's URL from .git/remotes/NAME or .git/branches/NAME when the config
    names no such remote, and reads every object of the folders objects/info/alternates names."""
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    _git(ws, "init", "-q", "-b", "main", ".")
    policy = Policy.load(ws, allow_run=["git"])
    assert check_command("git fetch x", policy).allowed  # no such remote: "x" is a path in the workspace
    (ws / ".git" / "remotes").mkdir()
    (ws / ".git" / "remotes" / "x").write_text(f"URL: {outside}\nPull: refs/heads/main:refs/heads/x\n")
    (ws / ".git" / "remotes" / "y").write_text("URL: ssh://attacker.example/r\n")
    (ws / ".git" / "branches" / "z").write_text(f"{outside}#main\n")
    for cmd, why in (("git fetch x", "reads outside"), ("git fetch y", "ssh"), ("git pull z", "reads outside"),
                     ("git fetch --all", "outside"), ("git push", "outside")):
        d = check_command(cmd, policy)
        assert not d.allowed and why in d.reason, cmd
    for name in ("x", "y"):
        (ws / ".git" / "remotes" / name).unlink()
    (ws / ".git" / "branches" / "z").unlink()
    alternates = ws / ".git" / "objects" / "info" / "alternates"
    (ws / "shared-objects").mkdir()
    alternates.write_text("../../shared-objects\n")  # relative to .git/objects: inside the workspace
    assert check_command("git log", policy).allowed
    alternates.write_text(f"# comment\n{outside}/.git/objects\n")
    d = check_command("git log", policy)
    assert not d.allowed and "alternates" in d.reason and "outside" in d.reason


def _mail(body: str, headers: str = "Content-Type: text/plain; charset=UTF-8\n") -> str:
    return ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@e>\n"
            f"Subject: [PATCH] x\nMIME-Version: 1.0\n{headers}\n{body}")


def test_git_am_reads_the_paths_of_the_patch_as_git_decodes_the_mail(repo: Path) -> None:
    """Finding 08: git am decodes MIME (base64, quoted-printable, multipart, format=flowed) before it looks
    for the patch; the check reads the paths from what git will see."""
    import base64
    import quopri

    policy = Policy.load(repo, allow_run=["git"])
    evil = ("msg\n---\ndiff --git a/dal.toml b/dal.toml\n--- a/dal.toml\n+++ b/dal.toml\n@@ -1 +1 @@\n-[run]\n"
            "+[run] \n")
    good = evil.replace("dal.toml", "notes.txt")
    b64 = "Content-Transfer-Encoding: base64\n"
    mails = {
        "b64.mbox": _mail(base64.encodebytes(evil.encode()).decode(), "Content-Type: text/plain\n" + b64),
        "qp.mbox": _mail(quopri.encodestring(evil.replace("dal.toml", "dal=2Etoml").encode()).decode()
                         .replace("dal=3D2Etoml", "dal=2Etoml"), "Content-Transfer-Encoding: quoted-printable\n"),
        "multi.mbox": _mail("--B\nContent-Type: text/plain\n\nmsg\n--B\nContent-Type: text/x-patch\n" + b64 + "\n"
                            + base64.encodebytes(evil.encode()).decode() + "--B--\n",
                            'Content-Type: multipart/mixed; boundary="B"\n'),
        "flowed.mbox": _mail(evil.replace("+++ b/dal.toml", "+++ b/dal \n.toml"),
                             "Content-Type: text/plain; format=flowed; delsp=yes\n"),
    }
    for name, text in mails.items():
        (repo / name).write_text(text)
        assert "+++ b/dal.toml" not in text, name  # no header to see without decoding
        d = check_command(f"git am {name}", policy)
        assert not d.allowed and "dal.toml is protected" in d.reason, (name, d.reason)
    (repo / "good.mbox").write_text(_mail(base64.encodebytes(good.encode()).decode(), b64))
    assert check_command("git am good.mbox", policy).allowed
    (repo / "series").write_text("# This series applies on GIT commit 0000\nb64.mbox\n")
    d = check_command("git am series", policy)
    assert not d.allowed and "cannot read the patch" in d.reason
