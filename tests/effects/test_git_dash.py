"""A `-` git takes for a file is held as one by the wall; a `-` patch (standard input) is denied.

- `git log --output=-`, `git show/diff --output=-` and `git archive -o -` write a file named `-`: through a
  symlink `-` (a tracked one a patch or a checkout made) the script's commit message went to a file outside
  every root. git runs only inside a wall (issue 27), which holds it; the check no longer models it.
- `git apply ok.patch - < evil.patch` (and `git am`) applies the patch on standard input too, which DAL
  cannot read: it wrote the workspace's dal.toml. The model dropped the `-` operand and checked ok.patch only.

Each case runs the real git first (outside DAL) to show the harm, then the same command through run(), with
the wall and without it, next to a canary outside the roots.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.result import EffectResult

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
walled = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")
WALL_OR_NOT = pytest.mark.parametrize("wall", [
    pytest.param(True, marks=walled, id="wall"), pytest.param(False, id="no-wall (the test hook)")])

_ENV = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "op", "GIT_AUTHOR_EMAIL": "op@e", "GIT_COMMITTER_NAME": "op",
        "GIT_COMMITTER_EMAIL": "op@e", "LC_ALL": "C"}
CANARY = "OUTSIDE-CANARY\n"
OK_PATCH = """diff --git a/README b/README
--- a/README
+++ b/README
@@ -1 +1,2 @@
 hello
+world
"""
EVIL_PATCH = """diff --git a/dal.toml b/dal.toml
new file mode 100644
--- /dev/null
+++ b/dal.toml
@@ -0,0 +1,2 @@
+[run]
+allow = ["sh"]
"""


def git(ws: Path, *cmd: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *cmd], cwd=ws, env={**_ENV, "HOME": str(ws.parent)}, capture_output=True,
                          text=True, timeout=60, input=stdin)


def workspace(tmp_path: Path, name: str = "ws") -> tuple[Path, Path]:
    ws = tmp_path / name
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    git(ws, "config", "user.name", "op")
    git(ws, "config", "user.email", "op@e")
    (ws / "README").write_text("hello\n")
    git(ws, "add", "README")
    git(ws, "commit", "-qm", "PAYLOAD-MESSAGE")
    (tmp_path / f"{name}-outside").mkdir()
    canary = tmp_path / f"{name}-outside" / "canary.txt"
    canary.write_text(CANARY)
    (ws / "-").symlink_to(canary)  # as `git apply link.patch` (a mode-120000 entry) leaves it
    (ws / "ok.patch").write_text(OK_PATCH)
    (ws / "evil.patch").write_text(EVIL_PATCH)
    return ws, canary


def run(ws: Path, command: str, wall: bool) -> EffectResult:
    kw = {} if wall else {"use_sandbox": False, "unsandboxed_as_root": True}
    return run_effect(command, EffectContext(policy=Policy.load(ws, allow_run=["git"]), **kw))  # type: ignore[arg-type]


@walled
@pytest.mark.parametrize("args", [["log", "-1", "--format=%B", "--output=-"], ["show", "-s", "--output=-"],
                                  ["archive", "-o", "-", "HEAD"], ["archive", "--output=-", "HEAD"]])
def test_a_dash_git_writes_is_a_file(tmp_path: Path, args: list[str]) -> None:
    real, real_canary = workspace(tmp_path, "real")
    git(real, *args)
    assert real_canary.read_text() != CANARY  # git itself writes through the link
    ws, canary = workspace(tmp_path)
    r = run(ws, "git " + " ".join(args), True)
    assert r.status in ("completed", "failed"), (r.status, r.decision.reason)
    assert canary.read_text() == CANARY


@WALL_OR_NOT
@pytest.mark.parametrize("command", ["git apply ok.patch - < evil.patch", "git apply - ok.patch < evil.patch",
                                     "git apply --cached ok.patch - < evil.patch", "git am ok.patch - < evil.patch"])
def test_a_patch_from_standard_input_is_denied(tmp_path: Path, wall: bool, command: str) -> None:
    real, _ = workspace(tmp_path, "real")
    git(real, "apply", "ok.patch", "-", stdin=EVIL_PATCH)
    assert (real / "dal.toml").exists()  # git itself applies the second patch
    ws, _ = workspace(tmp_path)
    r = run(ws, command, wall)
    assert r.status == "denied" and "standard input" in r.decision.reason, (r.status, r.decision.reason)
    assert not (ws / "dal.toml").exists() and (ws / "README").read_text() == "hello\n"
    assert "dal.toml" not in git(ws, "ls-files", "--stage").stdout


@WALL_OR_NOT
def test_a_dash_read_is_still_standard_input(tmp_path: Path, wall: bool) -> None:
    """`git commit -F -` reads the message from standard input, not from the file `-`."""
    ws, canary = workspace(tmp_path)
    (ws / "README").write_text("hello\nagain\n")
    r = run(ws, "echo 'a message' | git commit -q -a -F -", wall)
    assert r.ok, (r.status, r.stderr, r.decision.reason)
    assert git(ws, "log", "-1", "--format=%s").stdout.strip() == "a message"
    assert canary.read_text() == CANARY
