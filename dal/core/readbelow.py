"""Read a file below a root by descriptor: how DAL, outside the wall, reads a name a script can change.

A script's programs may swap any name under the workspace for a symlink at any moment, and what DAL reads
on the operator's side reaches the agent (a diagnostic quotes a source line, a receipt carries a digest).
A reader that tests a name and then opens it, or opens it following links, can so be led to any file the
operator can read. Here the name is walked from the root's descriptor one component at a time, each
opened with O_NOFOLLOW relative to the directory already held; a symlink met is read and followed by hand,
and only while it stays below the root. The descriptor reached is checked — a regular file, with one link,
still below the root — and read; the name is never opened a second time.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Collection, Iterable
from typing import TypeVar

from dal.core.fsutil import realpath

__all__ = ["HIDDEN_STATE", "NotBelow", "UnreadableScript", "open_below", "read_below", "read_named", "read_script",
           "read_text_below", "reopen_below", "root_of", "stat_below"]

# DAL's own state folder (store, receipts, kept scripts): hidden from scripts, so not read for them either.
HIDDEN_STATE = frozenset({".dal"})
_MAX_SYMLINKS = 40  # as the kernel's own limit
# O_PATH (Linux) opens a folder without reading it; elsewhere a plain read-only open of it does as well.
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO put in the file's place cannot hang DAL in open(); O_NOCTTY: nor become its terminal.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY

T = TypeVar("T")


class NotBelow(OSError):
    """The name leads outside the root, or to something other than a file DAL may read for the agent."""

    def __init__(self, name: str, why: str, leads_out: bool = False, hidden: bool = False) -> None:
        super().__init__(errno.EACCES, why, name)
        self.leads_out = leads_out  # through `..` or a symlink (else: not a file to read, or it changed)
        self.hidden = hidden  # the walk met a name it was told to hide


def open_below(root: str | os.PathLike[str], name: str | os.PathLike[str], hide: Collection[str] = ()) -> int:
    """A read-only descriptor for the regular file `name` (relative to `root`, or absolute and inside it).

    Raises NotBelow when the name leads outside `root` (through `..` or a symlink), is not a regular file,
    has other hard links (which may be outside), or moved out while it was opened, or when the walk meets a
    folder or file named as one of `hide` (physically: a symlink to one is caught too); FileNotFoundError,
    IsADirectoryError and other OSErrors as open() would."""
    return _resolve(root, name, _open_last, hide)


def read_below(root: str | os.PathLike[str], name: str | os.PathLike[str], limit: int | None = None,
               hide: Collection[str] = ()) -> bytes:
    """The bytes of the regular file `name` below `root` (as open_below opens it); at most `limit` bytes."""
    fd = open_below(root, name, hide)
    try:
        chunks = []
        left = limit
        while left is None or left > 0:
            chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            if left is not None:
                left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_below(root: str | os.PathLike[str], name: str | os.PathLike[str], hide: Collection[str] = ()) -> str:
    """The UTF-8 text of the regular file `name` below `root`; UnicodeDecodeError when it is not UTF-8."""
    return read_below(root, name, hide=hide).decode("utf-8")


def read_named(path: str | os.PathLike[str], roots: Iterable[str]) -> bytes:
    """The bytes of a file the operator named: below the first of `roots` it is in (the places a script may
    change names) by descriptor, as read_below reads it; below none of them, as named."""
    full = os.path.abspath(os.fspath(path))
    below = root_of(full, roots)
    if below is None:
        with open(full, "rb") as f:
            return f.read()
    return read_below(*below)


class UnreadableScript(Exception):
    """A script that cannot be read as text; the message names it and says why, for the operator."""


def read_script(path: str | os.PathLike[str], roots: Iterable[str], name: str | None = None) -> str:
    """The UTF-8 text of the script the operator named at `path`, read as read_named reads it (below
    `roots` by descriptor). `name`: how messages call it (default: `path`). Raises UnreadableScript."""
    name = os.fspath(path) if name is None else name
    try:
        data = read_named(path, roots)
    except NotBelow as e:
        raise UnreadableScript(f"cannot read {name}: {e.strerror}") from None
    except FileNotFoundError:
        raise UnreadableScript(f"no such script: {name}") from None
    except IsADirectoryError:
        raise UnreadableScript(f"{name} is a directory, not a script") from None
    except OSError as e:
        raise UnreadableScript(f"cannot read {name}: {e.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnreadableScript(f"{name} is not UTF-8 text (invalid byte at offset {e.start})") from None


def stat_below(root: str | os.PathLike[str], name: str | os.PathLike[str]) -> os.stat_result:
    """What lstat() says of `name` below `root`, its folders walked as open_below walks them (a symlink as
    the last component is reported, not followed). Raises NotBelow when a folder on the way leads outside."""
    return _resolve(root, name, _lstat_last)


def root_of(path: str | os.PathLike[str], roots: Iterable[str]) -> tuple[str, str] | None:
    """The first of `roots` that `path` (absolute; `..` taken by name, as git takes it) is below, by its name
    or by its folder's real path, and the name below it; None when it is below none (a file the operator
    named outside every place a script may change)."""
    p = os.path.normpath(os.fspath(path))
    names = (p, os.path.join(realpath(os.path.dirname(p)), os.path.basename(p)))
    for root in roots:
        for r in dict.fromkeys((os.path.normpath(root), realpath(root))):
            for n in names:
                if n.startswith(r.rstrip("/") + "/"):
                    return r, n[len(r.rstrip("/")) + 1:]
    return None


def _open_last(dirfd: int, name: str, shown: str, root_real: str) -> int | str:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dirfd)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        return _readlink(name, dirfd, shown, e)
    try:
        _check_file(fd, shown, root_real)
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _lstat_last(dirfd: int, name: str, shown: str, root_real: str) -> os.stat_result:
    return os.stat(name, dir_fd=dirfd, follow_symlinks=False)


def _check_file(fd: int, shown: str, root_real: str) -> None:
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), shown)
    if not stat.S_ISREG(st.st_mode):
        raise NotBelow(shown, "not a regular file (a FIFO, socket or device)")
    if st.st_nlink > 1:
        raise NotBelow(shown, f"the file has {st.st_nlink} hard links, and the others may be outside {root_real}")
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc: the walk itself is the check
        return
    if not where.startswith(root_real.rstrip("/") + "/"):
        raise NotBelow(shown, f"the file moved out of {root_real} while it was being opened", True)


def _resolve(root: str | os.PathLike[str], name: str | os.PathLike[str],
             last: Callable[[int, str, str, str], T | str], hide: Collection[str] = ()) -> T:
    """Walk `name` below `root` and apply `last` to the final component (the folder holding it and its
    name); `last` returns a symlink's target (str) when the component is one, to be followed by hand."""
    shown = os.fspath(name)
    root_fd = os.open(os.fspath(root), _DIR_FLAGS & ~os.O_NOFOLLOW)  # the operator's own path: followed
    try:
        root_real = os.path.realpath(f"/proc/self/fd/{root_fd}") if os.path.isdir("/proc/self/fd") \
            else os.path.realpath(os.fspath(root))
        names = tuple(dict.fromkeys((root_real, os.path.normpath(os.path.abspath(os.fspath(root))))))
        todo = _components(shown, names, shown)
        todo.reverse()  # a stack: the next component last
        here: list[str] = []  # the components of `dirfd` below the root
        dirfd = os.dup(root_fd)
        hops = 0
        try:
            while todo:
                part = todo.pop()
                if part == "..":
                    if not here:
                        raise NotBelow(shown, f"the path leads outside {root_real}", True)
                    here.pop()
                    nxt = reopen_below(root_fd, here, shown)  # before the close: a raise leaves dirfd open
                    os.close(dirfd)
                    dirfd = nxt
                    continue
                if part in hide:
                    raise NotBelow(shown, f"{part} is not read here", hidden=True)
                if todo:  # a folder on the way
                    try:
                        nxt = os.open(part, _DIR_FLAGS, dir_fd=dirfd)
                    except OSError as e:
                        if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                            raise
                        got: T | str = _readlink(part, dirfd, shown, e)
                    else:
                        os.close(dirfd)
                        dirfd = nxt
                        here.append(part)
                        continue
                else:
                    got = last(dirfd, part, shown, root_real)
                    if not isinstance(got, str):
                        return got
                hops += 1  # `part` is a symlink to `got`
                if hops > _MAX_SYMLINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), shown)
                if got.startswith("/"):
                    here.clear()
                    nxt = os.dup(root_fd)
                    os.close(dirfd)
                    dirfd = nxt
                todo.extend(reversed(_components(got, names, shown)))
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), shown)
        finally:
            os.close(dirfd)
    finally:
        os.close(root_fd)


