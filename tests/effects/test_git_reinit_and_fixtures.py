"""`git init` over the workspace's repository, and a tracked folder that passes for a
git directory (a bare-repository test fixture) whose config, hooks or info a fetched commit rewrites.

Each route is EXECUTED through run() with the real git; then the operator's own git runs outside any wall,
next to the marker the planted core.fsmonitor would create, and the permissions a re-init would leave.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from pathlib import Path

import pytest
from test_git_guard import WALL_OR_NOT, hook, operator, refs, repo, run, walled

from dal.effects import sandbox_status

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
_ = (WALL_OR_NOT, hook, refs, sandbox_status, walled, shlex)


def world_writable(ws: Path) -> list[str]:
    out = []
    for d, dirs, files in os.walk(ws / ".git"):
        for n in [*dirs, *files]:
            if os.lstat(os.path.join(d, n)).st_mode & stat.S_IWOTH:
                out.append(os.path.relpath(os.path.join(d, n), ws))
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="the unwalled hook runs as root only with unsandboxed_as_root")
@pytest.mark.parametrize("command", ["git init -q --shared=0777", "git init -q --shared", "git init -q --sha=all",
                                     "git init -q", "git init -q .", "git init -q -b other ."])
def test_git_init_over_the_existing_repository_is_denied_without_the_wall(tmp_path: Path, command: str) -> None:
    """Finding 14: with the wall off, `git init --shared=0777` in the workspace rewrote the protected .git/config
    (core.sharedRepository), and the operator's next commit left the index, refs and objects world-writable.
    A plain re-init rewrites the config too (core.filemode, core.bare) and copies templates into hooks/."""
    ws, _ = repo(tmp_path)
    config = (ws / ".git" / "config").read_bytes()
    r = run(ws, command, use_sandbox=False, unsandboxed_as_root=True)
    assert r.status == "denied", (r.status, r.stderr)
    assert "core.sharedRepository" in r.summary or "re-initialising a repository" in r.summary, r.summary
    assert (ws / ".git" / "config").read_bytes() == config
    (ws / "y").write_text("y\n")
    operator(ws, "add", "y")
    operator(ws, "commit", "-qm", "the operator's commit")
    assert world_writable(ws) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the unwalled hook runs as root only with unsandboxed_as_root")
def test_git_init_of_a_new_repository_still_works_and_a_submodule_gitfile_is_not_reinitialised(tmp_path: Path) -> None:
    ws, _ = repo(tmp_path)
    r = run(ws, "git init -q -b trunk fresh", use_sandbox=False, unsandboxed_as_root=True)
    assert r.ok and (ws / "fresh" / ".git" / "HEAD").read_text() == "ref: refs/heads/trunk\n", r.stderr
    # a `.git` file (a submodule's, a linked worktree's) points at a repository that a re-init would rewrite
    (ws / "sub").mkdir()
    (ws / "sub" / ".git").write_text("gitdir: ../.git\n")
    r = run(ws, "git init -q sub", use_sandbox=False, unsandboxed_as_root=True)
    assert r.status == "denied" and "sub/.git exists" in r.summary, r.summary


def fixture_repo(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The operator's repository tracking a bare-repository test fixture fix/{HEAD,objects/,refs/,config}, and
    the attacker's server: a bare clone (reached as file://, outside the roots) one commit ahead, which changes
    the fixture. Returns (workspace, marker, the server's clone to commit in)."""
    ws, marker = repo(tmp_path)
    fix = ws / "fix"
    for sub in ("objects", "refs"):
        (fix / sub).mkdir(parents=True)
        (fix / sub / ".keep").write_text("")
    (fix / "HEAD").write_text("ref: refs/heads/main\n")
    (fix / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
    operator(ws, "add", "fix")
    operator(ws, "commit", "-qm", "test fixture: a bare repository")
    srv = tmp_path / "srv" / "evil.git"
    operator(tmp_path, "clone", "-q", "--bare", str(ws), str(srv))
    evil = tmp_path / "evilwt"
    operator(tmp_path, "clone", "-q", str(srv), str(evil))
    return ws, marker, evil


def push_change(tmp_path: Path, evil: Path, rel: str, text: str) -> str:
    (evil / "fix" / rel).parent.mkdir(parents=True, exist_ok=True)
    (evil / "fix" / rel).write_text(text)
    operator(evil, "add", "-f", "fix")
    operator(evil, "commit", "-qm", "fixture: tidy")
    operator(evil, "push", "-q", "origin", "HEAD:main")
    return operator(evil, "rev-parse", "HEAD").stdout.strip()


def run_read(ws: Path, tmp_path: Path, command: str, **kw: object):  # noqa: ANN201
    from dal.effects import EffectContext, Policy, run_effect

    policy = Policy.load(ws, allow_run=["git"], allow_read=[str(tmp_path / "srv")])
    return run_effect(command, EffectContext(policy=policy, **kw))  # type: ignore[arg-type]


def fsmonitor_config(ws: Path, marker: Path) -> str:
    return (f"[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = {ws}/fix\n"
            f"\tfsmonitor = \"touch {marker}; false\"\n")


def nothing_runs_in_the_fixture(ws: Path, marker: Path) -> None:
    for cmd in (("reset", "-q", "--hard"), ("checkout", "--", "."), ("status",)):
        operator(ws, *cmd)
        operator(ws, "status", cwd=ws / "fix")
    assert not marker.exists(), "the script's core.fsmonitor ran in the operator's git"
    assert "fsmonitor" not in (ws / "fix" / "config").read_text()


@WALL_OR_NOT
def test_a_fetched_commit_that_rewrites_a_tracked_fixtures_config_is_undone(tmp_path: Path, wall: bool) -> None:
    """Finding 15: the fetched commit rewrites fix/config (core.worktree, core.fsmonitor) in a folder the old HEAD
    already held whole; the lookalike was keyed by its folder alone, so the guard took it for the operator's.
    Now the fetch is undone (its ref names the commit), and so is the merge of its objects fetched anyway."""
    ws, marker, evil = fixture_repo(tmp_path)
    oid = push_change(tmp_path, evil, "config", fsmonitor_config(ws, marker))
    url = f"file://{tmp_path}/srv/evil.git"
    before = refs(ws)
    r = run_read(ws, tmp_path, f"git fetch -q {url} main:refs/heads/upstream", **hook(wall))
    assert r.code == 126 and r.stderr.startswith("dal: git: fix/config (fix passes for a git directory"), r.stderr
    assert f"in commit {oid[:12]}" in r.stderr.splitlines()[0] and refs(ws) == before
    # the objects stay (the guard puts back refs, not objects): a merge by name; the index alone (`reset OID --
    # PATH`: the operator's `git checkout -- .` would write it); `checkout OID -- fix/config` is denied outright
    for command in (f"git merge -q --ff-only {oid}", f"git reset -q {oid} -- fix/config"):
        r = run_read(ws, tmp_path, command, **hook(wall))
        assert r.code == 126 and r.stderr.startswith("dal: git: fix/config (fix passes"), (command, r.stderr, r.summary)
        assert refs(ws) == before
        assert not (ws / "fix" / "HEAD").exists() or "fsmonitor" not in (ws / "fix" / "config").read_text()
        nothing_runs_in_the_fixture(ws, marker)


@walled
@pytest.mark.parametrize("rel", ["hooks/post-checkout", "info/attributes", "objects/info/alternates", "commondir"])
def test_a_new_hook_info_or_alternates_file_in_a_tracked_fixture_is_undone(tmp_path: Path, rel: str) -> None:
    ws, marker, evil = fixture_repo(tmp_path)
    push_change(tmp_path, evil, rel, f"#!/bin/sh\ntouch {marker}\n")
    before = refs(ws)
    r = run_read(ws, tmp_path, f"git pull -q --ff-only file://{tmp_path}/srv/evil.git main")
    assert r.code == 126 and r.stderr.startswith(f"dal: git: fix/{rel.split('/')[0]}"), r.stderr
    assert refs(ws) == before


@walled
def test_a_tracked_fixture_the_script_leaves_alone_and_ordinary_changes_beside_it_pass(tmp_path: Path) -> None:
    """The control: a fetched commit that changes a file beside the fixture is the script's ordinary work."""
    ws, _, evil = fixture_repo(tmp_path)
    (evil / "notes.txt").write_text("n\n")
    operator(evil, "add", "notes.txt")
    operator(evil, "commit", "-qm", "notes")
    operator(evil, "push", "-q", "origin", "HEAD:main")
    r = run_read(ws, tmp_path, f"git pull -q --ff-only file://{tmp_path}/srv/evil.git main")
    assert r.ok and "dal: git:" not in r.stderr, r.stderr
    assert (ws / "notes.txt").exists() and (ws / "fix" / "HEAD").exists()


@walled
@pytest.mark.parametrize("rel", ["config", "hooks/post-checkout", "objects/info/alternates", None])
def test_a_program_other_than_git_that_changes_a_tracked_fixture_is_undone_by_the_wall(tmp_path: Path,
                                                                                      rel: str | None) -> None:
    """Finding 15's class without git: python3 (a program without a model, trusted with its arguments) rewrites
    fix/config, adds a hook or an alternates file in the folder that passed for a git directory before; the
    wall's walk saw the same lookalike before and after. Now its HEAD goes, as for a new one (None: the control,
    an object file written there is the fixture's data, and stays)."""
    ws, marker, _ = fixture_repo(tmp_path)
    target = f"fix/{rel}" if rel else "fix/objects/ab/cdef"
    text = fsmonitor_config(ws, marker) if rel == "config" else f"#!/bin/sh\ntouch {marker}\n"
    code = (f"import os; os.makedirs(os.path.dirname({target!r}), exist_ok=True); "
            f"open({target!r}, 'w').write({text!r}); os.chmod({target!r}, 0o755)")
    r = run(ws, "python3 -c " + shlex.quote(code), ("python3",))
    if rel is None:
        assert r.ok and (ws / "fix" / "HEAD").exists(), r.stderr
        return
    assert r.code == 126 and "removed fix/HEAD (its folder passed for a git directory" in r.stderr, r.stderr
    assert not (ws / "fix" / "HEAD").exists() and (ws / target).exists()
    operator(ws, "status", cwd=ws / "fix")  # fix/ is no git directory now: the operator's own repository answers
    operator(ws, "checkout", "--", ".")  # brings back the operator's fixture whole
    operator(ws, "clean", "-fdq", "fix")
    operator(ws, "status", cwd=ws / "fix")
    assert not marker.exists() and (ws / "fix" / "HEAD").exists()
    assert not (ws / target).exists() or (ws / target).read_text() != text


@walled
def test_a_tracked_hook_made_executable_in_the_index_is_undone(tmp_path: Path) -> None:
    """The same content with another mode keeps its object name: a fixture's inert fix/hooks/reference-transaction
    (100644) staged as 100755 from a fetched commit would run on the operator's next ref update in fix/."""
    ws, marker, evil = fixture_repo(tmp_path)
    hook_text = f"#!/bin/sh\ntouch {marker}\n"
    (ws / "fix" / "hooks").mkdir()
    (ws / "fix" / "hooks" / "reference-transaction").write_text(hook_text)
    operator(ws, "add", "fix")
    operator(ws, "commit", "-qm", "fixture: an inert hook")
    operator(evil, "pull", "-q", str(ws), "main")
    (evil / "fix" / "hooks").mkdir(exist_ok=True)
    (evil / "fix" / "hooks" / "reference-transaction").write_text(hook_text)
    operator(evil, "add", "--chmod=+x", "fix/hooks/reference-transaction")
    operator(evil, "commit", "-qm", "fixture: mode")
    operator(evil, "push", "-q", "origin", "HEAD:main")
    oid = operator(evil, "rev-parse", "HEAD").stdout.strip()
    r = run_read(ws, tmp_path, f"git fetch -q file://{tmp_path}/srv/evil.git main")
    assert r.code == 126 and r.stderr.startswith("dal: git: fix/hooks"), r.stderr
    index = (ws / ".git" / "index").read_bytes()
    r = run_read(ws, tmp_path, f"git reset -q {oid} -- fix/hooks/reference-transaction")
    assert r.code == 126 and r.stderr.startswith("dal: git: fix/hooks/reference-transaction"), r.stderr
    assert (ws / ".git" / "index").read_bytes() == index
    operator(ws, "checkout", "--", ".")
    operator(ws, "update-ref", "refs/heads/x", "HEAD", cwd=ws / "fix")
    assert not marker.exists()


@walled
def test_a_killed_dal_still_finds_the_fixture_a_program_changed(tmp_path: Path) -> None:
    """kill -9 during the pipeline: the wall's record (.dal/held) keeps the fixture's fingerprint, and the next
    start in the workspace removes fix/HEAD as close() would have."""
    import signal
    import threading
    import time

    from dal.effects import EffectContext, Policy, run_effect
    from dal.effects.guard.recover import recover

    ws, marker, _ = fixture_repo(tmp_path)
    code = f"open('fix/config', 'w').write({fsmonitor_config(ws, marker)!r}); import time; time.sleep(10)"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        threading.Thread(target=lambda: (time.sleep(1.5), os.kill(os.getpid(), signal.SIGKILL)), daemon=True).start()
        run_effect("python3 -c " + shlex.quote(code), EffectContext(policy=Policy.load(ws, allow_run=["python3"]),
                                                                  timeout=20))
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    assert (ws / "fix" / "HEAD").exists() and "fsmonitor" in (ws / "fix" / "config").read_text()
    notices = recover(Policy.load(ws, allow_run=["python3"]))
    assert len(notices) == 1 and "fix/HEAD (its folder passed for a git directory" in notices[0], notices
    assert not (ws / "fix" / "HEAD").exists()
    operator(ws, "status", cwd=ws / "fix")
    assert not marker.exists()
