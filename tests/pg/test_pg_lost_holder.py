"""A run that lost its key lock while executing an effect, seen by the next holder of the key.

The run's effect is held open by a gate file (it appends `x` only once the test creates `go`), so the next
invocation always finds it under way: a frozen host, a container's run. Each fault is injected for real on the
tests' server (`pg_terminate_backend`); the effects are counted in the world (lines appended to a file)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.pg.test_pg_key_lock import OTHER_BOOT, _lock_backends
from tests.pg.world import World

SCRIPT = """\
run("echo a >> out.txt")
run("sh -c 'while [ ! -e go ]; do sleep 0.05; done; echo x >> out.txt'")
run("echo b >> out.txt")
"""
POLICY = '[run]\nallow = ["sh", "sleep"]\n'


@pytest.fixture
def world(pg_url: str, tmp_path: Path) -> World:
    w = World(tmp_path / "ws", pg_url)
    w.write("dal.toml", POLICY)
    w.write("s.dal", SCRIPT)
    yield w
    w.stop_all()


def _other_host(world: World, tmp_path: Path) -> dict[str, str]:
    other = tmp_path / "otherhost"
    other.mkdir(exist_ok=True)
    (other / "sitecustomize.py").write_text(OTHER_BOOT, encoding="utf-8")
    return world.env(PYTHONPATH=f"{other}{os.pathsep}{world.env()['PYTHONPATH']}")


def _dal(world: World, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=world.ws, env=env, text=True,
                          capture_output=True, timeout=120)


def _end_sessions(url: str, only_lock: str | None = None) -> None:
    """End run A's database sessions: its key lock's only (`only_lock`), or all of this database's (a partition)."""
    with psycopg.connect(url, autocommit=True) as c:
        if only_lock is not None:
            (pid,) = _lock_backends(url, only_lock)
            c.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        else:
            c.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = current_database()"
                      " AND pid <> pg_backend_pid() AND backend_type = 'client backend'")


def _in_effect(world: World, a: Any) -> None:
    """Wait until run A executes effect 2 (its intent journaled: the store has it with no result)."""
    def there() -> bool:
        assert a.poll() is None, a.stderr.read()
        with world.store() as s:
            run = s.find_run("k")
            return any(e["seq"] == 2 and e.get("result") is None for e in s.journal(run["run_id"]))
    world.wait_for(lambda: world.lines("out.txt") == ["a"] and there(), 30, "run A to start effect 2")


def test_a_run_that_lost_its_lock_on_another_host_is_said_to_may_still_run_and_its_late_result_is_taken(
        world: World, tmp_path: Path) -> None:
    """Host A is cut off from the database mid-effect (all its sessions end). Host B's invocation
    cannot prove A dead: it waits, saying A lost its key lock and may still be executing effect 2; `dal
    resolve --as retry` (and `failed`) is refused without --old-run-gone. A finishes its effect, its result
    reaches the journal, and the next resume takes it: `x` once."""
    a = world.spawn("run", "--key", "k", "s.dal")
    _in_effect(world, a)
    _end_sessions(world.url)
    there = _other_host(world, tmp_path)
    b = _dal(world, there, "run", "--key", "k", "s.dal")
    assert b.returncode == 3, b.stderr
    with world.store() as s:
        runs = s.runs_of_key("k")
        waiting, buried = s.get_run(runs[0]["run_id"]), s.get_run(runs[1]["run_id"])
    assert waiting["status"] == "waiting"
    assert "lost its key lock" in waiting["blocker"] and "may still be executing it" in waiting["blocker"]
    assert "stopped before recording" not in waiting["blocker"]
    assert f"dal receipt show {buried['run_id']}" in waiting["blocker"]
    assert "lost its key lock" in buried["blocker"] and "effect 2" in buried["blocker"], buried["blocker"]
    assert "killed?" not in buried["blocker"]
    shown = _dal(world, there, "receipt", "show", "k")
    assert "--old-run-gone" in shown.stdout and "make sure" in shown.stdout, shown.stdout

    for outcome in ("retry", "failed"):
        refused = _dal(world, there, "resolve", "k", "--as", outcome)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "may still be executing it" in refused.stderr and "--old-run-gone" in refused.stderr, refused.stderr
    with world.store() as s:
        assert all(s.approvals(r["run_id"]) == [] for r in s.runs_of_key("k"))

    (world.ws / "go").write_text("", encoding="utf-8")  # host A thaws: its effect ends, its result is journaled
    assert a.wait(60) == 2, a.stderr.read()
    assert world.lines("out.txt") == ["a", "x"]
    c = _dal(world, there, "resume", "k")
    assert c.returncode == 0, c.stderr
    assert world.lines("out.txt") == ["a", "x", "b"]


