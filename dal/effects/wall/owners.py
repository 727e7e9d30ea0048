"""Which DAL processes may have left something running (reaper.py): a file per process in a folder of its
user's alone, made before its first cgroup or wall and removed when it exits. A file whose process is gone is
the one thing that makes a run's start kill what a wall left (reaper.sweep).

Where a process ran is part of its name here: a pid and start time say which process it was only in the pid
namespace, and on the boot of the host, where they were read. A DAL in a container sharing the folder or the
workspace, or on another host sharing the workspace, would otherwise look gone from here (its pid free in this
namespace) and have its live pipeline "finished" or its command killed. So each registration, each record of
held.py and each command cgroup of limits.py says where its owner runs (`here()`), and `verdict` (the one
answer, dal.core.liveness) concludes "gone" only for an owner that provably is; anything else is left alone."""

from __future__ import annotations

import atexit
import errno
import functools
import json
import os
import stat
import sys

from dal.core import liveness

__all__ = ["dead", "forget", "gone", "here", "pid_namespace", "register", "start_time", "tag", "verdict"]


def start_time(pid: int) -> int:
    """When `pid` started (clock ticks after boot): -1 when it is gone, 0 when it cannot be read."""
    now = liveness.start_time(pid)
    if now is not None:
        return now
    return 0 if liveness.pid_exists(pid) else -1


@functools.lru_cache(maxsize=4)
def tag(pid: int) -> str:
    """A process's tag: its pid and start time (a pid alone may name another process later)."""
    return f"{pid}-{start_time(pid)}"


def gone(pid: int, start: int | None) -> bool:
    """Whether the process `pid` that started at `start` (None: unknown), of this pid namespace, is gone."""
    return liveness.verdict(pid, start, None) == "gone"


def pid_namespace() -> int:
    """The inode of this process's pid namespace; 0 when it cannot be read."""
    return liveness.here()["pidns"] or 0


here = liveness.here
describe = liveness.describe


def verdict(pid: int, start: int | None, where: object) -> str | None:
    """Whether the owner (`pid`, `start`), recorded as running `where` (here() as it was; None for what an
    older DAL wrote), is gone: "gone", "alive", or None when this process cannot tell (dal.core.liveness)."""
    judged = liveness.verdict(pid, start, where)
    return None if judged == "unknown" else judged


# --- the registry ------------------------------------------------------------------------------------


def _folders() -> list[str]:
    """Where registrations are: /tmp/dal-walls-EUID (the same for every process of the user, whatever its
    environment), and the operator's state folder, used when the first is not the user's alone."""
    out = [f"/tmp/dal-walls-{os.geteuid()}"]
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    if base.startswith("/"):
        out.append(os.path.join(base, "dal", "walls"))
    return out


def _open(folder: str, make: bool) -> tuple[int | None, str | None]:
    """The folder opened (no symlink followed), when it is a folder of this user's alone (owner the euid, no
    access for group or others): (fd, None), else (None, why not)."""
    if make:
        try:
            os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            return None, f"cannot be made ({e.strerror})"
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, "does not exist"
    except OSError as e:
        if e.errno in (errno.ENOTDIR, errno.ELOOP):
            return None, "is a symlink or not a folder"
        return None, f"cannot be opened ({e.strerror})"
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        return None, f"is not this user's alone (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o})"
    return fd, None


_registered: set[int] = set()


def register() -> None:
    """Before this process makes its first cgroup or wall: leave the file that names it (removed at exit), in
    the first folder of _folders() that is this user's alone. A folder at that name that is not (another user
    made /tmp/dal-walls-0 first) is said in one line on stderr and passed over."""
    pid = os.getpid()
    if pid in _registered:
        return
    _registered.add(pid)
    refused = []
    for folder in _folders():
        fd, why = _open(folder, make=True)
        if fd is None:
            refused.append(f"{folder} {why}")
            continue
        try:
            name = tag(pid)
            out = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                          dir_fd=fd)
            try:
                os.write(out, json.dumps(here()).encode())
            finally:
                os.close(out)
        except OSError as e:
            os.close(fd)
            refused.append(f"{folder}: {e.strerror}")
            continue
        atexit.register(_unregister, fd, name, pid)
        if refused:
            _say(f"{'; '.join(refused)}: this process's walls are registered in {folder} instead")
        return
    _say(f"{'; '.join(refused)}: this process's walls are not registered, so what they leave running if it is "
         "killed (kill -9) is not swept by the next start (docs/policy.md, \"Killed with DAL\")")


def _say(text: str) -> None:
    sys.stderr.write(f"dal: warning: {text}\n")


def _unregister(fd: int, name: str, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child that exits
        try:
            os.unlink(name, dir_fd=fd)
        except OSError:
            pass


def _each() -> list[tuple[int, str]]:
    """(fd, folder) of every registry folder that exists and is this user's alone; the caller closes them."""
    out = []
    for folder in _folders():
        fd, _ = _open(folder, make=False)
        if fd is not None:
            out.append((fd, folder))
    return out


def dead() -> list[str]:
    """The tags of the registered processes that are provably gone (see verdict), in any registry folder
    of this user's alone."""
    out: list[str] = []
    for fd, _ in _each():
        try:
            for name in os.listdir(fd):
                pid, _, start = name.partition("-")
                if not (pid.isdigit() and start.isdigit()) or name in out:
                    continue
                if verdict(int(pid), int(start), _where(fd, name)) == "gone":
                    out.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return out


def _where(fd: int, name: str) -> object:
    """What a registration says of where its process ran: None for an empty file (an older DAL's), a
    non-dict (never "gone") for one that cannot be read."""
    try:
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            data = os.read(f, 4096)
        finally:
            os.close(f)
        return json.loads(data) if data else None
    except (OSError, ValueError):
        return "unreadable"


def forget(name: str) -> None:
    for fd, _ in _each():
        try:
            os.unlink(name, dir_fd=fd)
        except OSError:
            pass
        finally:
            os.close(fd)
