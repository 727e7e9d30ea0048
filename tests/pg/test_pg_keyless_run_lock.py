"""PostgreSQL: a run without a key holds the advisory lock of its own run id (`run:<id>`) for its whole life:
seen from another host (another boot id), the live run is `running`, `dal resume RUN` meets
its lock and `dal resolve RUN --effect N` of the effect it executes is too late; and that lock fences its intents as
a key's does. Real processes on the session's server; effects counted in a marker file."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from dal.receipts.pg.lock import lock_id
from tests.pg.world import World

OTHER_BOOT = "import dal.core.liveness as _p\n_p._BOOT_ID[:] = ['00000000-0000-4000-8000-0000000000cc']\n"
POLICY = '[programs.sh]\nclass = "local"\nidempotent = false\n'
# Effect 2 says it started, then waits until the test lets it go.
SCRIPT = ('run("echo a >> m")\n'
          'run("sh -c \'echo started >> s2; while [ ! -e go ]; do sleep 0.05; done\'")\n'
          'run("echo b >> m")\n'
          'finish("ok")\n')


@pytest.fixture
def world(pg_url: str, tmp_path: Path) -> World:
    w = World(tmp_path / "ws", pg_url)
    w.write("dal.toml", POLICY)
    w.write("s.dal", SCRIPT)
    yield w
    w.stop_all()


def _start(world: World) -> tuple[subprocess.Popen[str], str]:
    run = world.spawn("run", "s.dal")
    world.wait_for(lambda: world.lines("s2") == ["started"], 30, "effect 2 to start")
    listed = json.loads(world.dal("receipts", "--json").stdout)["runs"]
    return run, listed[0]["run_id"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare -m")
def test_a_live_keyless_run_is_neither_resumed_nor_decided_for_from_another_host(world: World,
                                                                                 tmp_path: Path) -> None:
    other = tmp_path / "otherhost"
    other.mkdir()
    (other / "sitecustomize.py").write_text(OTHER_BOOT, encoding="utf-8")
    env = world.env(PYTHONPATH=f"{other}{os.pathsep}{world.env()['PYTHONPATH']}")

    def there(*args: str) -> subprocess.CompletedProcess[str]:
        # Another host shares the database and the workspace's files, not this machine's /tmp registry of walls
        # nor its cgroups: private ones here (else a start there would sweep this host's walls as another boot's).
        setup = ("mount -t tmpfs none /sys/fs/cgroup 2>/dev/null; mkdir -p /tmp/dal-walls-0; "
                 "mount -t tmpfs -o mode=700 none /tmp/dal-walls-0; exec "
                 + shlex.join([sys.executable, "-m", "dal", *args]))
        return subprocess.run(["unshare", "-m", "sh", "-c", setup], cwd=world.ws, env=env, text=True,
                              capture_output=True, timeout=60)

    run, run_id = _start(world)
    try:
        listed = there("receipts", "--json")
        assert [r["status"] for r in json.loads(listed.stdout)["runs"]] == ["running"]  # not `died`
        resumed = there("resume", run_id)
        assert resumed.returncode == 3, resumed.stdout + resumed.stderr
        assert f"run {run_id} is still running in process {run.pid}" in resumed.stderr
        decided = there("resolve", run_id, "--effect", "2", "--as", "retry")
        assert decided.returncode != 0, decided.stdout + decided.stderr
        assert "too late" in decided.stderr and "executing effect 2" in decided.stderr
        assert run.poll() is None, "the run ended before the other host looked"
    finally:
        (world.ws / "go").touch()
        out, err = run.communicate(timeout=60)
    assert run.returncode == 0, out + err
    assert world.lines("m") == ["a", "b"]
    with world.store() as s:
        assert [r["status"] for r in s.list_runs(limit=None)] == ["completed"]
        assert s.approvals(run_id) == []


def test_a_keyless_run_whose_lock_session_ended_starts_no_further_effect(world: World) -> None:
    """The run's own lock fences its intents: its session cut (a network blip, pg_terminate_backend), the run
    stops before its next effect, which a resume from elsewhere may then run; it runs once."""
    run, run_id = _start(world)
    k = lock_id("run:" + run_id)
    try:
        with psycopg.connect(world.url, autocommit=True) as c:
            pids = [r[0] for r in c.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
                " AND classid = ((%s >> 32) & 4294967295)::bigint::oid AND objid = (%s & 4294967295)::bigint::oid",
                (k, k)).fetchall()]
            assert len(pids) == 1, pids  # the live run holds its own lock
            assert c.execute("SELECT pg_terminate_backend(%s, 5000)", (pids[0],)).fetchone()[0]
    finally:
        (world.ws / "go").touch()
        out, err = run.communicate(timeout=60)
    assert run.returncode != 0, out + err
    assert "no longer holds the lock of operation 'run:" in err
    assert world.lines("m") == ["a"]  # effect 3 did not start
    resumed = world.dal("resume", run_id)
    assert resumed.returncode in (0, 3), resumed.stdout + resumed.stderr
    if resumed.returncode == 3:  # effect 2 (non-idempotent, no result journaled) waits for a person
        assert world.dal("resolve", run_id, "--effect", "2", "--as", "done").returncode == 0
        resumed = world.dal("resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert world.lines("m") == ["a", "b"]
