"""wget and /dev/null without the wall: wget runs only inside a wall (issue 27), so no spelling of its
options (`--unlink` and its abbreviations unlink -O's file first, and left a regular file at /dev/null) can
replace the machine's /dev/null when DAL runs as root without bubblewrap: every such command is denied for
lack of a wall. Executed as root in a private mount namespace with a private /dev (its own /dev/null node)
and a local HTTP server: the machine's /dev is never touched. The check itself classifies them all alike."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dal.effects import Policy, check_command

ROOT = Path(__file__).resolve().parents[2]

ALLOWED = ["wget -q -O /dev/null http://127.0.0.1:{port}/delete-me",
           "wget -q --delete-after -O /dev/null http://127.0.0.1:{port}/page",
           "wget -q --dele -o /dev/null -O /dev/null http://127.0.0.1:{port}/page"]
DENIED = ["wget -q --unlink -O /dev/null http://127.0.0.1:{port}/page",
          "wget -q --unl -O /dev/null http://127.0.0.1:{port}/page",
          "wget -q --unlink -N --output-document=/dev/null http://127.0.0.1:{port}/page"]


@pytest.mark.parametrize("command", [*ALLOWED, *DENIED])
def test_the_check_classifies_and_leaves_the_options_to_the_wall(tmp_path: Path, command: str) -> None:
    policy = Policy.load(tmp_path, allow_run=["wget"])
    d = check_command(command.format(port=80), policy)
    assert d.allowed and not d.idempotent and "only the wall keeps it inside the roots" in d.reason, d.reason


DRIVER = r"""
import json, os, subprocess, sys, time
ws, commands = sys.argv[1], json.loads(sys.argv[2])
os.mknod("/dev/null", 0o20666, os.makedev(1, 3))
os.makedirs(os.path.join(ws, "srv"))
for name in ("page", "delete-me"):
    with open(os.path.join(ws, "srv", name), "w") as f:
        f.write("served\n")
srv = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"], cwd=os.path.join(ws, "srv"),
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
port = int(srv.stdout.readline().split(" port ")[1].split()[0])
out = []
for command in commands:
    if os.path.lexists("/dev/null"):
        os.unlink("/dev/null")
    os.mknod("/dev/null", 0o20666, os.makedev(1, 3))
    with open(os.path.join(ws, "s.dal"), "w") as f:
        f.write("print(run(" + json.dumps(command.format(port=port)) + ").status)\n")
    r = subprocess.run([sys.executable, "-m", "dal", "run", "--unsandboxed-as-root", "--allow-run=wget", "--allow-net",
                        "s.dal"], cwd=ws, capture_output=True, text=True, timeout=60)
    st = os.lstat("/dev/null")
    out.append({"command": command, "status": r.stdout.strip(), "device": st.st_mode >> 12 == 0o02
                and st.st_rdev == os.makedev(1, 3), "dev": sorted(os.listdir("/dev"))})
srv.kill()
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("wget"),
                    reason="a private /dev needs root and unshare; and wget")
@pytest.mark.parametrize("forced", ["", "none"])
def test_wget_without_bubblewrap_never_replaces_dev_null(tmp_path: Path, forced: str) -> None:
    """Without bubblewrap the wall is Landlock where the kernel has it (DAL_WALL unset), which holds
    /dev/null; with no wall at all (DAL_WALL=none) wget does not run."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(tmp_path / "state"), "DAL_WALL": forced}
    # bubblewrap hidden (the wall off) before /dev is replaced by a tmpfs holding only a null node of its own
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        'mount --bind /dev/null /usr/bin/bwrap && mount -t tmpfs -o mode=755 tmpfs /dev && '
                        'exec "$0" -c "$1" "$2" "$3"', sys.executable, DRIVER, str(ws),
                        json.dumps([*ALLOWED, *DENIED])], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    got = {c["command"]: c for c in json.loads(r.stdout.splitlines()[-1])}
    broke = [c for c in got.values() if not (c["device"] and c["dev"] == ["null"])]
    assert broke == []  # /dev/null still the device after each command; nothing new in /dev
    if forced == "none":
        assert all(c["status"] == "denied" for c in got.values()), got  # no wall, no wget
