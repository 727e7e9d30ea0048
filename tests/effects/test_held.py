"""A DAL killed -9 while a pipeline runs does not skip the checks after it: what the git guard and the wall hold
is recorded in .dal/held before the pipeline starts, and the next start finishes them (dal/effects/guard/held.py).
And a wall that fails to set up after the guard started still finishes the guard (executor._run_pipeline)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.exec import executor
from dal.effects.guard.recover import RecoverRefused, recover

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
walled = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")
WALL_OR_NOT = pytest.mark.parametrize("wall", [pytest.param(True, marks=walled, id="wall"),
                                               pytest.param(False, id="no-wall")])

from test_git_guard import operator, refs, repo  # noqa: E402


def ctx(ws: Path, wall: bool) -> EffectContext:
    policy = Policy.load(ws, allow_run=["sh", "git"])
    return EffectContext(policy=policy, use_sandbox=wall, unsandboxed_as_root=True, timeout=20)


def killed_during(ws: Path, command: str, wall: bool, after: float) -> None:
    """Run `command` in a forked DAL that is killed with SIGKILL once the command has made `ready` in the
    workspace (then `after` seconds more), or after 30 s."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        def die() -> None:
            deadline = time.monotonic() + 30
            while not (ws / "ready").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(after)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=die, daemon=True).start()
        run_effect(command, ctx(ws, wall))
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


@WALL_OR_NOT
def test_kill_9_mid_pipeline_then_the_next_start_finishes_the_checks(tmp_path: Path, wall: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "locks_git", lambda pipeline: False)  # `sh` stands in for git (test_git_guard)
    ws, _ = repo(tmp_path)
    before = refs(ws)
    killed_during(ws, "sh -c 'mkdir -p sub && printf \"[run]\\nallow = [\\\"sh\\\"]\\n\" > sub/dal.toml && "
                      "git add sub && git commit -qm policy && touch ready && sleep 10'", wall, 0.1)
    # Nothing checked yet: the commit holding a policy file is there, and the record of what was held.
    assert refs(ws) != before
    assert "sub/dal.toml" in operator(ws, "ls-tree", "-r", "--name-only", "HEAD").stdout
    assert len(list((ws / ".dal" / "held").glob("*.json"))) == 1
    notices = recover(Policy.load(ws, allow_run=["sh", "git"]))  # the next start in this workspace
    assert len(notices) == 1 and "killed while a command ran" in notices[0], notices
    assert "sub/dal.toml" in notices[0] and "put back as they were before the command" in notices[0]
    assert refs(ws) == before
    assert "sub/dal.toml" not in operator(ws, "ls-files").stdout
    if wall:  # the wall's own undo ran too: the nested policy file made inside it is gone
        assert not (ws / "sub" / "dal.toml").exists()
        assert "sub/dal.toml (made inside the wall; removed)" in notices[0]
    assert list((ws / ".dal" / "held").glob("*")) == []
    assert recover(Policy.load(ws, allow_run=["sh", "git"])) == []  # done once


def test_a_record_that_cannot_be_read_stops_the_next_start(tmp_path: Path) -> None:
    ws, _ = repo(tmp_path)
    held = ws / ".dal" / "held"
    held.mkdir(parents=True)
    (held / "999999999-1-1.json").write_text("{not json")  # a pid that no process has
    with pytest.raises(RecoverRefused, match="cannot be read"):
        recover(Policy.load(ws))
    assert (held / "999999999-1-1.json").exists()  # left for the operator


def test_a_record_of_a_live_dal_is_left_alone(tmp_path: Path) -> None:
    ws, _ = repo(tmp_path)
    held = ws / ".dal" / "held"
    held.mkdir(parents=True)
    from dal.effects.wall.reaper import owner_tag

    mine = held / f"{owner_tag(os.getpid())}-7.json"
    mine.write_text("{not json")
    assert recover(Policy.load(ws)) == []
    assert mine.exists()


@walled
def test_a_wall_that_fails_after_the_guard_started_still_finishes_the_guard(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Injected: between GitGuard.start and the wall, the repository gets a commit holding a lookalike (what a
    racing process could do), then the wall's set-up fails with an OSError. Before: the guard was never
    finished (and the OSError escaped as an internal error)."""
    ws, _ = repo(tmp_path)
    before = refs(ws)
    real = executor.Wall

    def failing(*a: object, **kw: object) -> object:
        (ws / "x" / "objects").mkdir(parents=True)
        (ws / "x" / "refs").mkdir()
        for name in ("HEAD", "objects/keep", "refs/keep"):
            (ws / "x" / name).write_text("ref: refs/heads/main\n")
        operator(ws, "add", "x")
        operator(ws, "commit", "-qm", "x")
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(executor, "Wall", failing)
    monkeypatch.setattr(executor, "locks_git", lambda pipeline: False)
    r = run_effect("git status", ctx(ws, True))
    monkeypatch.setattr(executor, "Wall", real)
    assert r.code == 126, r.stderr
    assert "denied at start: the wall cannot be set up: [Errno 24] Too many open files" in r.stderr
    assert r.stderr.startswith("dal: git: x/HEAD")  # the guard's finding, first
    assert refs(ws) == before
    assert not (ws / ".dal" / "held").exists() or list((ws / ".dal" / "held").iterdir()) == []


@walled
def test_the_next_start_in_a_nested_workspace_finishes_the_outer_runs_checks(tmp_path: Path) -> None:
    """A run in /ws killed while its program had made /ws/sub/dal.toml: the next start is `cd sub && dal run`,
    whose workspace is /ws/sub. It finishes /ws's record first, so it never runs under the script's file."""
    ws, _ = repo(tmp_path)
    (ws / "sub").mkdir()
    killed_during(ws, "sh -c 'printf \"[run]\\nallow = [\\\"sh\\\"]\\n\" > sub/dal.toml && touch ready && sleep 10'",
                  True, 0.1)
    assert (ws / "sub" / "dal.toml").exists()
    (ws / "sub" / "later.dal").write_text('print(run("sh -c \'echo ran > pwned\'").status)\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])

    def later() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dal", "run", "later.dal"], cwd=ws / "sub", env=env,
                              capture_output=True, text=True, timeout=60)

    first = later()  # the operator's `cd sub && dal run`: its policy was read from the script's sub/dal.toml
    assert first.returncode == 2 and "sub/dal.toml (made inside the wall; removed)" in first.stderr, first
    assert "Nothing ran" in first.stderr and not (ws / "sub" / "pwned").exists()
    assert not (ws / "sub" / "dal.toml").exists()
    again = later()  # now under the default policy: sh is not allowed
    assert again.returncode == 0 and again.stdout == "denied\n", again
    assert not (ws / "sub" / "pwned").exists()
