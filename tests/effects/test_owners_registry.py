"""The registry of DAL processes that may leave walls running (owners.py) is a folder of the user's alone:
Another local user could make /tmp/dal-walls-0 first (mode 0777), and root's DAL then never
registered, so a root DAL killed -9 mid-start was never swept after. Each case runs in a private mount
namespace with a private /tmp, so the machine's own registry is never touched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from effects_workspace import private_tmp_sh

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="a private /tmp (unshare -m) and another user's folder need root")


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp (which each case replaces by its own): the workspace and the operator's state."""
    d = Path(tempfile.mkdtemp(prefix="dal-owners-", dir="/var/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _in_private_tmp(code: str, where: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(where / "state")}
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                          private_tmp_sh() + ' && exec "$0" -c "$1" "$2"',
                          sys.executable, code, str(where)], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


KILLED_AFTER_REGISTERING = r"""
import json, os, signal, subprocess, sys, time
from dal.effects.wall import owners, reaper
where = sys.argv[1]
os.mkdir("/tmp/dal-walls-0")
os.chmod("/tmp/dal-walls-0", 0o777)
os.chown("/tmp/dal-walls-0", 65534, 65534)          # another local user's, made before root's first DAL
ws = os.path.join(where, "ws")
os.mkdir(ws)
with open(os.path.join(ws, "s.dal"), "w") as f:
    f.write('run("python3 -c \'import time; time.sleep(20)\'")\n')
p = subprocess.Popen([sys.executable, "-m", "dal", "run", "--allow-run=python3", "s.dal"], cwd=ws,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
registry = os.path.join(where, "state", "dal", "walls")
deadline = time.monotonic() + 20
while time.monotonic() < deadline and not (os.path.isdir(registry) and os.listdir(registry)):
    time.sleep(0.05)
names = os.listdir(registry) if os.path.isdir(registry) else []
os.kill(p.pid, signal.SIGKILL)                      # a DAL killed -9 while it runs a command
p.wait()
dead = owners.dead()                                # what the next start finds
swept = reaper.sweep()
print(json.dumps({"names": names, "dead": dead, "swept": swept, "left": os.listdir(registry) if names else [],
                  "stderr": p.stderr.read(), "foreign": os.listdir("/tmp/dal-walls-0")}))
"""


def test_another_users_folder_at_the_registrys_name_does_not_switch_the_sweep_off(outside_tmp: Path) -> None:
    got = _in_private_tmp(KILLED_AFTER_REGISTERING, outside_tmp)
    assert len(got["names"]) == 1, got  # registered in the operator's state folder instead
    assert got["dead"] == got["names"] and got["swept"] == 1 and got["left"] == [], got
    assert got["foreign"] == [], got  # nothing written into the other user's folder
    warning = [line for line in got["stderr"].splitlines() if "/tmp/dal-walls-0" in line]
    assert len(warning) == 1 and "not this user's alone (owner uid 65534, mode 0777)" in warning[0], got


FOREIGN_AND_SYMLINKED = r"""
import json, os, sys
from dal.effects.wall import owners
# A gone owner's name (pid 1 never started at tick 1) in a folder of another user's: not this user's registry.
os.mkdir("/tmp/dal-walls-0")
os.chmod("/tmp/dal-walls-0", 0o777)
os.chown("/tmp/dal-walls-0", 65534, 65534)
open("/tmp/dal-walls-0/1-1", "w").close()
foreign = owners.dead()
owners.forget("1-1")
kept_foreign = os.path.exists("/tmp/dal-walls-0/1-1")
# The same folder name as a symlink to a folder of root's: forget() must not unlink names there.
os.rename("/tmp/dal-walls-0", "/tmp/other")
os.mkdir("/tmp/victim", 0o700)
open("/tmp/victim/1-1", "w").close()
os.symlink("/tmp/victim", "/tmp/dal-walls-0")
linked = owners.dead()
owners.forget("1-1")
print(json.dumps({"foreign": foreign, "kept_foreign": kept_foreign, "linked": linked,
                  "kept_victim": os.path.exists("/tmp/victim/1-1")}))
"""


def test_dead_and_forget_read_only_a_folder_of_the_users_alone(outside_tmp: Path) -> None:
    got = _in_private_tmp(FOREIGN_AND_SYMLINKED, outside_tmp)
    assert got == {"foreign": [], "kept_foreign": True, "linked": [], "kept_victim": True}


ORPHAN_CGROUP_WITHOUT_REGISTRATION = r"""
import json, os, subprocess, sys, time
from dal.effects.wall import limits, owners, reaper
base = limits._own_cgroups().get("pids") or limits._own_cgroups().get("v2")
if base is None:
    print(json.dumps({"skip": "no cgroup"})); sys.exit()
# The cgroup a DAL that is gone left (pid 999999 of this namespace, killed), still holding its command; that
# DAL never registered (its registry was refused).
cg = os.path.join(base, f"dal-999999-1-1-{owners.pid_namespace()}")
try:
    os.mkdir(cg)
except OSError as e:
    print(json.dumps({"skip": str(e)})); sys.exit()
sleeper = subprocess.Popen(["sleep", "30"])
with open(os.path.join(cg, "cgroup.procs"), "w") as f:
    f.write(str(sleeper.pid))
swept = reaper.sweep()
deadline = time.monotonic() + 5
while sleeper.poll() is None and time.monotonic() < deadline:
    time.sleep(0.02)
killed = sleeper.poll() is not None
if not killed:
    sleeper.kill()
time.sleep(0.1)
try:
    os.rmdir(cg)
except OSError:
    pass
print(json.dumps({"killed": killed, "registry": owners.dead()}))
"""


def test_the_sweep_empties_a_gone_dals_cgroup_without_a_registration(outside_tmp: Path) -> None:
    got = _in_private_tmp(ORPHAN_CGROUP_WITHOUT_REGISTRATION, outside_tmp)
    if "skip" in got:
        pytest.skip(got["skip"])
    assert got == {"killed": True, "registry": []}
