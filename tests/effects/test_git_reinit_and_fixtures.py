"""attack6 findings 14 and 15: `git init` over the workspace's repository, and a tracked folder that passes for a
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
