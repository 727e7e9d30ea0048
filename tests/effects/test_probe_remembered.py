"""A bubblewrap probe that succeeded is remembered across processes (dal/effects/wall/probed.py): the next
process with the same bubblewrap, user, boot and namespaces does not spawn it again; anything else probes.
A remembered answer can only say "it works", and when that is wrong, commands fail inside the wall's start
instead of running outside it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from effects_workspace import build_workspace

from dal.effects import EffectContext, Policy, run_effect
from dal.effects.wall import probed, sandbox


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state folder of the test's own, and a probe that starts afresh (as in a new process)."""
    folder = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    monkeypatch.setattr(sandbox, "BWRAP", sandbox.BWRAP)
    monkeypatch.setattr(sandbox, "_BIND_BY_FD", True)
    monkeypatch.setattr(sandbox, "_pending", None)
    sandbox.sandbox_status.cache_clear()
    yield folder / "dal"
    sandbox.sandbox_status.cache_clear()  # the next caller probes the real bubblewrap again


def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> tuple[str, Path]:
    """A bubblewrap that counts its starts in a file, then runs `body`."""
    exe, count = tmp_path / "bwrap", tmp_path / "starts"
    exe.write_text(f"#!/bin/sh\necho x >> {count}\n{body}\n")
    exe.chmod(0o755)
    monkeypatch.setattr(sandbox, "_which", lambda name, path: str(exe) if name == "bwrap" else "/bin/true")
    monkeypatch.setattr(sandbox, "_base", lambda *a, **k: [str(exe)])
    return str(exe), count


def new_process() -> tuple[bool, str]:
    sandbox.sandbox_status.cache_clear()
    return sandbox.sandbox_status()


def starts(count: Path) -> int:
    return len(count.read_text().split()) if count.exists() else 0


def test_a_probe_that_worked_is_not_spawned_again_by_the_next_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
    exe, count = fake(tmp_path, monkeypatch, "exit 0")
    assert new_process() == (True, f"bubblewrap at {exe}")
    assert new_process() == (True, f"bubblewrap at {exe}")
    sandbox.start_probe()  # as `dal run` starts it early
    assert sandbox.sandbox_status() == (True, f"bubblewrap at {exe}")
    assert starts(count) == 1
    assert (state / "bwrap-probe").stat().st_mode & 0o777 == 0o600


def test_a_failed_probe_is_probed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
    _, count = fake(tmp_path, monkeypatch, "echo 'bwrap: No permissions to create new namespace' >&2; exit 1")
    for _ in range(2):
        assert new_process() == (False, "bubblewrap does not work here: bwrap: No permissions to create new namespace")
    assert starts(count) == 2 and not (state / "bwrap-probe").exists()


def test_another_bubblewrap_or_user_namespace_switch_probes_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
    exe, count = fake(tmp_path, monkeypatch, "exit 0")
    new_process()
    Path(exe).write_text(Path(exe).read_text() + "# upgraded\n")  # another binary at the same path
    new_process()
    new_process()
    assert starts(count) == 2
    switch = tmp_path / "max_user_namespaces"
    switch.write_text("15000\n")
    monkeypatch.setattr(probed, "_SWITCHES", (str(switch),))
    new_process()
    switch.write_text("0\n")  # user namespaces turned off since
    new_process()
    assert starts(count) == 4


def test_a_remembered_answer_others_could_have_written_is_not_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
    _, count = fake(tmp_path, monkeypatch, "exit 0")
    new_process()
    (state / "bwrap-probe").chmod(0o666)
    new_process()
    assert starts(count) == 2  # and written again, the user's alone
    assert (state / "bwrap-probe").stat().st_mode & 0o777 == 0o600
    (state / "bwrap-probe").write_text("0" * 64 + "\n")
    new_process()
    assert starts(count) == 3


def test_a_remembered_answer_that_is_wrong_runs_nothing_outside_the_wall(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
    # Conditions the digest does not see changed (an AppArmor profile loaded since): the remembered answer
    # says bubblewrap works, and it does not.
    exe, count = fake(tmp_path, monkeypatch, "echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1")
    probed.remember_good(sandbox._remembered("/bin/true"))
    assert new_process() == (True, f"bubblewrap at {exe}")
    ws, _ = build_workspace(tmp_path)
    r = run_effect("touch made.txt", EffectContext(policy=Policy.load(ws)))
    assert not r.ok and "Permission denied" in r.stderr
    assert not (ws / "made.txt").exists() and starts(count) == 1  # the command's own wall, which did not start
    assert os.path.exists(exe)
