"""No program DAL starts can leave a set-user-ID or set-group-ID file behind.

Inside the wall a program keeps DAL's uid on the host, so `chmod 4755` on a copy of any program left a
setuid-root file in the workspace for every local user. The seccomp filter (dal/effects/wall/seccomp.py) refuses
every way to set those bits, with the wall and without it. Executed: the attack runs, and the file it
leaves is inspected (and, as an unprivileged user, run)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.wall import seccomp

HAVE_BWRAP = sandbox_status()[0]
WALLS = [pytest.param(False, id="no-wall"),
         pytest.param(True, id="wall", marks=pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable"))]
pytestmark = pytest.mark.skipif(not seccomp.available(), reason="no seccomp filter for this machine")


def _ctx(ws: Path, wall: bool, allow: tuple[str, ...] = ("sh",)) -> EffectContext:
    (ws / "dal.toml").write_text(f"[run]\nallow = {list(allow)!r}\n".replace("'", '"'))
    return EffectContext(policy=Policy.load(ws), use_sandbox=wall, unsandboxed_as_root=True, timeout=20)


def _special_bits(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode) & (stat.S_ISUID | stat.S_ISGID)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    # Under /var/tmp: the wall hides the host's /tmp behind its own.
    d = Path(os.path.realpath("/var/tmp")) / f"dal-suid-{tmp_path.name}"
    d.mkdir()
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("wall", WALLS)
@pytest.mark.parametrize("how", [
    "cp /usr/bin/id suid && chmod 4755 suid",
    "cp /usr/bin/id suid && chmod u+s,g+s suid",
    "install -m 6755 /usr/bin/id suid",
    "cp /usr/bin/id suid; python3 -c 'import os; os.chmod(\"suid\", 0o4755)'",
    "python3 -c 'import os; os.close(os.open(\"suid\", os.O_CREAT | os.O_WRONLY, 0o4755))'",
    "cp /usr/bin/id suid; perl -e 'chmod 04755, \"suid\"'",
])  # fmt: skip
def test_an_interpreter_cannot_make_a_setuid_file(ws: Path, wall: bool, how: str) -> None:
    ctx = _ctx(ws, wall)
    quoted = "'" + how.replace("'", "'\\''") + "'"
    r = run_effect(f"sh -c {quoted}", ctx)
    assert r.status in ("completed", "failed"), r
    suid = ws / "suid"
    if how.startswith("cp "):
        assert suid.exists(), r.stderr  # the attack ran
    if suid.exists():
        assert _special_bits(suid) == 0, f"{how}: {oct(os.lstat(suid).st_mode)}\n{r.stderr}"
    if os.geteuid() == 0 and suid.exists() and os.access(suid, os.X_OK):
        out = subprocess.run(["runuser", "-u", "nobody", "--", str(suid), "-u"], capture_output=True, text=True)
        assert out.stdout.strip() != "0", "a user ran it as root"


@pytest.mark.parametrize("wall", WALLS)
def test_cp_preserving_a_setuid_source_does_not_copy_the_bit(ws: Path, wall: bool) -> None:
    """The default toolset's `cp -p` / `cp -a` keep the mode of what they copy: of a setuid program the
    operator left in the workspace, the copy must come out without the bit."""
    shutil.copy("/usr/bin/id", ws / "tool")
    os.chmod(ws / "tool", 0o4755)  # made by the test, outside DAL
    ctx = _ctx(ws, wall, allow=())
    for cmd in ("cp -p tool copy1", "cp -a tool copy2", "cp --preserve=mode tool copy3"):
        run_effect(cmd, ctx)
        name = cmd.split()[-1]
        if (ws / name).exists():
            assert _special_bits(ws / name) == 0, cmd
    assert _special_bits(ws / "tool") == stat.S_ISUID  # what the operator made stays as it was


@pytest.mark.parametrize("wall", WALLS)
def test_ordinary_modes_still_work(ws: Path, wall: bool) -> None:
    r = run_effect("sh -c 'printf x > f && chmod 755 f && mkdir -m 700 d && umask 077 && printf y > g'", _ctx(ws, wall))
    assert r.ok, r.stderr
    assert stat.S_IMODE(os.lstat(ws / "f").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(ws / "d").st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(ws / "g").st_mode) == 0o600


_AS_NOBODY = r"""
import os, stat, sys
from dal.effects import EffectContext, Policy, run_effect
ws = sys.argv[1]
for wall in (True, False):
    with open(os.path.join(ws, "dal.toml"), "w") as f:
        f.write('[run]\nallow = ["sh"]\n')
    ctx = EffectContext(policy=Policy.load(ws), use_sandbox=wall, timeout=20)
    r = run_effect("sh -c 'cp /usr/bin/id suid && chmod 4755 suid'", ctx)
    mode = os.lstat(os.path.join(ws, "suid")).st_mode
    print("wall" if wall else "nowall", r.status, oct(stat.S_IMODE(mode)))
    os.unlink(os.path.join(ws, "suid"))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("runuser"),
                    reason="needs root to become an unprivileged user")  # fmt: skip
def test_as_an_unprivileged_user_no_setuid_file_either(ws: Path) -> None:
    """As another user the file would be setuid to that user: the same filter holds. The test becomes
    nobody in a private mount namespace where this interpreter is reachable (it may live under /root)."""
    os.chown(ws, 65534, 65534)
    exe = os.path.realpath(sys.executable)
    hidden = [p for p in ("/root",) if exe.startswith(p + "/")]
    setup = "mount --make-rprivate / && "
    if hidden:  # /root is mode 700: show only the interpreter's tree to the user
        top = "/".join(exe.split("/")[:3])  # e.g. /root/.pyenv
        setup += (f"mkdir -p /tmp/.dal-py && mount --bind {top} /tmp/.dal-py && mount -t tmpfs -o mode=755 tmpfs "
                  f"/root && mkdir -p {top} && mount --bind /tmp/.dal-py {top} && ")
    src = Path(__file__).resolve().parents[2]
    r = subprocess.run(["unshare", "-m", "--", "sh", "-c", setup + 'exec runuser -u nobody -- "$@"', "sh",
                        sys.executable, "-c", _AS_NOBODY, str(ws)],
                       capture_output=True, text=True, timeout=120, cwd=src,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(src),
                            "HOME": str(ws)})  # fmt: skip
    lines = r.stdout.split()
    assert r.returncode == 0 and len(lines) == 6, r.stdout + r.stderr
    walled = ["wall", "nowall"] if HAVE_BWRAP else ["nowall"]
    for which in walled:
        i = lines.index(which)
        assert lines[i + 2] == "0o755", f"{which}: {lines[i:i + 3]}"
