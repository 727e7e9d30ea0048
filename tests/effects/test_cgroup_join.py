"""bubblewrap joins the command's cgroup before its exec through cgroup v1's `tasks` (Cgroup.join_files, written
by the shell that execs it, executor.walled_argv: the writing thread, the whole single-threaded process, moves
without waiting for an RCU grace period), executed: the program is in the command's cgroups and the command gets
the processes it got through cgroup.procs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.wall.limits import Cgroup, CommandLimits, _own_cgroups


def _v1_pids() -> bool:
    cg = Cgroup.create(CommandLimits(64, 1 << 20, 1 << 30, 1 << 20, 5))
    if cg is None:
        return False
    ok = "pids" in cg.dirs
    cg.close()
    return ok


pytestmark = pytest.mark.skipif(not (sandbox_status()[0] and _v1_pids()),
                                reason="needs bubblewrap and a cgroup v1 pids controller DAL can use")


def _ctx(ws: Path, limits: str) -> EffectContext:
    (ws / "dal.toml").write_text(f'[run]\nallow = ["sh"]\n[limits]\n{limits}\n')
    return EffectContext(policy=Policy.load(ws), use_sandbox=True)


def _through_procs(self: Cgroup) -> tuple[str, ...]:  # the way before: "0" to cgroup.procs, which waits for RCU
    return self.procs_files()


@pytest.mark.parametrize("through", ["tasks", "cgroup.procs"])
def test_the_process_limit_is_the_same_either_way(tmp_path: Path, through: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if through == "cgroup.procs":
        monkeypatch.setattr(Cgroup, "join_files", _through_procs)
    r = run_effect("sh -c 'for i in 1 2 3 4 5 6 7 8; do sleep 1 & echo $i; done; wait'",
                   _ctx(tmp_path, "max_processes = 6"))
    # 6: the wall's two bubblewrap processes, the shell and 3 sleeps; the 4th sleep cannot start.
    assert r.stdout.split() == ["1", "2", "3"], (r.stdout, r.stderr)
    assert r.limit is not None and "the process limit, 6 at a time" in r.limit


def test_the_program_is_in_the_commands_cgroups(tmp_path: Path) -> None:
    r = run_effect("sh -c 'cat /proc/self/cgroup'", _ctx(tmp_path, ""))
    assert r.ok, r.stderr
    for controller in ("pids", "memory"):
        if controller in _own_cgroups():
            lines = [line for line in r.stdout.splitlines() if line.split(":")[1:2] == [controller]]
            assert len(lines) == 1 and f"/dal-{os.getpid()}-" in lines[0], r.stdout
