"""Resource limits of one command: rlimits on every process it starts, and a pids and memory cgroup of its
own where DAL can make one (docs/policy.md, "Limits").

The rlimits are in place before the program runs: inside the wall they are set on bubblewrap's init
process while it waits on its --block-fd, and every process of the sandbox descends from it; without the
wall, in the child between fork and exec. RLIMIT_NPROC does not bind root, even in a user namespace, so a
command's processes are bounded by a pids cgroup where DAL can create one (cgroup v1 as root, or a
cgroup v2 subtree delegated to DAL's user), by RLIMIT_NPROC otherwise.
"""

from __future__ import annotations

import atexit
import functools
import math
import os
import resource
import signal
import time
from collections.abc import Callable

from dal.core import liveness
from dal.core.records import FrozenRecord
from dal.core.sizes import format_size as format_bytes
from dal.effects.policy import Policy
from dal.effects.wall import owners

__all__ = ["CommandLimits", "Cgroup", "describe_signal_limit", "die_with_parent", "format_bytes", "sweep_orphans"]


class CommandLimits(FrozenRecord):
    """The limits of one command, from the policy's `[limits]` and the command's timeout."""

    __slots__ = ("processes", "file_size", "memory", "tmp_size", "cpu_seconds")

    def __init__(self, processes: int, file_size: int, memory: int, tmp_size: int, cpu_seconds: int) -> None:
        init = object.__setattr__
        init(self, "processes", processes)
        init(self, "file_size", file_size)
        init(self, "memory", memory)
        init(self, "tmp_size", tmp_size)
        init(self, "cpu_seconds", cpu_seconds)

    @classmethod
    def of(cls, policy: Policy, timeout: float) -> CommandLimits:
        return cls(
            processes=policy.limit("max_processes"),
            file_size=policy.limit("max_file_size"),
            memory=policy.limit("max_memory"),
            tmp_size=policy.limit("tmp_size"),
            # CPU seconds of each process: a busy loop ends with SIGXCPU even if the timeout's kill is late.
            cpu_seconds=max(1, math.ceil(timeout)) + 1,
        )

    def rlimits(self, with_nproc: bool) -> list[tuple[int, int]]:
        """(resource, value) pairs, soft and hard alike. RLIMIT_NPROC only when no pids cgroup bounds the
        command, and not for root: it counts every process of the user on the machine, not just the
        command's, and root has too many for any bound of a command to leave it a fork."""
        out = [
            (resource.RLIMIT_FSIZE, self.file_size),
            (resource.RLIMIT_AS, self.memory),
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_CORE, 0),  # a program killed by a limit leaves no core file in the workspace
        ]
        if with_nproc and os.geteuid() != 0:
            out.append((resource.RLIMIT_NPROC, self.processes))
        return out

    def apply(self, pid: int, with_nproc: bool) -> None:
        """Set the rlimits on the running process `pid` (bubblewrap's init, still held on its block fd)."""
        for res, value in self.rlimits(with_nproc):
            try:
                resource.prlimit(pid, res, (value, value))
            except ValueError:  # above the current hard limit: keep the lower one already there
                pass
            except ProcessLookupError:
                return  # bubblewrap gave up already; its exit status says why

    def preexec(self, cgroup: Cgroup | None) -> Callable[[], None]:
        """The child-side setup for a program started without the wall: die with DAL, join the cgroup, set
        the rlimits."""
        pairs = self.rlimits(cgroup is None or not cgroup.bounds_processes)
        join = cgroup.joiner() if cgroup is not None else die_with_parent()

        def setup() -> None:
            join()
            for res, value in pairs:
                soft, hard = resource.getrlimit(res)
                if hard == resource.RLIM_INFINITY or value <= hard:
                    resource.setrlimit(res, (value, value))

        return setup


# Signals a kernel limit sends: the process dies of it (exit 128 + N through bubblewrap or a shell).
_SIGNAL_LIMITS = {
    signal.SIGXFSZ: ("file_size", "max_file_size"),
    signal.SIGXCPU: ("cpu", None),
}


def describe_signal_limit(code: int | None, limits: CommandLimits) -> str | None:
    """The limit a stage's exit status shows it was killed by (SIGXFSZ, SIGXCPU), or None."""
    if code is None:
        return None
    signo = -code if code < 0 else code - 128 if code > 128 else 0
    if signo == signal.SIGXFSZ:
        return f"a file reached the file size limit, {format_bytes(limits.file_size)} ([limits] max_file_size)"
    if signo == signal.SIGXCPU:
        return f"a process used its {limits.cpu_seconds} s of CPU time (the timeout plus 1 s)"
    return None