def test_the_persons_word_that_the_old_run_is_gone_lets_the_effect_run_again(world: World, tmp_path: Path) -> None:
    """The way out once a person made sure: run A's host is down (here A is killed with its command before the
    append). `--as retry --old-run-gone` is recorded and the resume runs effect 2 once."""
    a = world.spawn("run", "--key", "k", "s.dal")
    _in_effect(world, a)
    _end_sessions(world.url)
    there = _other_host(world, tmp_path)
    assert _dal(world, there, "run", "--key", "k", "s.dal").returncode == 3
    subprocess.run(["pkill", "-KILL", "-P", str(a.pid)], check=False)  # its children: the wall and the command
    a.kill()
    a.wait(30)
    time.sleep(0.3)
    ok = _dal(world, there, "resolve", "k", "--as", "retry", "--old-run-gone", "--note", "host A is down")
    assert ok.returncode == 0, ok.stderr
    (world.ws / "go").write_text("", encoding="utf-8")
    c = _dal(world, there, "resume", "k")
    assert c.returncode == 0, c.stderr
    assert world.lines("out.txt") == ["a", "x", "b"]


def _unshare_ok() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "-p", "-f", "--mount-proc", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _unshare_ok(), reason="needs root and unshare (a pid namespace of its own)")
def test_a_run_in_another_pid_namespace_that_lost_its_lock_is_not_buried_alive(world: World) -> None:
    """Run A runs in a container of this machine (`unshare -p -f --mount-proc`: its pid is a
    number of its own namespace) and its key lock's session ends. The host's invocation must not read A's pid
    as a host process: it sees A in A's namespace, runs nothing and exits 3; A finishes its effect and stops
    at its next one; the next invocation continues the operation: `x` once."""
    inner = (f"{sys.executable} -m dal run --key k s.dal")
    # A private /tmp/dal-walls-0 and no cgroup mount inside, so that the wall's orphan sweep across namespaces
    # (not this test's subject) does not kill A's command first.
    a = subprocess.Popen(
        ["unshare", "-m", "-p", "-f", "--mount-proc", "--kill-child", "sh", "-c",
         "mount -t tmpfs none /sys/fs/cgroup && mkdir -p /tmp/dal-walls-0 && "
         f"mount -t tmpfs -o mode=700 none /tmp/dal-walls-0 && exec {inner}"],
        cwd=world.ws, env=world.env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _in_effect(world, a)
    with psycopg.connect(world.url, autocommit=True) as c:
        pid, holder = c.execute("SELECT pid, holder FROM key_locks").fetchone()
    assert holder["where"]["pidns"] != os.stat("/proc/self/ns/pid").st_ino and isinstance(holder["start"], int)
    _end_sessions(world.url, only_lock="k")
    # Nobody holds the key now, yet A runs: the host's tools say so, and a decision about its effect is too late.
    listed = world.dal("receipts")
    assert " running " in listed.stdout and "died" not in listed.stdout, listed.stdout
    resolved = world.dal("resolve", "k", "--effect", "2", "--as", "retry")
    assert resolved.returncode == 2 and "too late" in resolved.stderr, resolved.stdout + resolved.stderr
    b = world.dal("run", "--key", "k", "s.dal")
    assert b.returncode == 3, b.stderr
    assert "in another pid namespace of this machine" in b.stderr and "nothing ran" in b.stderr, b.stderr
    with world.store() as s:
        assert [r["status"] for r in s.runs_of_key("k")] == ["running"]  # not buried
    (world.ws / "go").write_text("", encoding="utf-8")
    assert a.wait(60) == 2, a.stderr.read()
    assert world.lines("out.txt") == ["a", "x"]
    c2 = world.dal("run", "--key", "k", "s.dal")
    assert c2.returncode == 0, c2.stderr
    assert world.lines("out.txt") == ["a", "x", "b"]


@pytest.mark.skipif(not _unshare_ok(), reason="needs root and unshare (a pid namespace of its own)")
def test_a_holder_in_another_pid_namespace_is_seen_there_alive_and_then_gone() -> None:
    """dal.core.liveness.verdict, the liveness behind the refusal above: a process of another pid namespace is judged
    by its namespace and its pid inside it (here, where the initial namespace sees every process), never by
    the same number in this namespace."""
    from dal.core import liveness

    code = ("import json, os, time; from dal.core.liveness import holder_identity; "
            "print(json.dumps({'pid': os.getpid(), **holder_identity()}), flush=True); time.sleep(60)")
    # {"pid", "start", "where": place()}, as a key lock's row records its holder
    p = subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", "--kill-child", sys.executable, "-c", code],
                         stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    try:
        got = json.loads(p.stdout.readline())
        where = got["where"]
        assert liveness.elsewhere(where) == "pidns"
        assert liveness.verdict(got["pid"], got["start"], where) == "alive"
        assert liveness.verdict(got["pid"], got["start"] + 1, where) != "alive"  # a later process of that pid
    finally:
        p.kill()  # unshare's --kill-child takes the namespace's process with it
        p.wait(10)
    end = time.monotonic() + 10
    while liveness.verdict(got["pid"], got["start"], where) == "alive" and time.monotonic() < end:
        time.sleep(0.05)
    assert liveness.verdict(got["pid"], got["start"], where) != "alive"
    if liveness.pid_namespace() == liveness.INITIAL_PID_NAMESPACE:
        assert liveness.verdict(got["pid"], got["start"], where) == "gone"
