"""The PostgreSQL key lock is a fence: the lock is a session's, and a session can end while
its process lives on (a network cut of that one connection, an idle timeout, pg_terminate_backend). Each fault is
injected for real on the tests' server, and the effects are counted in the world (lines appended to a file)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dal.receipts.location import StoreLocation, open_store
from dal.receipts.pg.lock import fence_id, lock_id
from dal.receipts.store import LockLost
from tests.pg.world import World

OTHER_BOOT = "import dal.core.liveness as _p\n_p._BOOT_ID[:] = ['00000000-0000-4000-8000-0000000000aa']\n"


def _store(url: str, tmp_path: Path) -> Any:
    return open_store(StoreLocation.parse(url, tmp_path))


def _lock_backends(url: str, key: str) -> list[int]:
    """The backends holding `key`'s advisory lock now."""
    k = lock_id(key)
    with psycopg.connect(url, autocommit=True) as c:
        return [r[0] for r in c.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
            " AND classid = ((%s >> 32) & 4294967295)::bigint::oid AND objid = (%s & 4294967295)::bigint::oid",
            (k, k)).fetchall()]


def _cut(url: str, key: str) -> None:
    """End the session holding `key`'s lock, and only it (a network blip on that one connection)."""
    pids = _lock_backends(url, key)
    assert len(pids) == 1, pids
    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute("SELECT pg_terminate_backend(%s, 5000)", (pids[0],)).fetchone()[0]


def test_an_intent_after_the_lock_session_ended_is_refused_and_writes_nothing(pg_url: str, tmp_path: Path) -> None:
    a = _store(pg_url, tmp_path)
    rid = "run_20261201T100000000Z_aaaaaa"
    a.begin_run(rid, operation="k", key="k")
    lock = a.operation_lock("k")
    lock.acquire(rid)
    a.journal_intent(rid, 1, "echo one", "local")
    assert a.key_holder("k")["run_id"] == rid
    _cut(pg_url, "k")
    assert a.key_holder("k") is None
    with pytest.raises(LockLost, match="no longer holds the lock of operation 'k'"):
        a.journal_intent(rid, 2, "echo two", "local")
    with pytest.raises(LockLost):  # a gate's hold journals an intent too
        a.journal_hold(rid, 2, "echo two", "external", detail={"pending": True})
    # Another holder takes the key: the lost holder stays fenced (a reused backend pid would not pass either:
    # the check compares the backend's start time too).
    b = _store(pg_url, tmp_path)
    other = b.operation_lock("k")
    other.acquire("run_20261201T100001000Z_bbbbbb")
    assert other.lost_holder is not None and other.lost_holder["run_id"] == rid  # it never let go
    with pytest.raises(LockLost):
        a.journal_intent(rid, 2, "echo two", "local")
    assert [e["seq"] for e in a.journal(rid)] == [1]
    # The result of an effect that ran is still journaled: it is what keeps the next holder from repeating it.
    a.journal_result(rid, 1, {"status": "ok", "exit_code": 0})
    other.release()
    lock.release()
    a.close()
    b.close()


def test_a_new_holder_waits_for_the_old_holders_intent_in_flight(pg_url: str, tmp_path: Path) -> None:
    """The ordering that makes the fence whole: an intent whose check passed just before its lock was lost
    commits before the next holder reads the journal (it holds the fence id shared; the taker takes it
    exclusively)."""
    a = _store(pg_url, tmp_path)
    lock = a.operation_lock("k")
    lock.acquire("run_20261201T100000000Z_aaaaaa")
    in_flight = psycopg.connect(pg_url)  # an intent's transaction, its check passed, not yet committed
    in_flight.execute("SELECT pg_advisory_xact_lock_shared(%s)", (fence_id("k"),))
    _cut(pg_url, "k")
    b = _store(pg_url, tmp_path)
    taker = b.operation_lock("k")
    took = threading.Event()
    t = threading.Thread(target=lambda: (taker.acquire("run_20261201T100001000Z_bbbbbb"), took.set()), daemon=True)
    t.start()
    assert not took.wait(0.5), "the new holder went on while an intent of the old one was in flight"
    in_flight.commit()
    assert took.wait(10), "the new holder did not go on once the intent in flight committed"
    in_flight.close()
    taker.release()
    lock.release()
    a.close()
    b.close()


def test_the_servers_idle_session_timeout_does_not_end_a_runs_key_lock(world: World) -> None:
    """No fault injected: the database ends sessions idle for 0.5 s; the run's lock session idles
    for its whole run, and its store session while an effect runs. Both live on: the lock is still held well
    past the timeout, and the run completes (its next intent and its receipt written), the append once."""
    with psycopg.connect(world.url, autocommit=True) as c:
        db = c.execute("SELECT current_database()").fetchone()[0]
        c.execute(f"ALTER DATABASE {db} SET idle_session_timeout = 500")
    world.write("slow.dal", 'run("sleep 2")\nrun("echo sent >> out.txt")\n')
    a = world.spawn("run", "--key", "k", "slow.dal")
    first = world.wait_for(lambda: _lock_backends(world.url, "k"), 30, "the run to take its key lock")
    time.sleep(1.2)  # more than twice the server's idle timeout
    assert _lock_backends(world.url, "k") == first  # the same session still holds it
    assert a.wait(60) == 0, a.stderr.read()
    assert world.lines("out.txt") == ["sent"]


