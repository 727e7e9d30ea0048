"""Resource limits (`[limits]`), executed: file sizes, processes (a fork bomb as root), memory, the private
/tmp, the number of simple commands, and a timeout that covers starting every process."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import dal
from dal.effects import EffectContext, Policy, PolicyError, check_command, run_effect, sandbox_status
from dal.effects.policy import LIMIT_DEFAULTS
from dal.effects.wall.limits import Cgroup, CommandLimits, _own_cgroups

HAVE_BWRAP = sandbox_status()[0]
WALLS = [pytest.param(False, id="no-wall"),
         pytest.param(True, id="wall", marks=pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable"))]


def _cgroups_work() -> bool:
    cg = Cgroup.create(CommandLimits(64, 1 << 20, 1 << 30, 1 << 20, 5))
    if cg is None:
        return False
    ok = cg.bounds_processes
    cg.close()
    return ok


# As root, RLIMIT_NPROC binds nothing: only a pids cgroup stops a fork bomb. Never run one unbounded.
BOUNDED = os.geteuid() != 0 or _cgroups_work()


def policy_with(ws: Path, limits: str, allow: tuple[str, ...] = ("sh",)) -> Policy:
    (ws / "dal.toml").write_text(f"[run]\nallow = {list(allow)!r}\n[limits]\n{limits}\n".replace("'", '"'))
    return Policy.load(ws)


def ctx(policy: Policy, wall: bool, **kw: object) -> EffectContext:
    return EffectContext(policy=policy, use_sandbox=wall, unsandboxed_as_root=True, **kw)  # type: ignore[arg-type]


def test_limits_keys_sizes_and_errors(tmp_path: Path) -> None:
    p = policy_with(tmp_path, 'max_commands = 3\nmax_processes = 10\nmax_file_size = "1M"\nmax_memory = "2G"\n'
                              'tmp_size = 4096')
    assert [p.limit(k) for k in ("max_commands", "max_processes", "max_file_size", "max_memory", "tmp_size")] == [
        3, 10, 1 << 20, 2 << 30, 4096]
    assert Policy.load(tmp_path / "..").limit("max_processes") == LIMIT_DEFAULTS["max_processes"]
    for bad, key in (('max_memory = "lots"', "limits.max_memory"), ("max_commands = 0", "limits.max_commands"),
                     ('max_processes = "10"', "limits.max_processes"), ("tmp_size = -1", "limits.tmp_size"),
                     ("max_file_size = true", "limits.max_file_size"), ("max_stages = 3", "limits.max_stages")):
        with pytest.raises(PolicyError) as e:
            policy_with(tmp_path, bad)
        assert f"dal.toml: {key}:" in str(e.value)
    assert "expected a positive number of bytes" in _error(tmp_path, 'tmp_size = "1X"')
    assert "unknown key" in _error(tmp_path, "max_stages = 3")


def _error(ws: Path, text: str) -> str:
    try:
        policy_with(ws, text)
    except PolicyError as e:
        return str(e)
    raise AssertionError("no error")


def test_the_number_of_simple_commands_is_bounded_at_check_time(tmp_path: Path) -> None:
    policy = Policy.load(tmp_path)
    denied = check_command(" | ".join(["sleep 5"] * 2000), policy)
    assert not denied.allowed
    assert denied.reason == "2000 simple commands in one run(); [limits] max_commands allows 64"
    assert check_command(" | ".join(["true"] * 64), policy).allowed
    assert not check_command(" && ".join(["true"] * 65), policy).allowed  # lists count too


@pytest.mark.parametrize("wall", WALLS)
def test_a_file_stops_at_the_file_size_limit(tmp_path: Path, wall: bool) -> None:
    policy = policy_with(tmp_path, 'max_file_size = "1M"')
    started = time.monotonic()
    r = run_effect("seq inf | tee f > /dev/null", ctx(policy, wall, timeout=20))
    assert time.monotonic() - started < 10
    assert r.status == "failed" and r.code == 153  # tee killed by SIGXFSZ
    assert r.limit == "a file reached the file size limit, 1 MiB ([limits] max_file_size)"
    assert str(r) == f"command failed (exit 153): limit reached: {r.limit}"
    assert (tmp_path / "f").stat().st_size == 1 << 20
    assert not list(tmp_path.glob("core*"))  # no core dump left in the workspace


def _count(marker: str) -> int:
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    n += marker.encode() in f.read()
            except OSError:
                pass
    return n


@pytest.fixture()
def peak() -> Iterator[dict[str, object]]:
    """Samples how many processes carry a marker in their command line, while a test runs."""
    state: dict[str, object] = {"marker": f"bomb-{os.getpid()}-{time.monotonic_ns()}", "peak": 0, "stop": False}

    def watch() -> None:
        while not state["stop"]:
            state["peak"] = max(int(state["peak"]), _count(str(state["marker"])))  # type: ignore[call-overload]
            time.sleep(0.01)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    yield state
    state["stop"] = True
    t.join()


@pytest.mark.skipif(not BOUNDED, reason="root without a pids cgroup: a fork bomb would not be bounded")
@pytest.mark.parametrize("wall", WALLS)
def test_a_fork_bomb_as_root_is_bounded(tmp_path: Path, wall: bool, peak: dict[str, object]) -> None:
    policy = policy_with(tmp_path, "max_processes = 40")
    marker = peak["marker"]
    started = time.monotonic()
    r = run_effect(f"sh -c 'f() {{ f | f & }}; f; sleep 2' {marker}", ctx(policy, wall, timeout=6))
    took = time.monotonic() - started
    assert took < 10
    assert r.limit is not None and "the process limit, 40 at a time ([limits] max_processes)" in r.limit
    assert "limit reached" in str(r)
    assert 0 < int(peak["peak"]) <= 40  # type: ignore[call-overload]
    time.sleep(0.2)
    assert _count(str(marker)) == 0  # nothing of it outlives the command


@pytest.mark.parametrize("wall", WALLS)
def test_memory_and_tmp_files_count_against_the_memory_limit(tmp_path: Path, wall: bool) -> None:
    policy = policy_with(tmp_path, 'max_memory = "64M"\ntmp_size = "256M"')
    # One 100 MB line: sort needs it whole in memory, in 64 MB of address space.
    hungry = run_effect("sh -c 'head -c 100000000 /dev/zero | sort'", ctx(policy, wall))
    assert hungry.status == "failed" and "sort: memory exhausted" in hungry.stderr
    if wall and _cgroups_work() and _own_cgroups().get("memory"):
        # Files in the wall's /tmp are memory: a memory cgroup counts them, whatever tmp_size allows.
        r = run_effect("sh -c 'head -c 150000000 /dev/zero > /tmp/x'", ctx(policy, wall))
        assert r.status == "failed" and r.code == 137
        assert r.limit == "the memory limit, 64 MiB ([limits] max_memory), killed a process"


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable")
def test_three_sorts_through_a_capped_tmp(tmp_path: Path) -> None:
    policy = policy_with(tmp_path, 'tmp_size = "4M"', allow=())
    (tmp_path / "big.txt").write_text("".join(f"{i}\n" for i in range(1_500_000)))  # 11 MB
    r = run_effect("sort -S 1M -r big.txt | sort -S 1M | sort -S 1M -r | tail -1", ctx(policy, True, timeout=60))
    assert "No space left on device" in r.stderr  # the private /tmp is full at 4 MB: sort stops
    assert r.stdout == ""
    (tmp_path / "dal.toml").unlink()
    ok = run_effect("sort -S 1M -r big.txt | sort -S 1M | sort -S 1M -r | tail -1", ctx(Policy.load(tmp_path), True,
                                                                                         timeout=60))
    assert ok.ok and ok.stdout == "0\n", ok.stderr  # the default 256 MB is enough for it


@pytest.mark.parametrize("wall", WALLS)
def test_a_long_pipeline_ends_within_its_timeout(tmp_path: Path, wall: bool, peak: dict[str, object]) -> None:
    policy = policy_with(tmp_path, "max_commands = 3000\nmax_processes = 10000", allow=())
    # `sleep` takes several operands and sleeps their sum: the marker is one of them, a harmless 0.
    marker = f"0.{str(peak['marker']).split('-')[-1]}"
    sleeps = " | ".join([f"sleep 5 {marker}"] * 2000)
    started = time.monotonic()
    r = run_effect(sleeps, ctx(policy, wall, timeout=2))
    took = time.monotonic() - started
    assert r.status == "timeout" and str(r).startswith("command timed out after 2s")
    assert took < 5, took  # not 23 s: starting processes counts against the timeout
    time.sleep(0.3)
    assert _count(marker) == 0


@pytest.mark.parametrize("wall", WALLS)
def test_limits_are_in_place_before_the_program_runs(tmp_path: Path, wall: bool) -> None:
    policy = policy_with(tmp_path, 'max_file_size = "3M"\nmax_memory = "1G"')
    r = run_effect("sh -c 'cat /proc/self/limits /proc/self/cgroup'", ctx(policy, wall))
    assert r.ok, r.stderr
    limits = {line[:26].strip(): line[26:].split() for line in r.stdout.splitlines() if line.startswith("Max ")}
    assert limits["Max file size"][:2] == [str(3 << 20)] * 2
    assert limits["Max address space"][:2] == [str(1 << 30)] * 2
    assert limits["Max core file size"][:2] == ["0", "0"]
    if _cgroups_work():
        assert f"dal-{os.getpid()}-" in r.stdout  # born in the command's cgroup


def test_cgroups_are_removed_after_each_command(tmp_path: Path) -> None:
    from dal.effects.wall import limits

    policy = policy_with(tmp_path, "", allow=())

    def ours() -> list[str]:
        return [n for d in _own_cgroups().values() for n in os.listdir(d) if n.startswith(f"dal-{os.getpid()}-")]

    for wall in (False, HAVE_BWRAP) * 3:
        assert run_effect("sleep 0", ctx(policy, wall)).ok
        # A command's cgroup goes when it ends, or, while its last process is still being reaped, at the
        # next command: never more than the last one's left.
        assert len(ours()) <= len(_own_cgroups())
    limits._retry_leftovers(patience=2.0)  # what happens when DAL exits
    assert ours() == []


def test_a_hit_limit_reads_as_such_in_the_receipt(tmp_path: Path) -> None:
    (tmp_path / "dal.toml").write_text('[limits]\nmax_file_size = "64K"\n')
    r = dal.run('let r = run("seq inf | tee f > /dev/null")\nprint(r.status)\nprint(r.limit)\n', workspace=tmp_path,
                unsandboxed_as_root=True)
    assert r.output == "failed\na file reached the file size limit, 64 KiB ([limits] max_file_size)\n"
    item = r.effects["items"][0]
    assert item["status"] == "failed" and item["summary"].startswith("command failed (exit 153): limit reached: a file")
