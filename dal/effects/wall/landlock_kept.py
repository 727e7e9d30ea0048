"""What the Landlock wall cannot make read-only, kept and put back (docs/policy.md, "The Landlock wall").

Landlock cannot carve a read-only path out of a folder a program may write, and the folders on the way to
one would take no new entries if the wall did it by granting their entries one by one. So for a pipeline
of the default toolset alone (whose writes the check sees and denies there) the protected paths of the
write roots -- the workspace's dal.toml, `.git`'s config and hooks, `[paths] protect` -- are copied before
the pipeline (files, symbolic links, folders, up to a budget) and put back after it exactly as they were,
walked from folders opened without following symlinks; the command then fails naming what was put back.
A copy is JSON, for the record a later start finishes from when DAL is killed meanwhile (held.py).
"""

from __future__ import annotations

import os
import shutil
import stat
from typing import Any

from dal.effects.wall.sandbox import WallRefused, _open_nofollow

__all__ = ["snapshot", "restore", "BUDGET"]

BUDGET = 4 << 20  # bytes of protected files copied for one pipeline, at most
_ENTRIES = 5_000  # and entries
Snap = Any  # None (absent) | ["f", mode, latin-1 text] | ["l", target] | ["d", mode, {name: Snap}] | ["o"]


class _Budget:
    def __init__(self, nbytes: int, entries: int) -> None:
        self.bytes, self.entries = nbytes, entries

    def take(self, nbytes: int) -> None:
        self.bytes -= nbytes
        self.entries -= 1
        if self.bytes < 0 or self.entries < 0:
            raise OverflowError


def snapshot(paths: list[str], budget: int = BUDGET) -> dict[str, Snap]:
    """{path: its copy} for each of `paths`; WallRefused past the budget (too much to keep: nothing runs)."""
    left = _Budget(budget, _ENTRIES)
    out: dict[str, Snap] = {}
    try:
        for path in paths:
            out[path] = _snap_path(path, left)
    except OverflowError:
        raise WallRefused(f"the protected paths of the write roots hold more than {budget >> 20} MiB or {_ENTRIES} "
                          "entries, more than the Landlock wall keeps to put back; only programs the check "
                          "models run here") from None
    return out


def _snap_path(path: str, left: _Budget) -> Snap:
    folder, name = os.path.split(path)
    try:
        dirfd = _open_nofollow(folder, want_dir=True)
    except (FileNotFoundError, NotADirectoryError, WallRefused):
        return None
    try:
        return _snap_at(dirfd, name, left)
    finally:
        os.close(dirfd)


def _snap_at(dirfd: int, name: str, left: _Budget) -> Snap:
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        left.take(0)
        return ["l", os.readlink(name, dir_fd=dirfd)]
    if stat.S_ISREG(st.st_mode):
        left.take(st.st_size)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dirfd)
        try:
            data = b""
            while chunk := os.read(fd, 1 << 20):
                data += chunk
                left.take(len(chunk))
        finally:
            os.close(fd)
        return ["f", mode, data.decode("latin-1")]
    if stat.S_ISDIR(st.st_mode):
        left.take(0)
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
        try:
            return ["d", mode, {n: _snap_at(fd, n, left) for n in sorted(os.listdir(fd))}]
        finally:
            os.close(fd)
    return ["o"]


def restore(kept: dict[str, Snap]) -> list[str]:
    """Put back each kept path that is not as it was; returns the paths put back (or that could not be)."""
    out = []
    for path, snap in kept.items():
        try:
            now = _snap_path(path, _Budget(BUDGET * 4, _ENTRIES * 4))
        except OverflowError:
            now = ["o", "grown"]
        if now == snap:
            continue
        folder, name = os.path.split(path)
        try:
            dirfd = _open_nofollow(folder, want_dir=True)
        except (OSError, WallRefused):
            out.append(f"{path} (changed inside the wall; could not put it back)")
            continue
        try:
            _restore_at(dirfd, name, snap)
            out.append(f"{path} (changed inside the wall; put back as it was)")
        except OSError as e:
            out.append(f"{path} (changed inside the wall; could not put it back: {e.strerror})")
        finally:
            os.close(dirfd)
    return out


def _remove_at(dirfd: int, name: str) -> None:
    if stat.S_ISDIR(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode):
        shutil.rmtree(name, dir_fd=dirfd)
    else:
        os.unlink(name, dir_fd=dirfd)


def _restore_at(dirfd: int, name: str, snap: Snap) -> None:
    try:
        st: os.stat_result | None = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if snap is None or snap[0] == "o":
        if st is not None and snap is None:
            _remove_at(dirfd, name)
        return
    kind = snap[0]
    if kind == "d":
        if st is not None and not stat.S_ISDIR(st.st_mode):
            _remove_at(dirfd, name)
            st = None
        if st is None:
            os.mkdir(name, 0o700, dir_fd=dirfd)
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
        try:
            os.fchmod(fd, snap[1])
            for extra in set(os.listdir(fd)) - set(snap[2]):
                _remove_at(fd, extra)
            for sub, inner in snap[2].items():
                _restore_at(fd, sub, inner)
        finally:
            os.close(fd)
        return
    if st is not None:
        _remove_at(dirfd, name)  # a file is written anew: a hard link to it elsewhere keeps what was written
    if kind == "l":
        os.symlink(snap[1], name, dir_fd=dirfd)
        return
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
    try:
        data = memoryview(snap[2].encode("latin-1"))
        while data:
            data = data[os.write(fd, data):]
        os.fchmod(fd, snap[1])
    finally:
        os.close(fd)
