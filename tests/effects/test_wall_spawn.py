"""bubblewrap is started without a preexec_fn, so subprocess starts it with vfork rather than forking DAL's
whole process (whose heap then faulted page by page, 5-20 ms of CPU per stage); with a cgroup a shell joins it
and execs bubblewrap, so every process of the wall is still born in the command's cgroup."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.exec import executor
from dal.effects.wall.sandbox import BWRAP

pytestmark = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")


def spawned(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    class Spy(subprocess.Popen):  # a Popen still (the executor checks isinstance), recording how it started
        def __init__(self, args: Any, **kw: Any) -> None:
            seen.append({"argv": list(args), **kw})
            super().__init__(args, **kw)

    monkeypatch.setattr(subprocess, "Popen", Spy)
    return seen


def test_each_stage_of_a_walled_pipeline_starts_without_a_preexec_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = spawned(monkeypatch)
    r = run_effect("echo hi | tr a-z A-Z", EffectContext(policy=Policy.load(tmp_path)))
    assert r.ok and r.stdout == "HI\n", r.stderr
    assert len(seen) == 2 and all(s["preexec_fn"] is None for s in seen)
    for s in seen:
        argv = s["argv"]
        if argv[0] == BWRAP:  # no cgroup here: bubblewrap itself
            continue
        # the join shell: "0" into each of the command's cgroup files, then bubblewrap's command line
        n = int(argv[4])
        assert argv[:3] == [executor._SH, "-c", executor._JOIN] and argv[5 + n] == BWRAP
        assert all(f.endswith(("/tasks", "/cgroup.procs")) for f in argv[5:5 + n])


def test_without_a_shell_the_stage_is_forked_with_its_preexec_step_as_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "_SH", None)
    seen = spawned(monkeypatch)
    r = run_effect("echo hi", EffectContext(policy=Policy.load(tmp_path)))
    assert r.ok and r.stdout == "hi\n", r.stderr
    assert seen[0]["argv"][0] == BWRAP
    cgroup = executor.Cgroup.create(executor.CommandLimits.of(Policy.load(tmp_path), 5))
    if cgroup is not None:  # with a cgroup to join, only a forked child can do it without the shell
        cgroup.close()
        assert seen[0]["preexec_fn"] is not None


def _walls_of(ws: Path) -> list[int]:
    """Live bubblewrap processes (and their sandboxes' inits) whose command line names `ws` (its --chdir)."""
    import os

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if cmd[0] == BWRAP.encode() and str(ws).encode() in cmd and state not in (b"Z", b"X"):
            found.append(int(pid))
    return found


def test_on_start_comes_with_every_stage_up_and_held_and_what_it_raises_starts_no_program(tmp_path: Path) -> None:
    from dal.effects import check_command, execute_checked

    policy = Policy.load(tmp_path)
    command = "touch a.txt | touch b.txt"
    seen: dict[str, Any] = {}

    def on_start() -> None:  # where the runner journals the effect's intent
        seen["walls"] = len(_walls_of(tmp_path))
        seen["files"] = sorted(p.name for p in tmp_path.iterdir())
        raise RuntimeError("the journal refused the intent")

    with pytest.raises(RuntimeError, match="refused the intent"):
        execute_checked(command, check_command(command, policy), EffectContext(policy=policy), on_start=on_start)
    # Both stages' sandboxes were set up (bubblewrap and its sandbox's init each), neither program had run ...
    assert seen["walls"] >= 4 and "a.txt" not in seen["files"] and "b.txt" not in seen["files"], seen
    # ... and none ever does: the held stages were killed.
    import time

    deadline = time.monotonic() + 5
    while _walls_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _walls_of(tmp_path) == [] and not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()

    ran: list[bool] = []
    r = execute_checked(command, check_command(command, policy), EffectContext(policy=policy),
                        on_start=lambda: ran.append(True))
    assert r.ok and ran == [True] and (tmp_path / "a.txt").exists()  # called once, before the programs ran
