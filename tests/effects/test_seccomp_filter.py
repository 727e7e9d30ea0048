"""The seccomp filter's bytes, decoded and run by a small classic-BPF interpreter against a table of system
calls and verdicts, for each ABI it is built for (x86_64 runs for real in test_setuid.py; aarch64 cannot run
on this machine, so its bytes are what is checked). Numbers: the kernel's syscall_64.tbl and
include/uapi/asm-generic/unistd.h."""

from __future__ import annotations

import errno
import struct

import pytest

from dal.effects.exec.running import wall_in_force
from dal.effects.wall import seccomp

ALLOW, EPERM, ENOSYS, EACCES = "allow", "EPERM", "ENOSYS", "EACCES"
ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
OTHER_ARCHES = {"x86_64": (0x40000003, 0xC00000B7), "aarch64": (0x40000028, 0xC000003E)}  # i386 / ARM, the other


def run_filter(code: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> str:
    """Run the filter on one seccomp_data {nr, arch, ip, args[6]} (little-endian) and name its verdict."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    prog = [struct.unpack("<HBBI", code[i:i + 8]) for i in range(0, len(code), 8)]
    acc, pc = 0, 0
    for _ in range(len(prog) + 1):  # forward jumps only: each instruction runs at most once
        op, jt, jf, k = prog[pc]
        if op == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif op in (0x15, 0x35, 0x45):  # JEQ, JGE, JSET (BPF_K)
            hit = acc == k if op == 0x15 else acc >= k if op == 0x35 else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        elif op == 0x06:  # BPF_RET | BPF_K
            if k == 0x7FFF0000:
                return ALLOW
            assert k & 0xFFFF0000 == 0x00050000, hex(k)
            return {errno.EPERM: EPERM, errno.ENOSYS: ENOSYS, errno.EACCES: EACCES}[k & 0xFFFF]
        else:
            raise AssertionError(f"unexpected BPF instruction {op:#x}")
    raise AssertionError("the filter ran past its end")


S_ISUID, S_ISGID = 0o4000, 0o2000
# (name, number, index of the mode argument or None)
AARCH64 = [("mknodat", 33, 2), ("fchmod", 52, 1), ("fchmodat", 53, 2), ("openat", 56, 3), ("fchmodat2", 452, 2)]
X86_64 = [("chmod", 90, 1), ("fchmod", 91, 1), ("fchmodat", 268, 2), ("fchmodat2", 452, 2), ("open", 2, 2),
          ("openat", 257, 3), ("creat", 85, 1), ("mknod", 133, 1), ("mknodat", 259, 2)]
OTHERS = {"aarch64": [("read", 63), ("write", 64), ("close", 57), ("execve", 221), ("mkdirat", 34), ("fchownat", 54),
                      ("setuid", 146), ("clone", 220), ("seccomp", 277)],
          "x86_64": [("read", 0), ("write", 1), ("close", 3), ("execve", 59), ("mkdir", 83), ("setuid", 105)]}


@pytest.mark.parametrize(("machine", "calls"), [("aarch64", AARCH64), ("x86_64", X86_64)])
def test_the_filter_refuses_setuid_modes_and_nothing_else(machine: str, calls: list) -> None:
    code = seccomp.program(machine)
    arch = ARCH[machine]
    for name, nr, arg in calls:
        for mode, verdict in ((0o755, ALLOW), (0o644, ALLOW), (0o1777, ALLOW), (0o4755, EPERM), (0o2755, EPERM),
                              (0o6755, EPERM), (S_ISUID, EPERM), (S_ISGID | 0o100000, EPERM)):  # fmt: skip
            args = [0] * 6
            args[arg] = mode
            assert run_filter(code, nr, arch, tuple(args)) == verdict, (machine, name, oct(mode))
        # only the low 32 bits of the mode argument count (mode_t); other arguments never do
        args = [S_ISUID] * 6
        args[arg] = 0o755 | (S_ISUID << 32)
        assert run_filter(code, nr, arch, tuple(args)) == ALLOW, (machine, name)
    for name, nr in OTHERS[machine]:
        assert run_filter(code, nr, arch, (S_ISUID,) * 6) == ALLOW, (machine, name)
    for name, nr in (("openat2", 437), ("io_uring_setup", 425)):
        assert run_filter(code, nr, arch) == ENOSYS, (machine, name)
    for other in OTHER_ARCHES[machine]:  # another ABI (i386, AArch32, or the other 64-bit one): refused
        assert run_filter(code, 63, other) == EPERM and run_filter(code, 0, other) == EPERM


def test_x32_numbers_are_refused_on_x86_64_only() -> None:
    assert run_filter(seccomp.program("x86_64"), 0x40000000 + 90, ARCH["x86_64"], (0o4755,) * 6) == EPERM
    assert run_filter(seccomp.program("x86_64"), 0x40000000 + 1, ARCH["x86_64"]) == EPERM
    assert run_filter(seccomp.program("aarch64"), 0x40000000 + 1, ARCH["aarch64"]) == ALLOW  # no such ABI there


def test_the_aarch64_table_holds_the_generic_numbers() -> None:
    abi = seccomp.ABIS["aarch64"]
    assert abi.arch == 183 | 0x80000000 | 0x40000000  # EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
    assert abi.seccomp_nr == 277 and not abi.x32
    assert {n for n in abi.mode_arg} == {"fchmod", "fchmodat", "fchmodat2", "openat", "mknodat"}


def test_another_machine_runs_without_the_filter_and_the_receipt_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from dal.effects import EffectContext, Policy
    from dal.receipts.render import wall_text

    monkeypatch.setattr(seccomp, "machine", lambda: "riscv64")
    assert not seccomp.available()
    note = seccomp.missing()
    assert note is not None and "riscv64" in note and "x86_64 and aarch64" in note
    how = wall_in_force(EffectContext(policy=Policy.load("/var/tmp"), use_sandbox=False))
    assert how["reason"].endswith(note)
    line = wall_text({"sandbox": {"wall": "bubblewrap", "reason": f"bubblewrap at /usr/bin/bwrap; {note}",
                                  "refused": False}})  # fmt: skip
    assert line is not None and "riscv64" in line
    monkeypatch.setattr(seccomp, "machine", lambda: "x86_64")
    assert seccomp.missing() is None


@pytest.mark.parametrize(("machine", "socket_nr", "socketpair_nr"), [("aarch64", 198, 199), ("x86_64", 41, 53)])
def test_with_the_network_off_no_unix_socket_is_made_but_a_pair(machine: str, socket_nr: int,
                                                                 socketpair_nr: int) -> None:
    off, on, arch = seccomp.program(machine, network=False), seccomp.program(machine), ARCH[machine]
    af_unix, af_inet, af_netlink = 1, 2, 16
    assert run_filter(off, socket_nr, arch, (af_unix, 1, 0)) == EACCES
    assert run_filter(off, socket_nr, arch, ((1 << 32) | af_unix, 1, 0)) == EACCES  # the high half is ignored
    assert run_filter(off, socket_nr, arch, (af_inet, 1, 0)) == run_filter(off, socket_nr, arch, (af_netlink,)) == ALLOW
    assert run_filter(off, socketpair_nr, arch, (af_unix, 1, 0)) == ALLOW
    assert run_filter(on, socket_nr, arch, (af_unix, 1, 0)) == ALLOW
    assert run_filter(off, 90 if machine == "x86_64" else 53, arch, (0, 0o4755, 0o4755)) == EPERM  # still there
