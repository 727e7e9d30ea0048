"""A run without a key holds the lock of its own run id (`run:<id>`) for its whole life: a resume of
it, or a decision about the effect it executes, from another pid namespace sharing the workspace (a container, a
`docker exec` sidecar) meets that lock, where the run's pid means nothing. Executed with real processes: the live
run in this namespace, the resume and the decision under `unshare -p -f --mount-proc`; effects counted in a
marker file."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from typing import Any

import pytest

from tests.durable.conftest import Durable

POLICY = '[programs.sh]\nclass = "local"\nidempotent = false\n'
# Effect 2 says it started, then waits until the test lets it go: the resume comes while it executes.
SCRIPT = ('run("echo a >> m")\n'
          'run("sh -c \'echo started >> s2; while [ ! -e go ]; do sleep 0.05; done\'")\n'
          'run("echo b >> m")\n'
          'finish("ok")\n')


def _can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "-p", "-f", "--mount-proc", "true"], capture_output=True).returncode == 0


needs_unshare = pytest.mark.skipif(not _can_unshare(), reason="needs root and unshare -p (a second pid namespace)")


def in_other_pidns(durable: Durable, *args: str) -> subprocess.CompletedProcess[str]:
    """`dal ARGS` in a pid namespace of its own that shares the workspace (a container mounting the same volume).
    Its walls' registry and cgroups are private to it, as a container's are."""
    setup = ("mount -t tmpfs none /sys/fs/cgroup 2>/dev/null; mkdir -p /tmp/dal-walls-0; "
             "mount -t tmpfs -o mode=700 none /tmp/dal-walls-0; exec " + shlex.join(durable.argv(*args)))
    return subprocess.run(["unshare", "-m", "-p", "-f", "--mount-proc", "sh", "-c", setup], cwd=durable.ws,
                          env=durable.env(), text=True, capture_output=True, timeout=60)


def _wait_for(cond: Any, what: str, proc: subprocess.Popen[str], limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.communicate()}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@needs_unshare
def test_a_live_keyless_run_is_neither_resumed_nor_decided_for_from_another_pid_namespace(durable: Durable) -> None:
    from dal.receipts.store import Store

    durable.write("dal.toml", POLICY)
    durable.write("s.dal", SCRIPT)
    live = durable.spawn("run", "s.dal")
    try:
        _wait_for(lambda: durable.lines("s2") == ["started"], "effect 2 to start", live)
        listed = json.loads(durable.run("receipts", "--json").out)["runs"]
        run_id = listed[0]["run_id"]

        resumed = in_other_pidns(durable, "resume", run_id)
        assert resumed.returncode == 3, resumed.stdout + resumed.stderr
        assert f"run {run_id} is still running in process" in resumed.stderr and "nothing ran" in resumed.stderr

        decided = in_other_pidns(durable, "resolve", run_id, "--effect", "2", "--as", "retry")
        assert decided.returncode != 0, decided.stdout + decided.stderr
        assert "too late" in decided.stderr and "executing effect 2" in decided.stderr

        seen = in_other_pidns(durable, "receipts", "--json")
        assert [r["status"] for r in json.loads(seen.stdout)["runs"]] == ["running"]  # not `died`
    finally:
        (durable.ws / "go").touch()
        out, err = live.communicate(timeout=60)
    assert live.returncode == 0, out + err
    assert durable.lines("m") == ["a", "b"]  # each effect once
    assert durable.lines("s2") == ["started"]
    receipts = durable.check_store()
    assert [(r["run_id"], r["status"]) for r in receipts] == [(run_id, "completed")]
    with Store(durable.db, readonly=True) as store:
        assert store.approvals(run_id) == []  # the refused decision left no trace


def test_a_keyless_run_holds_its_own_lock_until_it_ends_and_leaves_no_lock_file(durable: Durable) -> None:
    from dal.receipts.store import Store

    durable.write("dal.toml", POLICY)
    durable.write("s.dal", SCRIPT)
    live = durable.spawn("run", "s.dal")
    try:
        _wait_for(lambda: durable.lines("s2") == ["started"], "effect 2 to start", live)
        with Store(durable.db, readonly=True) as store:
            run_id = store.list_runs(limit=1)[0]["run_id"]
            holder = store.key_holder("run:" + run_id)
        assert holder is not None and holder["run_id"] == run_id and holder["pid"] == live.pid
    finally:
        (durable.ws / "go").touch()
        out, err = live.communicate(timeout=60)
    assert live.returncode == 0, out + err
    with Store(durable.db, readonly=True) as store:
        assert store.key_holder("run:" + run_id) is None
    assert list((durable.ws / ".dal" / "locks").glob("*.lock")) == []  # one file per run would pile up
