"""Landlock: the kernel's unprivileged access control, the wall where bubblewrap cannot make a user namespace
(docs/policy.md, "The Landlock wall").

A ruleset lists folders and files with the rights a program keeps beneath each; everything else of the
filesystem is refused to it, whatever its mode bits say, and so is every TCP bind and connect (ABI 4) and,
from ABI 6, every abstract unix socket and signal that leaves the program's own processes. DAL builds the
ruleset before the fork, from descriptors it opened itself (O_PATH); the child only sets no_new_privs and
restricts itself, between fork and exec, and so does everything it starts, for good.

This module is the primitive: the ABI probe, the rights each ABI handles, and the ruleset. Which paths get
which rights is the wall's plan (landlock_wall.py).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import stat
from collections.abc import Callable

__all__ = ["abi", "missing", "Ruleset", "LandlockError", "READ", "EXECUTE", "WRITE_ALL", "FILE_RIGHTS"]

# include/uapi/linux/landlock.h. The three system calls have the same numbers on every architecture.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: link or rename into another folder
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5: ioctl on a device file

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = READ_FILE | READ_DIR
# What a rule on a file (not a folder) may name; the kernel refuses a rule that names more (EINVAL).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
# Everything but making device nodes and ioctl on devices: what a write root gives (intersected with the ABI).
WRITE_ALL = (EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG
             | MAKE_SOCK | MAKE_FIFO | MAKE_SYM | REFER | TRUNCATE)


class LandlockError(Exception):
    """The ruleset cannot be made as asked; nothing runs."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.lru_cache(maxsize=1)
def abi() -> int:
    """The Landlock ABI version the kernel offers (1 for 5.13, ... 7 for 6.15), 0 when it has none or it is
    disabled (not in the boot's lsm= list): landlock_create_ruleset(NULL, 0, VERSION)."""
    if os.uname().sysname != "Linux":
        return 0
    syscall = _libc().syscall
    syscall.restype = ctypes.c_long
    found = syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(found), 0)


def missing() -> str | None:
    """Why the Landlock wall cannot be had here; None when it can."""
    if os.uname().sysname != "Linux":
        return "Landlock is Linux's (this is not Linux)"
    if abi() == 0:
        return ("the kernel has no Landlock (Linux 5.13 or later, with landlock in the boot's lsm= list; "
                "/sys/kernel/security/lsm names the modules in force)")
    return None


def handled_fs(version: int) -> int:
    """The filesystem rights a ruleset of ABI `version` handles: each one a rule does not grant is refused."""
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def handled_net(version: int) -> int:
    """The network rights handled (ABI 4: TCP bind and connect; none before)."""
    return NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0


def scoped(version: int) -> int:
    """What is scoped to the program's own domain (ABI 6: abstract unix sockets and signals; none before)."""
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0


class Ruleset:
    """One Landlock ruleset, made in DAL before the fork: allow() adds a rule from a descriptor DAL opened,
    restrictor() is the function for preexec_fn that applies it to the child. `network` False handles TCP
    (ABI 4), so that no rule allows any; True leaves the network to the program. close() releases the
    ruleset's descriptor; use it as a context manager."""

    def __init__(self, network: bool = False, version: int | None = None) -> None:
        self.abi = abi() if version is None else version
        if self.abi <= 0:
            raise LandlockError(missing() or "the kernel has no Landlock")
        self.handled = handled_fs(self.abi)
        attr = _RulesetAttr(self.handled, 0 if network else handled_net(self.abi), scoped(self.abi))
        # An older kernel takes the whole struct as long as the fields it does not know are zero.
        size = ctypes.sizeof(_RulesetAttr)
        syscall = _libc().syscall
        fd = syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            raise LandlockError(f"cannot make a Landlock ruleset: {os.strerror(ctypes.get_errno())}")
        self.fd: int = int(fd)
        self.network = network
        self.rules = 0

    def __enter__(self) -> Ruleset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def allow_fd(self, fd: int, rights: int) -> None:
        """Grant `rights` beneath the folder (or on the file) open at `fd` (O_PATH is enough); rights the ABI
        does not know are dropped, and on a file only the rights a file can have are kept."""
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        rights &= self.handled
        if not rights:
            return
        attr = _PathBeneathAttr(rights, fd)
        syscall = _libc().syscall
        if syscall(ctypes.c_long(_ADD_RULE), ctypes.c_int(self.fd), ctypes.c_int(_RULE_PATH_BENEATH),
                   ctypes.byref(attr), ctypes.c_uint32(0)) != 0:
            raise LandlockError(f"cannot add a Landlock rule: {os.strerror(ctypes.get_errno())}")
        self.rules += 1

    def allow(self, path: str, rights: int, follow: bool = True) -> bool:
        """Grant `rights` beneath `path`; False when it does not exist (nothing to grant). With `follow`
        False, a symbolic link at `path` itself is refused (LandlockError), not followed."""
        flags = os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            return False
        try:
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise LandlockError(f"{path} is a symbolic link, so it is not what the policy named")
            self.allow_fd(fd, rights)
        finally:
            os.close(fd)
        return True

    def restrictor(self) -> Callable[[], None]:
        """A function for preexec_fn: every capability dropped (DAL run as root: Landlock restricts paths, not
        what CAP_SYS_MODULE or CAP_CHOWN allow), no_new_privs (the kernel requires it of an unprivileged
        process), then landlock_restrict_self. Everything it needs is made here, before the fork."""
        if self.fd < 0:
            raise LandlockError("the ruleset is closed")
        libc = _libc()
        prctl, syscall, get_errno = libc.prctl, libc.syscall, ctypes.get_errno
        nr, fd, zero = ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(self.fd), ctypes.c_uint32(0)
        drop = _drop_capabilities() if _has_capabilities() else None

        def restrict() -> None:
            if drop is not None:
                drop()
            if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or syscall(nr, fd, zero) != 0:
                raise OSError(get_errno() or errno.EPERM, "cannot restrict the program with Landlock")

        return restrict


def _has_capabilities() -> bool:
    """Whether this process holds any capability, effective, permitted or in its bounding set (root)."""
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status") as f:
            caps = {k: int(v, 16) for k, _, v in (line.partition(":") for line in f) if k in ("CapPrm", "CapEff")}
    except (OSError, ValueError):
        return True
    return any(caps.values())


def _drop_capabilities() -> Callable[[], None]:
    """A function for the child: empty bounding set (an exec cannot give any back, not even to root), no
    ambient capabilities, and none effective, permitted or inheritable."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    libc = _libc()
    prctl, capset, get_errno = libc.prctl, libc.capset, ctypes.get_errno
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two struct __user_cap_data_struct, all zero

    def drop() -> None:
        for cap in range(last + 1):
            if prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and get_errno() != errno.EINVAL:
                raise OSError(get_errno(), "cannot drop the capabilities")
        prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        if capset(header, data) != 0:
            raise OSError(get_errno(), "cannot drop the capabilities")

    drop.keep = (header, data)  # type: ignore[attr-defined]
    return drop
