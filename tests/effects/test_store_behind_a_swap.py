"""A name the check saw as a plain file can be a symlink into the run store by the time the program opens it:
a walled program of a second run in the same workspace (`dal worker --concurrency 2`, two `dal run`s) can swap
it at any instant. The wall alone must then keep the store's content from the program.

Executed under Landlock with two runs at once: one loops a python3 that flips `sub/s4` between a file and a
symlink to `../.dal/dal.db`; the other runs `touch top.txt && head -c 16 sub/s4` (a default-toolset pipeline
that writes at the workspace's top, which Landlock runs with the roots whole): 16 of 300 printed `SQLite
format 3`. Here the swap is made between the check and the start (the recheck bypassed), so the test does not
depend on timing. Behind bubblewrap the store is an empty folder. Open under Landlock (NEWS 'ATTACK: store
behind a swap'): "roots whole" gives the pipeline the store too, and the put-back covers only protected names.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest

from dal.effects import EffectContext, Policy, check_command, execute_checked, sandbox_status
from dal.effects.exec import executor
from dal.effects.wall import landlock_wall

STORE = b"SQLite format 3\0 journal: tok-55120934\n"
KINDS = [
    pytest.param("bubblewrap", marks=pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")),
    pytest.param("landlock", marks=[
        pytest.mark.skipif(landlock_wall.missing() is not None, reason=str(landlock_wall.missing())),
        pytest.mark.xfail(strict=True, reason="open: a toolset pipeline that writes at the workspace's top runs "
                          "with the roots whole under Landlock, the store included")]),
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_name_swapped_for_a_store_link_after_the_check_reads_nothing_of_the_store(
        tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    (ws / ".dal").mkdir(parents=True)
    (ws / ".dal" / "dal.db").write_bytes(STORE)
    (ws / "sub").mkdir()
    (ws / "sub" / "s4").write_text("plain\n")
    monkeypatch.setenv("DAL_WALL", kind)
    policy = Policy.load(ws, _skip_file=True)
    command = "touch top.txt && head -c 40 sub/s4"
    decision = check_command(command, policy)
    assert decision.allowed, decision
    os.unlink(ws / "sub" / "s4")
    os.symlink("../.dal/dal.db", ws / "sub" / "s4")  # what the other run's program does, at the worst instant
    with mock.patch.object(executor, "recheck", lambda c, p: None):
        r = execute_checked(command, decision, EffectContext(policy=policy, timeout=20))
    assert (ws / "top.txt").exists(), r
    assert b"tok-55120934" not in (r.stdout + r.stderr).encode(), r.stdout
