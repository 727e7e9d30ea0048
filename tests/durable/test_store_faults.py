"""A store that fails in the middle of a keyed run: never a fresh attempt over completed effects.

The fault is injected at every store write of a run in turn (DAL_TEST_STORE_FAULT, docs/durability.md),
once (a lock that goes away) and for good (a disk that stays full), in the first run of an operation and in
the resume after its approval; then a person follows what DAL prints until the operation completes. The
real faults are tested too: a store locked by another process past the busy timeout, and a full
filesystem under `.dal/`. Each line appended, and each message sent, exists exactly once at the end.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time

import pytest
from durable_operator import settle

SCRIPT = """\
let t = now()
let seen = run("cat input.txt")
run("cp input.txt copy.txt")
run("echo line >> append.txt")
run("echo report | tee -a outbox.txt")
run("echo done >> append.txt")
finish({"seen": seen.ok, "at": t})
"""
ARGV = ["run", "--key", "k", "--require-approval=tee", "s.dal"]


def happened(d):
    def check(command: str) -> bool:
        if "tee" in command:
            return d.lines("outbox.txt") == ["report"]
        word = command.split()[1]
        return word in d.lines("append.txt")

    return check


def faulted(d, monkeypatch: pytest.MonkeyPatch, spec: str, *argv: str):
    monkeypatch.setenv("DAL_TEST_STORE_FAULT", spec)
    try:
        return d.cli(*argv)
    finally:
        monkeypatch.delenv("DAL_TEST_STORE_FAULT")


def assert_exactly_once(d) -> None:
    assert d.lines("append.txt") == ["line", "done"]
    assert d.lines("outbox.txt") == ["report"]
    assert (d.ws / "copy.txt").read_text() == "quarterly figures\n"
    receipts = d.check_store()
    assert [r["status"] for r in receipts if r["status"] != "skipped"][-1] == "completed"
    again = d.cli(*ARGV)  # and the key is done
    assert again.code == 0 and d.latest()["status"] == "skipped"
    assert d.lines("outbox.txt") == ["report"]


def assert_told(r, kind: str) -> None:
    """The faulted invocation exits 2 and says what broke and what to do next."""
    assert r.code == 2, r
    assert ("disk is full" if kind == "full" else "locked") in r.err, r.err
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    assert "dal: next:" in r.err or "Nothing ran: run the same command again" in r.err, r.err
    assert "injected fault" in r.err


LEGS = ["first run", "resume after approval", "resume of a dead run", "duplicate of a completed key"]


def prepare(d, leg: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Bring a workspace to where the leg starts; return the command the faulted invocation runs."""
    d.write("s.dal", SCRIPT)
    if leg == "resume after approval":
        assert d.cli(*ARGV).code == 3  # waits for approval of the send
        assert d.cli("approve", "k").code == 0
        return ["resume", "k"]
    if leg == "resume of a dead run":
        # A run left `running` with a journal and no receipt, as kill -9 leaves one (tests/durable/test_kill.py
        # kills for real): the store refused everything from the hold of the send on.
        assert faulted(d, monkeypatch, "full:10+", *ARGV).code == 2
        assert d.receipts() == [] and d.lines("append.txt") == ["line"]
    if leg == "duplicate of a completed key":
        settle(d, "k", happened(d), d.cli(*ARGV), ARGV)
    return ARGV


@pytest.mark.parametrize("spec", ["full:{n}+", "locked:{n}"])
@pytest.mark.parametrize("leg", LEGS)
def test_a_fault_at_every_store_write(make_durable, monkeypatch, spec, leg) -> None:
    n = 0
    while True:
        n += 1
        assert n < 40, "the run never got past the faults"
        d = make_durable(f"w{n}")
        argv = prepare(d, leg, monkeypatch)
        r = faulted(d, monkeypatch, spec.format(n=n), *argv)
        if r.code in (0, 3) and "injected fault" not in r.err:
            # Past the last write of the leg: the fault never fired. Every earlier write was faulted. (A
            # resume copies nothing it replays: its writes are its own effects, the gate and its receipt.)
            assert n > (2 if leg.startswith("duplicate") else 4 if leg.startswith("resume") else 8)
            break
        assert_told(r, spec.split(":")[0])
        settle(d, "k", happened(d), r, argv)
        assert_exactly_once(d)


