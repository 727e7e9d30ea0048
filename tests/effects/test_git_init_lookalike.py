"""`git init DIR` inside a folder that passes for a git directory (a tracked bare-repository fixture) was
allowed and made DIR/.git: from then on every git run in that folder takes the script's new repository in
place of the operator's fixture, and `.git` being protected, no script can remove it. Executed with real git,
wall on and off: denied, nothing made; a new repository elsewhere is still made."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dal.effects import EffectContext, Policy, run_effect, sandbox_status

_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}
WALLS = [pytest.param(False, id="no-wall"),
         pytest.param(True, id="wall", marks=pytest.mark.skipif(not sandbox_status()[0], reason="no bubblewrap"))]


def _git(ws: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=op@example.com", "-c", "user.name=op", *args], cwd=ws, check=True,
                   capture_output=True, env={**_ENV, "HOME": str(ws.parent)})


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    _git(ws, "init", "-q")
    _git(ws, "init", "-q", "--bare", "fix")  # the operator's fixture: a bare repository, tracked
    _git(ws, "add", "-f", "fix")
    _git(ws, "commit", "-qm", "fixture")
    return ws


@pytest.mark.parametrize("wall", WALLS)
@pytest.mark.parametrize("target", ["fix", "fix/branches", "fix/info/sub"])
def test_git_init_inside_a_bare_lookalike_is_denied(ws: Path, wall: bool, target: str) -> None:
    ctx = EffectContext(policy=Policy.load(ws, allow_run=["git"]), use_sandbox=wall, unsandboxed_as_root=True)
    r = run_effect(f"git init -q {target}", ctx)
    assert r.status == "denied" and "passes for a git directory" in r.decision.reason, r
    assert not os.path.lexists(ws / target / ".git")
    other = run_effect("git init -q other", ctx)
    assert other.status == "completed" and (ws / "other" / ".git" / "HEAD").is_file(), other
