"""What a DAL process that died (kill -9) left running, found and killed when the next one starts (docs/policy.md,
"Killed with DAL").

bubblewrap arms its own --die-with-parent only once it has cloned its sandbox's init, and that init arms its
own only after DAL has let it go (--block-fd): a DAL killed in between left an init waiting for ever, on
bubblewrap's internal eventfd or on the block pipe (executor._spawn_walled keeps that pipe open in bubblewrap
so that the init never starts its program without its limits), holding the pipes of the stages behind it and
the files of its binds. Where DAL can make cgroups, every process of a command is in the command's cgroup
from before its exec, and limits.sweep_orphans kills what a dead DAL's cgroups still hold. Without one, every
bubblewrap DAL starts carries its owner in its environment (WALL_OWNER, removed with --unsetenv before the
program starts, so no program sees it), and DAL keeps a file per process in a folder of its user's while it
may have walls running; a file whose process is gone means: kill every bubblewrap carrying that owner (its
init is its sandbox's PID 1: the program dies with it), then remove the file.
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import time

from dal.effects import limits

__all__ = ["WALL_OWNER", "owner_tag", "register", "sweep", "sweep_now_and_then"]

WALL_OWNER = "DAL_WALL_OWNER"
_BWRAP_COMM = b"(bwrap)"


@functools.lru_cache(maxsize=4)
def owner_tag(pid: int) -> str:
    """This process's tag: its pid and start time (a pid alone may name another process later)."""
    return f"{pid}-{limits._start_time(pid)}"


def _folder() -> str:
    return f"/tmp/dal-walls-{os.geteuid()}"  # one for every DAL process of the user, whatever its TMPDIR


_registered: set[int] = set()


def register() -> None:
    """Before this process starts its first wall: leave the file that names it, removed when it exits."""
    pid = os.getpid()
    if pid in _registered:
        return
    _registered.add(pid)
    folder = _folder()
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return
    try:
        st = os.lstat(folder)
        if st.st_uid != os.geteuid() or not os.path.isdir(folder) or os.path.islink(folder):
            return  # not ours: another user's folder at that name, nothing to leave there
        path = os.path.join(folder, owner_tag(pid))
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError:
        return
    atexit.register(_unregister, path, pid)


def _unregister(path: str, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child that exits
        try:
            os.unlink(path)
        except OSError:
            pass


_SWEEP_EVERY = 60.0  # seconds: a long-lived worker sweeps again now and then, a run start at most this often
_last_sweep: list[float] = []


def sweep_now_and_then() -> int:
    """sweep(), unless this process did within the last minute (each run of a worker starts here)."""
    now = time.monotonic()
    if _last_sweep and now - _last_sweep[0] < _SWEEP_EVERY:
        return 0
    _last_sweep[:] = [now]
    return sweep()


def sweep() -> int:
    """Kill what DAL processes that are gone left running: their commands' cgroups (limits.sweep_orphans) and,
    without cgroups, every bubblewrap their tag names; how many owners' leftovers it found."""
    found = limits.sweep_orphans()
    folder = _folder()
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    dead = []
    for name in names:
        pid, _, start = name.partition("-")
        if not (pid.isdigit() and start.lstrip("-").isdigit()):
            continue
        now = limits._start_time(int(pid))
        if now == -1 or (now != 0 and str(now) != start):
            dead.append(name)
    if not dead:
        return found
    _kill_tagged({f"{WALL_OWNER}={name}".encode() for name in dead})
    for name in dead:
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass
    return found + len(dead)


def _kill_tagged(tags: set[bytes]) -> None:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                if _BWRAP_COMM not in f.read(64):
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
        except OSError:
            continue
        if env & tags:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
