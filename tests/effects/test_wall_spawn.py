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