# --- cgroups ----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _own_cgroups() -> dict[str, str]:
    """Where DAL's own cgroup is, as directories: {"pids": dir, "memory": dir} for cgroup v1 controllers,
    {"v2": dir} for the unified hierarchy. Empty when nothing can be found."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        with open("/proc/self/mountinfo") as f:
            mounts = f.read().splitlines()
    except OSError:
        return {}
    paths: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            paths["v2"] = path
        for c in controllers.split(","):
            if c in ("pids", "memory"):
                paths[c] = path
    found: dict[str, str] = {}
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        root, point, fstype, options = fields[3], fields[4], rfields[0], rfields[2].split(",")
        keys = ["v2"] if fstype == "cgroup2" else [c for c in ("pids", "memory") if c in options] if (
            fstype == "cgroup") else []
        for key in keys:
            path = paths.get(key)
            if path is None or key in found:
                continue
            if path != root and not path.startswith(root.rstrip("/") + "/"):
                continue  # our cgroup is not below this mount's root
            rel = path[len(root):].lstrip("/") if root != "/" else path.lstrip("/")
            found[key] = os.path.join(point, rel) if rel else point
    return found


_unavailable: set[str] = set()  # controllers that failed once in this process: not tried again
_leftover: list[str] = []  # cgroup directories that could not be removed yet
_counter = 0


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _count(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


class Cgroup:
    """The cgroup(s) of one command: pids.max bounds its processes, the memory limit all its memory (its
    /tmp files included). Made by create(), which returns None where DAL cannot make one."""

    def __init__(self, dirs: dict[str, str], limits: CommandLimits) -> None:
        self.dirs = dirs  # "pids" / "memory" (v1) or "v2" -> directory
        self.limits = limits

    @property
    def bounds_processes(self) -> bool:
        return "pids" in self.dirs or "v2" in self.dirs

    @property
    def bounds_memory(self) -> bool:
        return "memory" in self.dirs or "v2" in self.dirs

    @classmethod
    def create(cls, limits: CommandLimits) -> Cgroup | None:
        global _counter
        owners.register()  # before the first cgroup: a kill -9 leaves it for the next start to sweep
        _retry_leftovers()
        own = _own_cgroups()
        _counter += 1
        # whose: sweep_orphans (the pid namespace too: a DAL in a container sharing this cgroup tree has pids
        # that mean nothing in ours)
        name = f"dal-{os.getpid()}-{_counter}-{_own_start(os.getpid())}-{owners.pid_namespace()}"
        dirs: dict[str, str] = {}
        settings = {
            "v2": [("pids.max", limits.processes), ("memory.max", limits.memory), ("memory.swap.max", 0)],
            "pids": [("pids.max", limits.processes)],
            "memory": [("memory.limit_in_bytes", limits.memory), ("memory.memsw.limit_in_bytes", limits.memory)],
        }
        keys = ["v2"] if "v2" in own and not ({"pids", "memory"} & own.keys()) else ["pids", "memory"]
        for key in keys:
            if key not in own or key in _unavailable:
                continue
            path = os.path.join(own[key], name)
            try:
                os.mkdir(path, 0o755)
            except OSError:
                _unavailable.add(key)
                continue
            try:
                for i, (file, value) in enumerate(settings[key]):
                    target = os.path.join(path, file)
                    if i > 0 and not os.path.exists(target):
                        continue  # the optional ones (swap accounting off)
                    _write(target, str(value))
            except OSError:
                _unavailable.add(key)  # e.g. a v2 cgroup whose controllers are not delegated to us
                _kill_all(path, 0.1)
                continue
            dirs[key] = path
        return cls(dirs, limits) if dirs else None

    def procs_files(self) -> tuple[str, ...]:
        return tuple(os.path.join(d, "cgroup.procs") for d in self.dirs.values())

    def joiner(self) -> Callable[[], None]:
        """For preexec_fn: die with DAL (die_with_parent), then join the command's cgroup(s), before exec.
        bubblewrap itself is started this way, so that every process of the wall, its own included, is in
        the cgroup from its birth: a DAL killed at any instant leaves nothing the next sweep cannot find."""
        # cgroup v1: "0" written to `tasks` moves the writing thread, which in the forked child is the whole
        # process, and takes no RCU grace period; "0" to cgroup.procs (v2 has nothing else) takes the kernel's
        # cgroup_threadgroup_rwsem for writing, which waits for one (5 to 15 ms when no other move on the
        # machine just paid one) before every command (docs/performance.md, "Jobs through the queue").
        procs = self.join_files()
        die = die_with_parent()

        def setup() -> None:
            die()
            for path in procs:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, b"0")  # "0" is the writing process
                finally:
                    os.close(fd)

        return setup

    def join_files(self) -> tuple[str, ...]:
        """The files a process joins the command's cgroup(s) through by writing "0" to them itself: v1's `tasks`
        (the writing thread, all of a single-threaded process, moves without an RCU grace period; see joiner),
        else v2's cgroup.procs."""
        return tuple(os.path.join(d, "cgroup.procs" if key == "v2" else "tasks") for key, d in self.dirs.items())

    def holds(self, pid: int) -> bool:
        """Whether process `pid` is in every one of the command's cgroups."""
        return all(str(pid) in _read(os.path.join(d, "cgroup.procs")).split() for d in self.dirs.values())

    def add(self, pid: int) -> None:
        """Move `pid` (with its threads) into the command's cgroup(s); its children are born there."""
        for path in self.procs_files():
            try:
                _write(path, str(pid))
            except ProcessLookupError:
                return
            except OSError:
                pass  # this controller does not take it: the rlimits still hold

    def hits(self) -> list[str]:
        """The limits the command ran into, as sentences."""
        out = []
        d = self.dirs.get("pids") or self.dirs.get("v2")
        if d and _count(_read(os.path.join(d, "pids.events")), "max"):
            out.append(f"the process limit, {self.limits.processes} at a time ([limits] max_processes), refused "
                       "new processes")
        mem_events = (os.path.join(self.dirs["v2"], "memory.events") if "v2" in self.dirs
                      else os.path.join(self.dirs["memory"], "memory.oom_control") if "memory" in self.dirs
                      else None)
        if mem_events and _count(_read(mem_events), "oom_kill"):
            out.append(f"the memory limit, {format_bytes(self.limits.memory)} ([limits] max_memory), killed a "
                       "process")
        return out

    def close(self) -> None:
        """Kill whatever is left in the cgroup and remove it, or, while its last processes are still being
        reaped, remove it at the next command (or when DAL exits): no waiting after a command that ended."""
        for path in self.dirs.values():
            _kill_listed(path)
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                _leftover.append(path)
        self.dirs = {}


