"""The order of a key's runs is the order the store recorded them in, never the clock: a run that
started first but got the key lock last, or a clock that stepped back, must not fork the operation's
chain (the next wake-up would continue an older branch and send again). A run has at most one
successor: a second runner that would continue the same run is refused, whatever lock it took."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from datetime import UTC, datetime, timedelta

from dal.core.digest import sha256

GATED = '[programs.tee]\nclass = "external"\napproval = true\n'
SCRIPT = """\
run("printf 'a0\\n' >> a.log")
run("echo send1 | tee -a outbox.txt")
run("echo send2 | tee -a outbox.txt")
run("printf 'a1\\n' >> a.log")
"""


def _lock_path(d, key: str):
    return d.ws / ".dal" / "locks" / (sha256(key.encode()).hexdigest()[:24] + ".lock")


def _has_open(pid: int, path) -> bool:
    try:
        return any(os.path.realpath(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_a_run_that_got_the_lock_late_does_not_fork_the_chain(durable) -> None:
    d = durable
    d.write("dal.toml", GATED)
    d.write("s.dal", SCRIPT)
    assert d.run("run", "--key", "K", "s.dal").code == 3  # P1 waits at send1
    assert d.cli("approve", "K").code == 0
    lock = _lock_path(d, "K")
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # someone holds the key for a moment
    p2 = d.spawn("run", "--key", "K", "--wait", "60", "s.dal")  # starts first: the smaller run id
    try:
        deadline = time.monotonic() + 30
        while not _has_open(p2.pid, lock):  # P2 minted its run id and waits for the lock
            assert time.monotonic() < deadline and p2.poll() is None
            time.sleep(0.02)
        p2.send_signal(signal.SIGSTOP)  # ... and is slow for a while
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        p3 = d.run("run", "--key", "K", "--wait", "60", "s.dal")
        assert p3.code == 3, p3  # sent send1, waits at send2
        assert d.lines("outbox.txt") == ["send1"]
        assert d.cli("approve", "K").code == 0
    finally:
        p2.send_signal(signal.SIGCONT)
    out, err = p2.communicate(timeout=60)
    assert p2.returncode == 0, err  # continued P3: sent send2, appended a1
    assert d.lines("outbox.txt") == ["send1", "send2"]
    p4 = d.run("run", "--key", "K", "s.dal")
    assert p4.code == 0, p4
    assert d.lines("outbox.txt") == ["send1", "send2"]
    assert d.lines("a.log") == ["a0", "a1"]
    receipts = d.check_store()
    assert receipts[-1]["status"] == "skipped"
    # The chain is a line: every run is continued at most once.
    previous = [r["previous_run"] for r in receipts if r["previous_run"]]
    assert len(previous) == len(set(previous))


def test_a_clock_that_stepped_back_does_not_reopen_a_completed_operation(durable, monkeypatch) -> None:
    import dal.runner.operation as runner_module
    from dal.receipts import ids

    d = durable
    d.write("dal.toml", GATED)
    d.write("s.dal", "run(\"printf 'a0\\n' >> a.log\")\nrun(\"echo send1 | tee -a outbox.txt\")\n")
    fast = lambda: ids.new_run_id(datetime.now(UTC) + timedelta(seconds=60))  # noqa: E731
    monkeypatch.setattr(runner_module, "new_run_id", fast)
    assert d.cli("run", "--key", "k", "s.dal").code == 3  # the clock 60 s fast: waits for approval
    monkeypatch.undo()
    assert d.cli("approve", "k").code == 0
    assert d.cli("run", "--key", "k", "s.dal").code == 0  # the clock corrected: sends, completes
    again = d.cli("run", "--key", "k", "s.dal")
    assert again.code == 0, again
    assert d.lines("outbox.txt") == ["send1"]
    assert d.lines("a.log") == ["a0"]
    from dal.receipts.store import Store

    with Store(d.db, readonly=True) as store:  # the key's runs in the order the store recorded them
        assert [r["status"] for r in store.runs_of_key("k")] == ["skipped", "completed", "waiting"]


def test_a_run_with_a_successor_is_never_continued_twice(durable) -> None:
    """The store's compare-and-set: two runners that both would continue one run (their locks did not
    exclude each other) — the second is refused before anything runs."""
    from dal.receipts.store import RunContinued, Store

    d = durable
    d.write("dal.toml", GATED)
    d.write("s.dal", SCRIPT)
    assert d.cli("run", "--key", "k", "s.dal").code == 3
    waiting = d.latest()["run_id"]
    with Store(d.db) as store:
        store.begin_run("run_20990101T000000000Z_aaaaaa", operation="k", key="k", previous_run=waiting)
        try:
            store.begin_run("run_20990101T000000001Z_bbbbbb", operation="k", key="k", previous_run=waiting)
        except RunContinued as e:
            assert e.by == "run_20990101T000000000Z_aaaaaa"
            assert "already continued by run run_20990101T000000000Z_aaaaaa" in str(e)
        else:
            raise AssertionError("a second successor was recorded")
        assert [r["run_id"] for r in store.runs_of_key("k")][0] == "run_20990101T000000000Z_aaaaaa"


def test_a_version_3_store_keeps_the_order_its_runs_were_recorded_in(tmp_path) -> None:
    """Migration 4 numbers existing runs in the order they were inserted (begun), not by their ids."""
    import sqlite3

    from dal.receipts import store as store_module
    from dal.receipts.store import Store

    db = tmp_path / "dal.db"
    conn = sqlite3.connect(db)
    for version in (1, 2, 3):  # the store main had before runs were numbered (3: the job queue)
        for statement in store_module.MIGRATIONS[version]:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, '2026-01-01T00:00:00.000Z')", (version,))
    # Begun in this order; the second one's clock was a minute fast.
    for rid, prev in (("run_20260101T000000000Z_000001", None), ("run_20260101T000100000Z_000002",
                      "run_20260101T000000000Z_000001"), ("run_20260101T000030000Z_000003",
                                                          "run_20260101T000100000Z_000002")):
        conn.execute("INSERT INTO runs (run_id, operation, key, status, started_at, previous_run) VALUES"
                     " (?, 'k', 'k', 'waiting', '2026-01-01T00:00:00.000Z', ?)", (rid, prev))
    conn.commit()
    conn.close()
    with Store(db) as store:
        assert store.version == store_module.SCHEMA_VERSION
        assert [r["run_id"][-1] for r in store.runs_of_key("k")] == ["3", "2", "1"]
        store.begin_run("run_20250101T000000000Z_000004", operation="k", key="k",
                        previous_run="run_20260101T000030000Z_000003")
        assert store.runs_of_key("k", limit=1)[0]["run_id"] == "run_20250101T000000000Z_000004"
