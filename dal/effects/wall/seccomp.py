"""A seccomp filter that keeps programs from making set-user-ID or set-group-ID files (docs/policy.md, "The
wall").

Inside the wall a program keeps DAL's own uid on the host (its user namespace maps it to itself), and
chmod needs no capability for a file one owns: `cp /usr/bin/id x && chmod 4755 x` would leave, in a write
root, a program that runs as DAL's user -- root, when DAL runs as root -- for anyone on the host. The wall's
nosuid mounts hold only inside the wall. So every way to give a file those mode bits fails with EPERM:
chmod, fchmod, fchmodat, fchmodat2, and open, openat, creat, mknod, mknodat with them in the mode. openat2
(its mode is behind a pointer the filter cannot read) and io_uring (which opens files without these system
calls) fail with ENOSYS, so that programs fall back to openat. System calls of another ABI (i386, x32; on
aarch64, AArch32) fail too.

While the network is off, socket(AF_UNIX, ...) fails with EACCES as well: a read-only bind does not stop
connect(2) to a socket file in a read root (a daemon's `READROOT/daemon.sock`), and with no socket of that
family a program cannot connect to any; socketpair(2), which makes a connected pair and nothing else, stays.

The filter is classic BPF, built here for x86_64 and aarch64; bubblewrap installs
it (`--seccomp FD`), and a program started without the wall installs it between fork and exec.
"""

from __future__ import annotations

import errno
import functools
import os
import struct
from collections.abc import Callable

import attrs

__all__ = ["available", "program", "install"]

_SUID_SGID = 0o6000
_AF_UNIX = 1


@attrs.frozen
class _Abi:
    """One machine's system call ABI: its AUDIT_ARCH_* value (seccomp_data.arch), the calls that take a mode
    (number, index of the mode argument), the calls refused with ENOSYS, seccomp(2)'s own number, and
    whether numbers from 0x40000000 up are another ABI of the same arch value (x86_64's x32)."""

    arch: int
    mode_arg: dict[str, tuple[int, int]]
    nosys: dict[str, int]
    seccomp_nr: int
    socket_nr: int
    x32: bool = False


# x86_64: arch/x86/entry/syscalls/syscall_64.tbl. aarch64: include/uapi/asm-generic/unistd.h (no chmod,
# open, creat or mknod: only their *at forms); AUDIT_ARCH_AARCH64 is EM_AARCH64 (183) | 64BIT | LE. From
# 424 on, numbers are the same on every architecture (openat2 437, fchmodat2 452, io_uring_setup 425).
ABIS: dict[str, _Abi] = {
    "x86_64": _Abi(
        arch=0xC000003E,
        mode_arg={"chmod": (90, 1), "fchmod": (91, 1), "fchmodat": (268, 2), "fchmodat2": (452, 2), "open": (2, 2),
                  "openat": (257, 3), "creat": (85, 1), "mknod": (133, 1), "mknodat": (259, 2)},
        nosys={"openat2": 437, "io_uring_setup": 425},
        seccomp_nr=317,
        socket_nr=41,
        x32=True,
    ),
    "aarch64": _Abi(
        arch=0xC00000B7,
        mode_arg={"fchmod": (52, 1), "fchmodat": (53, 2), "fchmodat2": (452, 2), "openat": (56, 3),
                  "mknodat": (33, 2)},
        nosys={"openat2": 437, "io_uring_setup": 425},
        seccomp_nr=277,
        socket_nr=198,
    ),
}
_X32_BIT = 0x40000000

_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000


def machine() -> str:
    """The machine DAL runs on, as platform.machine() says it (without importing platform)."""
    return os.uname().machine


def available() -> bool:
    """Whether this build has a filter for the machine's system call ABI (x86_64 and aarch64)."""
    return machine() in ABIS


def missing() -> str | None:
    """What a receipt says when programs run without the filter here; None when they run with it."""
    if available():
        return None
    return (f"no set-user-ID filter on this machine ({machine()}: DAL's seccomp filter exists for "
            f"{' and '.join(ABIS)} only), so a program may leave a set-user-ID file in a write root")


def _assemble(abi: _Abi, network: bool = True) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; jumps are relative to the next instruction. Without
    `network`, socket(AF_UNIX) is refused too."""
    deny = ("ret", _ERRNO | errno.EPERM)
    nosys = ("ret", _ERRNO | errno.ENOSYS)
    allow = ("ret", _ALLOW)
    body: list[tuple] = [("ld", 4), ("jeq", abi.arch, None, "deny"), ("ld", 0)]  # another ABI: refused
    if abi.x32:
        body.append(("jge", _X32_BIT, "deny", None))
    for nr in abi.nosys.values():
        body.append(("jeq", nr, "nosys", None))
    for name, (nr, _) in abi.mode_arg.items():
        body.append(("jeq", nr, f"mode:{name}", None))
    if not network:
        body.append(("jeq", abi.socket_nr, "socket", None))
    body.append(allow)
    if not network:  # the domain is the first argument's low 32 bits
        body += [("label", "socket"), ("ld", 16), ("jeq", _AF_UNIX, "eacces", None), allow,
                 ("label", "eacces"), ("ret", _ERRNO | errno.EACCES)]
    for name, (_, arg) in abi.mode_arg.items():
        # the low 32 bits of the mode argument (little-endian); BPF jumps only forward, so each block returns
        body += [("label", f"mode:{name}"), ("ld", 16 + 8 * arg), ("jset", _SUID_SGID, "deny", None), allow]
    body += [("label", "deny"), deny, ("label", "nosys"), nosys]
    # Resolve labels to instruction indexes.
    where: dict[str, int] = {}
    n = 0
    for op in body:
        if op[0] == "label":
            where[op[1]] = n
        else:
            n += 1
    out: list[tuple[int, int, int, int]] = []
    for op in body:
        if op[0] == "label":
            continue
        i = len(out)

        def rel(target: str | None, i: int = i) -> int:
            if target is None:
                return 0
            off = where[target] - i - 1
            assert 0 <= off < 256, "seccomp jump out of range"
            return off

        kind = op[0]
        if kind == "ld":
            out.append((_LD_ABS_W, 0, 0, op[1]))
        elif kind == "ret":
            out.append((_RET, 0, 0, op[1]))
        else:
            code = {"jeq": _JEQ, "jge": _JGE, "jset": _JSET}[kind]
            out.append((code, rel(op[2]), rel(op[3]), op[1]))
    return out


@functools.lru_cache(maxsize=8)
def program(for_machine: str | None = None, network: bool = True) -> bytes:
    """The compiled filter for `for_machine` (this one by default): struct sock_filter[] as bubblewrap's
    --seccomp reads it, in this machine's byte order (both ABIs here are little-endian). Without `network`
    it refuses socket(AF_UNIX) too."""
    return b"".join(struct.pack("<HBBI", *ins) for ins in _assemble(ABIS[for_machine or machine()], network))


_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1


def install(network: bool = True) -> Callable[[], None]:
    """A function for preexec_fn that installs the filter in the child (no_new_privs first, as the kernel
    requires of an unprivileged process); everything it needs is made here, before the fork."""
    import ctypes  # only for programs started without the wall

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    code = program(None, network)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    prctl, syscall = libc.prctl, libc.syscall
    ref = ctypes.byref(prog)
    nr = ABIS[machine()].seccomp_nr

    def setup() -> None:
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or syscall(nr, _SECCOMP_SET_MODE_FILTER, 0, ref) != 0:
            raise OSError(ctypes.get_errno(), "cannot install the seccomp filter")

    setup.keep = (buf, prog)  # type: ignore[attr-defined]  # alive as long as the function
    return setup
