"""/dev/null is the one device a command may name, and only to write into it: `rm -f /dev/null`, `mv x
/dev/null`, `mv /dev/null y`, `cp --remove-destination x /dev/null`, `touch /dev/null` were allowed by the
default policy, and without the wall, as root, they removed or replaced the host's /dev/null (the property
test below in tests/effects did it once, and every later process on the machine failed). Executed, without
the wall, in a private mount namespace whose /dev is a tmpfs with a null device of its own, so that a gate
that lets one through breaks nothing but that namespace."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ATTACKS = ["rm -f /dev/null", "mv x /dev/null", "mv /dev/null y", "cp --remove-destination x /dev/null",
           "cp x /dev/null", "touch /dev/null", "mkdir /dev/null", "rm -rf /dev/../dev/null"]
LEGIT = ["echo hi > /dev/null", "tee /dev/null < x", "sort -o /dev/null x", "cat /dev/null",
         "ls x nope 2>/dev/null || true"]

PROBE = r"""
import json, os, stat, sys, tempfile
from pathlib import Path
from dal.effects import EffectContext, run_effect
from dal.effects.policy import Policy
ws = Path(tempfile.mkdtemp())
(ws / "x").write_text("x\n")
policy = Policy.load(ws)
out = []
for cmd in json.loads(sys.argv[1]):
    r = run_effect(cmd, EffectContext(policy=policy, use_sandbox=False, unsandboxed_as_root=True))
    try:
        st = os.lstat("/dev/null")
        intact = stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    except FileNotFoundError:
        intact = False
    out.append([cmd, r.status, intact])
    if not intact:  # put the namespace's own device back for the next command
        if os.path.lexists("/dev/null"):
            os.unlink("/dev/null")
        os.mknod("/dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
print(json.dumps(out))
"""


def _in_private_dev(commands: list[str], tmp_path: Path) -> list[list[object]]:
    import json

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private /dev")
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    setup = "mount -t tmpfs none /dev && mknod -m 666 /dev/null c 1 3 && exec \"$0\" \"$@\""
    p = subprocess.run(["unshare", "-m", "sh", "-c", setup, sys.executable, str(probe), json.dumps(commands)],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0 and "unshare" in p.stderr:
        pytest.skip(f"no private mount namespace here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)  # type: ignore[no-any-return]


def test_no_command_removes_moves_or_replaces_dev_null(tmp_path: Path) -> None:
    for cmd, status, intact in _in_private_dev(ATTACKS, tmp_path):
        assert status == "denied" and intact, (cmd, status, intact)


def test_writing_into_dev_null_still_runs(tmp_path: Path) -> None:
    for cmd, status, intact in _in_private_dev(LEGIT, tmp_path):
        assert status == "completed" and intact, (cmd, status, intact)
