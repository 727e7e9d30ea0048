"""`cp -l` (a default-toolset program) makes a second name for a file: the policy file, `.git/config` or a
file of a read root then becomes writable through that name by any walled program of a later command.

Under Landlock and with no wall the check is what stands in front of the toolset, and it read `cp -l SRC DEST`
as a read of SRC. Executed next to canaries: a link made by `cp -l .git/config sub/c` (no wall, or Landlock),
then a walled python3 appending to `sub/c`, put a `core.fsmonitor` command into the repository's config (run by
the operator's next `git status`) and wrote into the read root's file. Linking is now checked as writing the
source: each source must be a path the script may write.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from dal.effects import EffectContext, Policy, check_command, run_effect, sandbox_status
from dal.effects.wall import landlock_wall

NOTES = "read root notes\n"
CONFIG = "[core]\n\trepositoryformatversion = 0\n"
HAS_BWRAP = sandbox_status()[0]
HAS_LANDLOCK = landlock_wall.missing() is None


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text(CONFIG)
    (ws / "dal.toml").write_text('[run]\nallow = ["python3"]\n')
    (ws / "sub").mkdir()
    (ws / "a.txt").write_text("mine\n")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "notes.txt").write_text(NOTES)
    return ws


def policy(ws: Path) -> Policy:
    return Policy.load(ws, allow_read=[str(ws.parent / "shared")], allow_run=["python3"], _skip_file=True)


def intact(ws: Path) -> None:
    for path, text in ((ws / ".git" / "config", CONFIG), (ws.parent / "shared" / "notes.txt", NOTES),
                       (ws / "dal.toml", '[run]\nallow = ["python3"]\n')):  # fmt: skip
        assert path.read_text() == text and os.stat(path).st_nlink == 1, path


LINKS = ["cp -l .git/config sub/c", "cp --lin dal.toml sub/p", "cp -l ../shared/notes.txt sub/n",
         "cp --link -- ../shared/notes.txt .git/config dal.toml sub", "cp -al .git sub/g", "cp -rl . sub/all"]


@pytest.mark.parametrize("command", LINKS)
def test_the_check_denies_a_hard_link_to_what_the_script_may_not_write(tmp_path: Path, command: str) -> None:
    ws = workspace(tmp_path)
    decision = check_command(command, policy(ws))
    assert not decision.allowed, decision


def test_a_hard_link_between_files_of_the_workspace_stays_allowed(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace(tmp_path)
    monkeypatch.setenv("DAL_WALL", "none")
    r = run_effect("cp -l a.txt sub/a2", EffectContext(policy=policy(ws), unsandboxed_as_root=True))
    assert r.status == "completed", r
    assert os.path.samefile(ws / "a.txt", ws / "sub" / "a2")


LINK_MODES = ["none", pytest.param("landlock", marks=pytest.mark.skipif(not HAS_LANDLOCK, reason="no Landlock"))]
WALLS = [pytest.param("bubblewrap", marks=pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap unavailable")),
         pytest.param("landlock", marks=pytest.mark.skipif(not HAS_LANDLOCK, reason="no Landlock"))]

_WRITE_THROUGH = ("import os\nfor n in os.listdir('sub'):\n    p = os.path.join('sub', n)\n"
                  "    if os.path.isfile(p):\n        open(p, 'a').write('[core]\\n\\tfsmonitor = touch pwned\\n')\n")


@pytest.mark.parametrize("link_mode", LINK_MODES)
@pytest.mark.parametrize("wall", WALLS)
def test_a_link_made_by_cp_cannot_be_written_through_by_a_walled_program(
        tmp_path: Path, link_mode: str, wall: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace(tmp_path)
    monkeypatch.setenv("DAL_WALL", link_mode)
    ctx = EffectContext(policy=policy(ws), unsandboxed_as_root=True)
    made = [run_effect(c, ctx) for c in LINKS[:3]]
    assert all(r.status == "denied" for r in made), made
    monkeypatch.setenv("DAL_WALL", wall)
    r = run_effect(f"python3 -c {shlex.quote(_WRITE_THROUGH)}", EffectContext(policy=policy(ws)))
    assert r.status in ("completed", "failed"), r
    intact(ws)