def test_a_result_the_store_never_took_is_an_unknown_outcome(durable, monkeypatch) -> None:
    d = durable
    d.write("s.dal", SCRIPT)
    # writes: begin, now() x2, cat x2, cp x2, the append's intent (8); its result (9) fails for good.
    r = faulted(d, monkeypatch, "full:9+", *ARGV)
    assert r.code == 2
    assert "effect 3 (`echo line >> append.txt`) ran (command completed), but the run store could not journal" in r.err
    assert "unknown to the journal, so the next attempt holds it" in r.err
    assert "(not recorded in the run store)" in r.err
    assert d.lines("append.txt") == ["line"]
    # Written to the receipt files, not to the store: the run is still `running` there, with its journal.
    rid = json.loads(next((d.ws / ".dal" / "receipts").glob("*.json")).read_text())["run_id"]
    assert f"dal: next: once the run store can be written again, `dal resume {rid}`" in r.err
    again = d.cli("resume", rid)
    assert again.code == 3  # the append's result was never journaled: a person says what happened
    held = d.latest()
    assert held["status"] == "waiting" and held["retry"] == "escalate"
    assert held["effects"]["items"][-1]["command"] == "echo line >> append.txt"
    assert d.lines("append.txt") == ["line"]
    settle(d, "k", happened(d), again, ["resume", "k"])
    assert_exactly_once(d)


def test_a_lock_that_goes_away_loses_nothing(durable, monkeypatch) -> None:
    d = durable
    d.write("s.dal", SCRIPT)
    r = faulted(d, monkeypatch, "locked:9", *ARGV)  # the append's result, once
    assert r.code == 2
    assert "DAL journaled the result when the run stopped, so its outcome is known" in r.err
    stopped = d.latest()
    assert stopped["status"] == "interrupted" and stopped["retry"] == "resume"
    assert stopped["error"]["kind"] == "store" and stopped["error"]["line"] == 4
    assert f"dal: next: `dal resume {stopped['run_id']}`" in r.err
    settle(d, "k", happened(d), r, ARGV)
    assert_exactly_once(d)
    resumed = d.receipts()[1]
    assert resumed["effects"]["items"][2]["replayed"] is True  # the append, from the late journal entry


SLOW = """\
run("echo one >> append.txt")
run("sleep 1.5")
run("echo two >> append.txt")
"""


def test_a_store_locked_by_another_process_past_the_busy_timeout(durable) -> None:
    d = durable
    d.write("s.dal", SLOW)
    proc = d.spawn("run", "--key", "k", "s.dal")
    deadline = time.monotonic() + 30
    while d.lines("append.txt") != ["one"] and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    holder = sqlite3.connect(d.db, isolation_level=None, check_same_thread=False)
    # Another connection holds the write lock for 7 s (the busy timeout is 5 s): journaling the result of
    # `sleep 1.5` gives up while it is held; the retry when the run stops gets through.
    holder.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(7.0, lambda: holder.execute("ROLLBACK"))
    timer.start()
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        timer.join()
        holder.close()
    assert proc.returncode == 2, err
    assert "is locked by another process" in err and "internal error" not in err
    stopped = d.latest()
    assert stopped["status"] == "interrupted" and stopped["error"]["kind"] == "store"
    again = d.cli("run", "--key", "k", "s.dal")  # the same command: it continues, not a fresh attempt
    assert again.code == 0, again
    assert d.lines("append.txt") == ["one", "two"]
    assert [i["replayed"] for i in d.latest()["effects"]["items"]] == [True, True, False]
    d.check_store()


def _mount_tmpfs(path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX only")
def test_a_full_disk_under_dal_mid_run(durable) -> None:
    d = durable
    d.write("s.dal", SLOW)
    dot = d.ws / ".dal"
    if not _mount_tmpfs(dot, "2m"):
        pytest.skip("needs root to mount a small tmpfs for .dal/")
    try:
        proc = d.spawn("run", "--key", "k", "s.dal")
        deadline = time.monotonic() + 30
        while d.lines("append.txt") != ["one"] and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
        filler = dot / "filler"
        with open(filler, "wb") as f:  # fill the filesystem while `sleep 1.5` runs
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err
        assert "disk is full" in err and "internal error" not in err and "Traceback" not in err, err
        assert "dal: next: once the run store can be written again, `dal resume run_" in err, err
        filler.unlink()  # the operator frees space, then does what DAL said
        again = d.cli("run", "--key", "k", "s.dal")
        assert again.code == 0, again
        assert d.lines("append.txt") == ["one", "two"]
        buried, done = d.check_store()
        assert buried["status"] == "interrupted" and done["previous_run"] == buried["run_id"]
        assert [i["replayed"] for i in done["effects"]["items"]][:1] == [True]
    finally:
        subprocess.run(["umount", "-l", str(dot)], capture_output=True)