def _run_losing_its_lock(world: World, *, taker_env: dict[str, str], sleep: int = 2) -> tuple[Any, Any]:
    """Run A of key k (`sleep`, then an append); while A sleeps its lock's session is ended; run B of the key
    starts (with `taker_env`). Returns (A's process, B's completed process)."""
    world.write("s.dal", f'run("sleep {sleep}")\nrun("echo sent >> out.txt")\n')
    a = world.spawn("run", "--key", "k", "s.dal")
    world.wait_for(lambda: _lock_backends(world.url, "k"), 30, "run A to take its key lock")
    time.sleep(0.5)
    _cut(world.url, "k")
    b = subprocess.run([sys.executable, "-m", "dal", "run", "--key", "k", "s.dal"], cwd=world.ws,
                       env=world.env(**taker_env), text=True, capture_output=True, timeout=120)
    return a, b


def test_a_run_that_lost_its_lock_stops_before_its_next_effect_and_the_taker_here_waits(world: World) -> None:
    # A sleeps long enough that B (a new process, slow to start on a loaded machine) finds it still running.
    a, b = _run_losing_its_lock(world, taker_env={}, sleep=6)
    # B, on A's machine, sees A alive: it does not bury it, runs nothing, exit 3.
    assert b.returncode == 3 and "lost its key lock" in b.stderr and "nothing ran" in b.stderr, b.stderr
    # A stops at its next intent: the append does not start.
    assert a.wait(60) == 2
    err = a.stderr.read()
    assert "error[store]" in err and "no longer holds the lock of operation 'k'" in err, err
    assert world.lines("out.txt") == []
    # Once A has its receipt, the next invocation continues the operation: the append, once.
    c = world.dal("run", "--key", "k", "s.dal")
    assert c.returncode == 0, c.stderr
    assert world.lines("out.txt") == ["sent"]
    with world.store() as s:
        runs = s.runs_of_key("k")
    assert [r["status"] for r in runs] == ["completed", "interrupted"]


def test_a_taker_on_another_host_buries_the_run_and_the_fence_keeps_it_from_a_second_append(world: World,
                                                                                             tmp_path: Path) -> None:
    """Across hosts nothing proves run A alive: B buries it and continues the operation; A, fenced, never
    starts its append. The append runs once."""
    other = tmp_path / "otherhost"
    other.mkdir()
    (other / "sitecustomize.py").write_text(OTHER_BOOT, encoding="utf-8")
    a, b = _run_losing_its_lock(world, taker_env={"PYTHONPATH": f"{other}{os.pathsep}{world.env()['PYTHONPATH']}"})
    assert b.returncode == 0, b.stderr
    assert a.wait(60) == 2
    assert "no longer holds the lock of operation 'k'" in a.stderr.read()
    assert world.lines("out.txt") == ["sent"]


def test_a_live_run_on_another_host_is_running_and_its_executing_effect_cannot_be_resolved(world: World,
                                                                                           tmp_path: Path) -> None:
    """Seen from another machine (another boot id), a run executing a non-idempotent effect is
    `running` (its key's lock is held for it), not `died`; `dal resolve --as retry` of that effect is too late."""
    other = tmp_path / "otherhost"
    other.mkdir()
    (other / "sitecustomize.py").write_text(OTHER_BOOT, encoding="utf-8")
    world.write("dal.toml", '[run]\nallow = ["sleep"]\n[programs.sleep]\nclass = "local"\nidempotent = false\n')
    world.write("s.dal", 'run("echo start >> out.txt")\nrun("sleep 60")\nrun("echo after >> out.txt")\n')
    run = subprocess.Popen([sys.executable, "-m", "dal", "run", "--key", "k", "s.dal"], cwd=world.ws, text=True,
                           env=world.env(DAL_STOP_GRACE="0.2"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    world.wait_for(lambda: world.lines("out.txt") == ["start"], 30, "the run to reach its sleep")
    time.sleep(0.3)
    env = world.env(PYTHONPATH=f"{other}{os.pathsep}{world.env()['PYTHONPATH']}")

    def there(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "dal", *args], cwd=world.ws, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    # At once (each takes its start-up time), all while the run is inside its effect.
    procs = [there("resolve", "k", "--effect", "2", "--as", "retry"), there("receipts"), there("receipt", "show", "k")]
    for p in procs:
        p.wait(60)
    resolved, listed, shown = (subprocess.CompletedProcess(p.args, p.returncode, p.stdout.read(), p.stderr.read())
                               for p in procs)
    assert run.poll() is None, "the run ended before the other host looked"
    run.send_signal(signal.SIGTERM)  # the run stops, its command ended, as `dal run` does on SIGTERM
    assert run.wait(60) == 143, run.stderr.read()
    line = [r for r in listed.stdout.splitlines() if r.startswith("run_")][0]
    assert " running " in f" {line} " and "died" not in listed.stdout, listed.stdout
    assert shown.stdout.startswith("running"), shown.stdout + shown.stderr
    assert resolved.returncode != 0 and "too late" in resolved.stderr, resolved.stdout + resolved.stderr
    with world.store() as s:
        assert s.approvals(s.find_run("k")["run_id"]) == []
    assert world.lines("out.txt") == ["start"]
