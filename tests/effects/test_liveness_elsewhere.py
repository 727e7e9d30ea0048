"""A DAL process is taken for gone only where its pid means something: a DAL in another pid namespace (a
container sharing the workspace and the cgroup tree) looked gone from here, so a start here "finished" the
record of its live pipeline and killed its command (its cgroup, its bubblewrap). A real DAL runs in a second
pid namespace (`unshare -p -f --mount-proc`: it is that namespace's pid 1, which here is init, started at
another time); a run here meanwhile finds it alive among that namespace's processes and leaves its record,
cgroup and wall alone. Both run in a private mount namespace with a private /tmp, so that no other DAL on the
machine shares their registry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from effects_workspace import private_tmp_sh

from dal.effects.wall import owners

ROOT = Path(__file__).resolve().parents[2]

DRIVER = r"""
import json, os, subprocess, sys, time
where = sys.argv[1]
ws = os.path.join(where, "ws")
os.mkdir(ws)
subprocess.run(["git", "init", "-q", ws], check=True)  # the guard holds its refs: a record, wall or not
# The container's command runs until the file `go` exists, then says it was not killed.
with open(os.path.join(ws, "c.dal"), "w") as f:
    f.write("print(run(\"python3 -c 'import os, time\\nwhile not os.path.exists(\\\"go\\\"): time.sleep(0.05)\\n"
            "print(\\\"finished\\\")'\").stdout)\n")
with open(os.path.join(ws, "h.dal"), "w") as f:
    f.write('print(run("echo here").stdout)\n')
held = os.path.join(ws, ".dal", "held")
def records():
    return sorted(n for n in os.listdir(held) if n.endswith(".json") and not n.startswith(".")) \
        if os.path.isdir(held) else []
inner = subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", sys.executable, "-m", "dal", "run",
                          "--allow-run=python3", "c.dal"], cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
deadline = time.monotonic() + 30
while time.monotonic() < deadline and not records():
    time.sleep(0.05)
before = records()
here = subprocess.run([sys.executable, "-m", "dal", "run", "h.dal"], cwd=ws, capture_output=True, text=True,
                      timeout=60)
during = records()
open(os.path.join(ws, "go"), "w").close()
out, err = inner.communicate(timeout=60)
print(json.dumps({"before": before, "during": during, "after": records(), "here": [here.returncode, here.stdout,
                  here.stderr], "inner": [inner.returncode, out, err]}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a pid namespace needs root")
def test_a_dal_in_another_pid_namespace_is_not_taken_for_gone() -> None:
    where = Path(tempfile.mkdtemp(prefix="dal-liveness-", dir="/var/tmp"))
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(where / "state")}
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            private_tmp_sh() + ' && exec "$0" -c "$1" "$2"',
                            sys.executable, DRIVER, str(where)], capture_output=True, text=True, env=env, timeout=200)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout.splitlines()[-1])
    finally:
        shutil.rmtree(where, ignore_errors=True)
    record = got["before"]
    assert len(record) == 1 and record[0].startswith("1-"), got  # written by that namespace's pid 1
    code, stdout, stderr = got["here"]
    assert code == 0 and stdout == "here\n\n", got
    # Seen alive in its own namespace (by its pid there), its record and cgroup are simply not this run's.
    assert [line for line in stderr.splitlines() if "left alone" in line] == [], got
    assert got["during"] == record, got  # the live pipeline's record stays
    assert got["inner"][:2] == [0, "finished\n\n"], got  # its command was not killed
    assert got["after"] == [], got  # its own DAL finished its checks and removed it


def test_what_an_owner_elsewhere_left_is_not_judged_here() -> None:
    me = owners.here()
    pid, start = 999999, 1  # no such process in this namespace
    assert owners.verdict(pid, start, dict(me)) == "gone"
    assert owners.verdict(os.getpid(), owners.start_time(os.getpid()), dict(me)) == "alive"
    if owners.pid_namespace() != 0xEFFFFFFC:  # from the initial namespace a namespace that is not there is gone
        assert owners.verdict(pid, start, {**me, "pidns": 1}) is None  # another pid namespace, this boot
    assert owners.verdict(pid, start, {**me, "boot": "another", "host": "elsewhere"}) is None  # another host
    # Another boot of a host with this one's name and machine id: a clone of its image as much as its past.
    assert owners.verdict(os.getpid(), 1, {**me, "boot": "earlier"}) is None
    assert owners.verdict(pid, start, "unreadable") is None


@pytest.mark.parametrize(("where", "finished"), [
    pytest.param({}, True, id="here-and-gone"),
    pytest.param({"boot": "an-earlier-boot"}, False, id="another-boot-of-a-host-of-this-name"),
    pytest.param({"pidns": 1}, False, id="another-pid-namespace"),
    pytest.param({"boot": "another", "host": "elsewhere", "machine": "other"}, False, id="another-host"),
])
def test_a_record_is_finished_only_when_its_owner_is_provably_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str], where: dict,
                                                                   finished: bool) -> None:
    """The record's name is this very process (its pid and start time name a live process here), as after a
    reboot in which a process got the same pid at the same tick: only where it ran decides. (Here and gone:
    its pid names no process.)"""
    if where.get("pidns") == 1 and owners.pid_namespace() == 0xEFFFFFFC:
        pytest.skip("seen from the initial pid namespace, a namespace that is not there is gone")
    from dal.effects.guard import held
    from dal.effects.policy import Policy

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    ws = tmp_path / "ws"
    folder = ws / ".dal" / "held"
    folder.mkdir(parents=True)
    body = json.dumps({"version": 1, "workspace": str(ws), "owner": {**owners.here(), **where}, "guard": None,
                       "wall": None})
    key = held._key()
    assert key is not None
    record = folder / (f"{owners.tag(os.getpid())}-1.json" if where else "999999-1-1.json")
    record.write_text(json.dumps({"body": body, "mac": held._mac(key, body.encode())}))
    assert held.finish_dead(Policy.load(ws)) == []
    assert record.exists() != finished
    assert ("left alone" in capsys.readouterr().err) != finished
