"""Which DAL processes may have left something running (reaper.py): a file per process in a folder of its
user's, made before its first cgroup or wall and removed when it exits. A file whose process is gone is the
one thing a run's start looks for, so that a start with nothing to sweep costs a folder listing."""

from __future__ import annotations

import atexit
import functools
import os

__all__ = ["dead", "forget", "register", "start_time", "tag"]


def start_time(pid: int) -> int:
    """When `pid` started (clock ticks after boot, /proc/PID/stat's field 22): -1 when it is gone, 0 when it
    cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return -1
    except OSError:
        return 0
    fields = data[data.rfind(b")") + 2:].split()
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else 0


@functools.lru_cache(maxsize=4)
def tag(pid: int) -> str:
    """A process's tag: its pid and start time (a pid alone may name another process later)."""
    return f"{pid}-{start_time(pid)}"


def gone(pid: int, start: int | None) -> bool:
    """Whether the process `pid` that started at `start` (None: unknown) is gone: no such pid, or another
    process has it now."""
    now = start_time(pid)
    return now == -1 or (start is not None and now != 0 and now != start)


def _folder() -> str:
    return f"/tmp/dal-walls-{os.geteuid()}"  # one for every DAL process of the user, whatever its TMPDIR


_registered: set[int] = set()


def register() -> None:
    """Before this process makes its first cgroup or wall: leave the file that names it (removed at exit)."""
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
        path = os.path.join(folder, tag(pid))
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


def dead() -> list[str]:
    """The tags of the registered processes that are gone."""
    try:
        names = os.listdir(_folder())
    except OSError:
        return []
    out = []
    for name in names:
        pid, _, start = name.partition("-")
        if pid.isdigit() and start.isdigit() and gone(int(pid), int(start)):
            out.append(name)
    return out


def forget(name: str) -> None:
    try:
        os.unlink(os.path.join(_folder(), name))
    except OSError:
        pass