def _kill_listed(path: str) -> bool:
    """SIGKILL every process listed in the cgroup; whether there was any."""
    pids = [int(p) for p in _read(os.path.join(path, "cgroup.procs")).split() if p.isdigit()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return bool(pids)


def _kill_all(path: str, patience: float) -> bool:
    """Kill everything in the cgroup and remove it, waiting at most `patience` seconds; whether it is gone."""
    kill = os.path.join(path, "cgroup.kill")
    if os.path.exists(kill):
        try:
            _write(kill, "1")
        except OSError:
            pass
    deadline = time.monotonic() + patience
    while True:
        _kill_listed(path)  # a process may fork while we kill; pids.max bounds how long that goes on
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)


def _retry_leftovers(patience: float = 0.0) -> None:
    """Remove the cgroups of earlier commands that were not empty yet, and (once per process) those a DAL
    process that died (kill -9) left behind."""
    global _swept
    if not _swept:
        _swept = True
        _leftover.extend(p for p in _orphans() if p not in _leftover)
    for path in list(_leftover):
        if _kill_all(path, patience):
            _leftover.remove(path)


def sweep_orphans(patience: float = 0.2) -> int:
    """Kill every process left in the cgroup of a command whose DAL process is gone (killed -9 while it ran:
    a bubblewrap waiting for its parent's go-ahead, the stages behind it waiting for end of file), and
    remove those cgroups; the number of cgroups it found. Called when a run starts (dal.effects.guard.recover)."""
    found = [p for p in _orphans() if p not in _leftover]
    _leftover.extend(found)
    _retry_leftovers(patience)
    return len(found)


def _orphans() -> list[str]:
    """The command cgroups (`dal-PID-N-START-PIDNS`; `dal-PID-N-START`, `dal-PID-N` of an older DAL) whose
    owner is provably gone (dal.core.liveness.verdict). Those of a DAL whose liveness cannot be told from here
    (another pid namespace this process cannot see into) are left alone, said once per process."""
    out = []
    foreign = []
    for base in _own_cgroups().values():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if len(parts) not in (3, 4, 5) or parts[0] != "dal" or not all(x.isdigit() for x in parts[1:]):
                continue
            pid, start = int(parts[1]), int(parts[3]) if len(parts) >= 4 else None
            judged = liveness.verdict(pid, start, {"pidns": int(parts[4]) or None} if len(parts) == 5 else None)
            if judged == "unknown":
                foreign.append(name)
            elif judged == "gone":
                out.append(os.path.join(base, name))
    if foreign and not _said_foreign:
        _said_foreign.append(True)
        import sys

        sys.stderr.write(f"dal: note: left alone {len(foreign)} command cgroup(s) of DAL processes in another pid "
                         f"namespace ({', '.join(sorted(foreign)[:3])}): whether they still run cannot be told "
                         "from here\n")
    return out


_said_foreign: list[bool] = []


@functools.lru_cache(maxsize=4)
def _own_start(pid: int) -> int:
    return owners.start_time(pid)


_PR_SET_PDEATHSIG = 1


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int]:
    import ctypes  # only when DAL starts a program

    return ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent() -> Callable[[], None]:
    """For preexec_fn: the child is killed when DAL dies (PR_SET_PDEATHSIG, SIGKILL; it survives the exec of
    bubblewrap, which is not set-user-ID), and exits at once if DAL died before that was set. bubblewrap's own
    --die-with-parent takes effect only after it has cloned the sandbox's init: a DAL killed in between left
    a bubblewrap running, and its init waiting for ever."""
    prctl = _prctl()
    parent = os.getpid()

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(137)

    return setup


_swept = False
atexit.register(_retry_leftovers, 0.5)
