"""The SQLite store's key lock names its holder with where it runs: a pid is a number of its own
pid namespace, so a holder in a container is said to be one, never taken for this namespace's process of that
number. Executed for real: the holder runs under `unshare -p -f --mount-proc`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.harness import REPO

HOLDER = """
import sys, time
from pathlib import Path
from dal.receipts.store import Store
store = Store(Path(sys.argv[1]))
lock = store.operation_lock("k")
lock.acquire("run_20261201T100000000Z_aaaaaa", 0)
print("held", flush=True)
time.sleep(60)
"""


def _unshare_ok() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-p", "-f", "--mount-proc", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _unshare_ok(), reason="needs root and unshare (a pid namespace of its own)")
def test_a_key_held_in_another_pid_namespace_is_said_to_be_held_there(durable) -> None:
    durable.write("s.dal", 'run("echo hi >> out.txt")\n')
    assert durable.run("run", "s.dal").code == 0  # the store exists
    holder = subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", "--kill-child", sys.executable, "-c", HOLDER,
                               str(durable.db)], env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "held", holder.stderr.read()
        (lock_file,) = (durable.ws / ".dal" / "locks").glob("*.lock")
        got = json.loads(lock_file.read_text())
        assert got["pid"] == 1 and got["where"]["pidns"] != os.stat("/proc/self/ns/pid").st_ino
        assert isinstance(got["start"], int) and got["where"]["boot"]
        busy = durable.run("run", "--key", "k", "s.dal")
        assert busy.code == 3, busy.err
        assert "is being run by process 1 of another pid namespace of this machine (pid namespace" in busy.err
        assert durable.lines("out.txt") == ["hi"]
    finally:
        holder.kill()
        holder.wait(10)
