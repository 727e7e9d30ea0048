"""One answer to "does the process that owns this still run?" (dal.core.liveness.verdict), for every case a
record can be in, in one process: this namespace (free pid, reused pid, zombie), no place recorded, a run's
row (its boot only), another boot of a host of this name, another host, another pid namespace, an unreadable
record. And the callers that used to answer it themselves: the wall's owners, a worker's takeover."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dal.core import liveness
from dal.core.liveness import verdict

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")


@pytest.fixture
def other() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_in_this_namespace_a_free_pid_a_reused_pid_and_a_zombie_are_gone(other: subprocess.Popen[bytes]) -> None:
    me = liveness.here()
    start = liveness.start_time(other.pid)
    assert isinstance(start, int)
    assert verdict(other.pid, start, me) == "alive"
    assert verdict(other.pid, start + 1, me) == "gone"  # its pid, a process that started later
    assert verdict(other.pid, None, me) == "alive"  # no start time recorded: the pid is all there is
    other.kill()
    deadline = time.monotonic() + 10
    while not liveness.exited(other.pid):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert verdict(other.pid, start, me) == "gone"  # a zombie runs nothing, whoever waits for it
    other.wait()
    assert verdict(other.pid, start, me) == "gone"
    assert verdict(0, None, me) == verdict("7", None, me) == "gone"  # no process is named so


def test_a_record_without_a_place_is_judged_here_and_a_runs_row_by_its_boot(other: subprocess.Popen[bytes]) -> None:
    start = liveness.start_time(other.pid)
    assert verdict(other.pid, start, None) == "alive"
    assert verdict(other.pid, start, {"boot": liveness.boot_id()}) == "alive"
    # A row of another boot records no host: nothing says it was this host's.
    assert verdict(other.pid, start, {"boot": "00000000-0000-4000-8000-000000000001"}) == "unknown"


def test_another_boot_of_a_host_of_this_name_and_another_host_are_unknown() -> None:
    me = liveness.here()
    mine = (os.getpid(), liveness.start_time(os.getpid()))
    earlier = {**me, "boot": "00000000-0000-4000-8000-000000000002"}
    # The same name and machine id: this host's earlier boot or a clone of its image; nobody can tell.
    assert liveness.elsewhere(earlier) == ("boot" if me["machine"] else "host")
    assert verdict(*mine, earlier) == "unknown"
    assert verdict(999999, 1, earlier) == "unknown"
    assert verdict(*mine, {**earlier, "host": "elsewhere", "machine": "other"}) == "unknown"
    assert "cannot tell" in liveness.describe(earlier) or not me["machine"]


def test_another_pid_namespace_is_looked_into_never_read_as_this_ones_pid() -> None:
    me = liveness.here()
    if me["pidns"] is None:
        pytest.skip("this /proc does not say pid namespaces")
    start = liveness.start_time(os.getpid())
    # This very process, seen as a process of "another" namespace by its pid there (NSpid).
    assert liveness._in_namespace(os.getpid(), start, me["pidns"]) == "alive"
    assert liveness._in_namespace(os.getpid(), start + 1, me["pidns"]) in ("gone", "unknown")
    # A namespace not there: gone only where this process sees every process of the machine.
    expected = "gone" if me["pidns"] == liveness.INITIAL_PID_NAMESPACE else "unknown"
    assert verdict(os.getpid(), start, {**me, "pidns": 1}) == expected
    assert liveness.elsewhere({**me, "pidns": 1}) == "pidns"
    assert verdict(os.getpid(), start, {**me, "pidns": None}) == "unknown"  # its namespace unsaid


def test_an_unreadable_record_says_nothing() -> None:
    assert verdict(os.getpid(), None, "unreadable") == "unknown"
    assert verdict(os.getpid(), None, ["not", "a", "place"]) == "unknown"


def test_the_walls_owners_ask_the_same_question() -> None:
    from dal.effects.wall import owners

    me = liveness.here()
    assert owners.here() == me
    earlier = {**me, "boot": "00000000-0000-4000-8000-000000000003"}
    # The wall took another boot of a host of this name for gone, and finished a clone's live pipeline.
    assert owners.verdict(os.getpid(), 1, earlier) is None
    assert owners.verdict(os.getpid(), liveness.start_time(os.getpid()), me) == "alive"
    assert owners.verdict(999999, 1, me) == "gone"


class _Lock:
    """A key's lock held by `holder` (as KeyBusy names it) until released."""

    def __init__(self, holder: dict[str, Any]) -> None:
        self.holder: dict[str, Any] | None = holder

    def acquire(self, run_id: str, wait: float) -> None:
        from dal.receipts.oplock import KeyBusy

        if self.holder is not None:
            raise KeyBusy("k", self.holder)

    def release(self) -> None:
        pass


def _job(stale: dict[str, Any]) -> dict[str, Any]:
    return {"job_id": 1, "key": "k", "took_over": json.dumps(stale)}


def test_a_takeover_kills_only_the_stale_holder_of_its_own_pid_namespace(other: subprocess.Popen[bytes]) -> None:
    """A worker whose claim's holder ran in another pid namespace (a container's worker) must not kill the
    process that has the same number here: the pid is that namespace's."""
    from dal.worker.takeover import _wait_for_key

    start = liveness.start_time(other.pid)
    stale = {"pid": other.pid, "start": start, "boot": liveness.boot_id(), "worker": "w_1"}
    said: list[str] = []
    container = {**liveness.here(), "pidns": 4026599999}
    _wait_for_key(_Lock({"pid": other.pid, "start": start, "where": container}), _job(stale), 0.01, said.append)
    assert other.poll() is None and said == []
    # Another boot recorded for the claim: never this machine's process either.
    _wait_for_key(_Lock({"pid": other.pid, "start": start, "where": liveness.here()}),
                  _job({**stale, "boot": "00000000-0000-4000-8000-000000000004"}), 0.01, said.append)
    assert other.poll() is None and said == []
    # Control: the same holder in this namespace is the stale process, and is killed.
    lock = _Lock({"pid": other.pid, "start": start, "where": liveness.here()})
    _wait_for_key(lock, _job(stale), 0.01, lambda text: (said.append(text), setattr(lock, "holder", None)))
    assert other.wait(5) == -signal.SIGKILL and len(said) == 1
