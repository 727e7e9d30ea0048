"""What `dal policy check` says is a DAL sentence a person can act on: a path the check cannot follow is
named (it said `cannot analyse command: PermissionError: [Errno 13] ...`), and an allowed program says
where its permission came from (it said "allowed by default policy" for one only --allow-run allowed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _check(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dal", "policy", "check", *args], cwd=ws, capture_output=True,
                          text=True, timeout=60)


def _unreadable_fd_link() -> str | None:
    """A /proc/PID/fd/N link this process may not read (another user's process, or init's in a container)."""
    for pid in ("1",):
        path = f"/proc/{pid}/fd/1"
        try:
            os.readlink(path)
        except PermissionError:
            return path
        except OSError:
            continue
    return None


@pytest.mark.skipif(_unreadable_fd_link() is None, reason="every /proc/PID/fd link tried is readable here")
@pytest.mark.parametrize("template", ["cp x {}", "cat {}", "echo hi > {}"])
def test_a_path_the_check_cannot_resolve_is_named_not_a_python_exception(tmp_path: Path, template: str) -> None:
    path = _unreadable_fd_link()
    r = _check(tmp_path, template.format(path))
    first = r.stdout.splitlines()[0]
    assert r.returncode == 1 and first == (f"deny: {path}: cannot be resolved (permission denied), and a path "
                                           "the check cannot follow is denied"), r
    assert "Error" not in r.stdout + r.stderr and "Errno" not in r.stdout + r.stderr


def test_each_programs_permission_names_where_it_came_from(tmp_path: Path) -> None:
    first = lambda *a: _check(tmp_path, *a).stdout.splitlines()[0]  # noqa: E731
    assert first("git status", "--allow-run=git") == \
        "allow: git allowed by --allow-run: changes files inside the workspace"
    assert first("cat x") == "allow: cat allowed by the default toolset: reads only inside the workspace"
    assert first("make", "--require-approval=make") == "approval required: make requires approval (--require-approval)"
    (tmp_path / "dal.toml").write_text('[run]\nallow = ["git"]\nrequire_approval = ["curl"]\n')
    assert first("git status; cat x; make", "--allow-run=make").startswith(
        "allow: git allowed by dal.toml (sha256 ")
    assert first("git status; cat x; make", "--allow-run=make").endswith(
        "); cat by the default toolset; make by --allow-run: changes files, where the check cannot tell: make has no "
        "model of its arguments (only the wall keeps it inside the roots)")
    gated = first("curl -s http://h/; make", "--require-approval=make")
    assert gated.startswith("approval required: curl requires approval (dal.toml (sha256 ") and gated.endswith(
        ")); make requires approval (--require-approval)"), gated


def test_a_program_without_a_model_is_not_said_to_stay_inside_the_workspace(tmp_path: Path) -> None:
    # `tar xf a.tar -C /etc` was once "allowed ...: changes files inside the workspace"
    r = _check(tmp_path, "tar xf a.tar -C /etc", "--allow-run=tar")
    assert r.returncode == 0 and r.stdout.splitlines()[0] == (
        "allow: tar allowed by --allow-run: changes files, where the check cannot tell: tar has no model of its "
        "arguments (only the wall keeps it inside the roots)"), r
