"""Open a redirection target so that no swap of a directory or a symlink can redirect it.

DAL opens `< f`, `> f` and `>> f` itself, outside the wall, after the check. A process of the script may
be running meanwhile (an earlier stage of the pipeline) and swap a directory on the path for a symlink
that leads out. So the path is walked one component at a time from `/`, each directory opened relative
to the one before with O_NOFOLLOW (an open that cannot follow a symlink), and every symlink met is read
and followed by hand; the path so reached is checked against the roots before the last component is
opened, again with O_NOFOLLOW, relative to the directory already held. What is opened is then exactly
what was checked, whatever changes around it. A change that makes the walk fail is a denial
(`DeniedAtOpen`), never an error of DAL.
"""

from __future__ import annotations

import errno
import os
import stat

from dal.core.readbelow import NotBelow, reopen_below
from dal.effects.plan import paths as P
from dal.effects.policy import Policy

__all__ = ["DeniedAtOpen", "open_redirect"]

_MAX_SYMLINKS = 40  # as the kernel's own limit
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class DeniedAtOpen(Exception):
    """The target is outside the roots, protected, or changed while it was being opened."""


def open_redirect(raw: str, op: str, policy: Policy) -> int:
    """A descriptor for redirection `op` (`<`, `>`, `>>`) to `raw` (relative to the workspace).

    Raises DeniedAtOpen when the target leaves the allowed roots (also through a symlink that appeared
    since the check), is protected, or has other hard links; OSError for an ordinary failure (no such
    file for `<`, a directory, ...)."""
    write = op != "<"
    if op == "<":
        flags = os.O_RDONLY
    elif op == ">>":
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    else:
        flags = os.O_WRONLY | os.O_CREAT  # truncated below, once the file is known to be allowed
    # O_NONBLOCK so that a FIFO cannot hang DAL itself in open(); the program gets a blocking fd back
    # and is then bounded by the timeout like any other wait.
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    start = os.path.join(policy.workspace, raw)
    if os.path.normpath(start) == P.NULL_DEVICE:
        return _finish(os.open(P.NULL_DEVICE, flags & ~os.O_NOFOLLOW), op)
    fd = _walk(start, raw, write, flags, policy)
    return _finish(fd, op, raw)


def _finish(fd: int, op: str, raw: str = P.NULL_DEVICE) -> int:
    try:
        st = os.fstat(fd)
        if raw != P.NULL_DEVICE:
            if (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)) and st.st_rdev != _null_rdev():
                raise DeniedAtOpen(f"{raw}: a device file")
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                raise DeniedAtOpen(f"{raw}: the file has {st.st_nlink} hard links, and the others may be outside "
                                   "the allowed roots")
        if op == ">" and stat.S_ISREG(st.st_mode):
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _null_rdev() -> int:
    return os.stat(P.NULL_DEVICE).st_rdev


def _walk(path: str, raw: str, write: bool, flags: int, policy: Policy) -> int:
    """Resolve `path` (absolute) component by component and open its last component with `flags`."""
    todo = [c for c in path.split("/") if c not in ("", ".")]
    todo.reverse()  # a stack: the next component last
    here: list[str] = []  # the physical path of `dirfd`, as components
    dirfd = os.open("/", _DIR_FLAGS)
    hops = 0
    try:
        while todo:
            name = todo.pop()
            if name == "..":
                if here:
                    here.pop()
                    nxt = _reopen(here, raw)  # before the close: a raise leaves dirfd open for `finally`
                    os.close(dirfd)
                    dirfd = nxt
                continue
            if todo:  # a directory on the way
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=dirfd)
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    target = _readlink(name, dirfd, raw, e)
                    hops = _follow(target, todo, here, hops, raw)
                    if target.startswith("/"):
                        nxt = os.open("/", _DIR_FLAGS)
                        os.close(dirfd)
                        dirfd = nxt
                    continue
                os.close(dirfd)
                dirfd = nxt
                here.append(name)
                continue
            # The last component: check where it is before opening (O_CREAT and O_TRUNC act on open).
            candidate = "/" + "/".join([*here, name])
            _check(candidate, raw, write, policy)
            try:
                return os.open(name, flags, 0o666, dir_fd=dirfd)
            except OSError as e:
                if e.errno != errno.ELOOP:
                    raise
                target = _readlink(name, dirfd, raw, e)  # the last component is a symlink: follow it
                hops = _follow(target, todo, here, hops, raw)
                if target.startswith("/"):
                    nxt = os.open("/", _DIR_FLAGS)
                    os.close(dirfd)
                    dirfd = nxt
        # The path ends at a directory (`> d/.` or `> /`): check it, and let open() say what it says.
        candidate = "/" + "/".join(here)
        _check(candidate, raw, write, policy)
        return os.open(".", flags, 0o666, dir_fd=dirfd)
    finally:
        os.close(dirfd)


def _readlink(name: str, dirfd: int, raw: str, cause: OSError) -> str:
    try:
        return os.readlink(name, dir_fd=dirfd)
    except OSError as e:
        if e.errno == errno.EINVAL:  # not a symlink (any more): the tree changed while it was opened
            raise DeniedAtOpen(f"{raw}: the path changed while it was being opened") from None
        raise cause from None


def _follow(target: str, todo: list[str], here: list[str], hops: int, raw: str) -> int:
    hops += 1
    if hops > _MAX_SYMLINKS:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), raw)
    if target.startswith("/"):
        here.clear()
    todo.extend(reversed([c for c in target.split("/") if c not in ("", ".")]))
    return hops


def _reopen(components: list[str], raw: str) -> int:
    """The physical path `components`, walked again from `/` without following anything (the core walk)."""
    root = os.open("/", _DIR_FLAGS)
    try:
        return reopen_below(root, components, raw)
    except NotBelow:
        raise DeniedAtOpen(f"{raw}: the path changed while it was being opened") from None
    finally:
        os.close(root)


def _check(candidate: str, raw: str, write: bool, policy: Policy) -> None:
    if candidate == P.NULL_DEVICE:
        return
    why = P.special_denial(candidate, candidate)
    if why:
        raise DeniedAtOpen(why)
    roots = policy.write_roots if write else policy.read_roots
    if not P.within(candidate, roots):
        raise DeniedAtOpen(f"{'writes' if write else 'reads'} outside the allowed roots: {raw} (resolves to "
                           f"{candidate})")
    if write:
        why = policy.protection(candidate)
        if why:
            raise DeniedAtOpen(why)