def _components(path: str, roots: tuple[str, ...], shown: str) -> list[str]:
    """The components of `path` below the root: an absolute path must name a place inside the root (by its
    real path, or by the name it was given)."""
    if path.startswith("/"):
        for root in roots:
            rel = os.path.relpath(os.path.normpath(path), root)
            if rel != ".." and not rel.startswith("../"):
                path = rel
                break
        else:
            raise NotBelow(shown, f"the path leads outside {roots[0]} (to {path})", True)
    return [c for c in path.split("/") if c not in ("", ".")]


def _readlink(name: str, dirfd: int, shown: str, cause: OSError) -> str:
    try:
        return os.readlink(name, dir_fd=dirfd)
    except OSError:  # not a symlink (any more)
        changed = cause.errno == errno.ELOOP  # it was one a moment ago
        if not changed:
            try:  # a folder or a symlink now, where open() met neither: the tree changed meanwhile
                mode = os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode
                changed = stat.S_ISDIR(mode) or stat.S_ISLNK(mode)
            except OSError:
                changed = True
        if changed:
            raise NotBelow(shown, "the path changed while it was being opened") from None
        raise cause from None  # a file where a folder was named


def reopen_below(root_fd: int, components: list[str], shown: str) -> int:
    """The folder `components` below the folder `root_fd`, walked again from it without following anything
    (a new descriptor; `root_fd` stays open): after `..` the parent is taken by name, never as the kernel's
    `..` of a folder that may have moved. Raises NotBelow when a component is no longer a folder."""
    fd = os.dup(root_fd)
    try:
        for part in components:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                    raise NotBelow(shown, "the path changed while it was being opened") from None
                raise
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise
