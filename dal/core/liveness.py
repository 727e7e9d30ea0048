"""Whether the process that owns something still runs, and where this process runs: the one answer.

A pid alone is not an identity: once a process dies the kernel hands its number to the next one, and a pid
means something only in the pid namespace, on the boot of the host, where it was read. So what DAL leaves
behind for a later process to judge (a run's row, a key's lock, a job's holder, a wall's registration, record
or cgroup) names its owner by pid, start time (clock ticks since boot, field 22 of /proc/PID/stat) and place
(`here()`: the boot id, the pid namespace, the host name and machine id), and `verdict` judges it:

- recorded without a place (an older DAL's rows): judged by this namespace's /proc, as it always was;
- in this pid namespace on this boot: "gone" when its pid is free, names a process started later, or names
  a zombie (it runs nothing, holds no lock, writes no journal); else "alive";
- in another pid namespace of this boot (a container's DAL): its pid means nothing here, so that
  namespace's processes are looked for by their namespace and their pid inside it (NSpid); "gone" is
  concluded only where this process sees every process of the machine;
- on another boot, even of a host with this one's name and machine id, or on another host: "unknown". A
  clone of this machine's image (or a container with a baked-in machine id) is not this host's earlier
  boot, and an owner judged gone there would have its work run again or its pipeline's record finished
  while it runs. What an earlier boot left is finished by the operator (docs/policy.md, "Gone means gone
  here").

Callers decide what "unknown" means for them (left alone, shown as not running, never killed); nobody
answers the question again. Where /proc is missing a pid alone says what it can.
"""

from __future__ import annotations

import os
from typing import Any, Literal

Verdict = Literal["alive", "gone", "unknown"]

# The inode of the initial pid namespace (the kernel's PROC_PID_INIT_INO): every process of the machine is
# visible from it.
INITIAL_PID_NAMESPACE = 0xEFFFFFFC

_BOOT_ID: list[str | None] = []  # read once per process (tests set it to play another boot)
_PLACE: list[dict[str, Any]] = []


def _small(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip() or None
    except (OSError, ValueError):
        return None


def boot_id() -> str | None:
    """The id of the current boot, or None where the system does not say."""
    if not _BOOT_ID:
        _BOOT_ID.append(_small("/proc/sys/kernel/random/boot_id"))
    return _BOOT_ID[0]


def machine_id() -> str | None:
    """This machine's id (/etc/machine-id, else D-Bus's copy), or None."""
    return _small("/etc/machine-id") or _small("/var/lib/dbus/machine-id")


def start_time(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot; None when there is no such process or the
    system does not say."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
    except (OSError, ValueError):
        return None
    # Field 2 is the command name in parentheses and may itself hold spaces or ')': split after the last.
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return int(fields[19])  # field 22 overall: fields 3.. start at index 0 here
    except (IndexError, ValueError):
        return None


def pid_namespace(pid: int | str = "self") -> int | None:
    """The inode of process `pid`'s pid namespace (/proc/PID/ns/pid); None when it cannot be read."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except (OSError, ValueError):
        return None


def here() -> dict[str, Any]:
    """Where this process runs, recorded next to its pid and start time: the boot's id, the pid namespace,
    the host's name and machine id (None for what the system does not say)."""
    if not _PLACE:
        _PLACE.append({"boot": boot_id(), "pidns": pid_namespace(), "host": os.uname().nodename,
                       "machine": machine_id()})
    return dict(_PLACE[0])


def host_name() -> str:
    """This machine as a job records it: the host name and the first characters of its machine id (two
    containers may share a name; two machines may share a clone's name)."""
    name = os.uname().nodename
    mid = (machine_id() or "")[:12]
    return f"{name}/{mid}" if mid else name


def identity(pid: int) -> tuple[int | None, str | None]:
    """(start time, boot id) of process `pid`, to store next to the pid."""
    return start_time(pid), boot_id()


def holder_identity() -> dict[str, Any]:
    """What a lock's holder records of itself beside its pid: its start time and where it runs."""
    return {"start": start_time(os.getpid()), "where": here()}


def pid_exists(pid: Any) -> bool:
    """Whether some process has this pid now in this namespace (any process: `verdict` says whether it is
    the one that was recorded)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, it is just not ours to signal
        return True
    except OverflowError:
        return False
    return True


def exited(pid: int) -> bool:
    """Whether process `pid` has exited and only waits for its parent to reap it (state Z or X): it runs
    nothing, holds no lock and writes no journal, however long its parent lives. False without /proc."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
    except (OSError, ValueError):
        return False
    return stat[stat.rfind(b")") + 2:][:1] in (b"Z", b"X")


def elsewhere(where: Any) -> Literal["host", "boot", "pidns"] | None:
    """How an owner recorded as running `where` is not here: "host" (another host, or a boot this process
    cannot tell from another host's), "boot" (another boot of a host with this one's name and machine id),
    "pidns" (another pid namespace of this boot); None when it ran here, or when `where` records none of it
    (an older DAL's: judged here). Fields a record lacks are not compared."""
    if not isinstance(where, dict):
        return None if where is None else "host"
    me = here()
    if "boot" in where and (where["boot"] != me["boot"] or me["boot"] is None):
        same = (me["machine"] is not None and where.get("machine") == me["machine"]
                and where.get("host") == me["host"])
        return "boot" if same and me["boot"] is not None else "host"
    if "pidns" in where and (where["pidns"] != me["pidns"] or me["pidns"] is None):
        return "pidns"
    return None


def verdict(pid: Any, start: Any, where: Any) -> Verdict:
    """Whether the process recorded as (`pid`, `start`) running `where` (a `here()` as it was, or the part of
    one a record kept: {"boot": ...} for a run's row; None for a record that says nothing of where) still
    runs: "alive", "gone", or "unknown" when this process cannot tell (see the module's docstring)."""
    if where is not None and not isinstance(where, dict):
        return "unknown"  # a record that cannot be read says nothing
    how = elsewhere(where)
    if how is None:
        return _here(pid, start)
    if how in ("host", "boot"):
        return "unknown"
    pidns = where.get("pidns") if isinstance(where, dict) else None
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(pidns, int):
        return "unknown"
    return _in_namespace(pid, start, pidns)


def _here(pid: Any, start: Any) -> Verdict:
    if not pid_exists(pid) or exited(pid):
        return "gone"
    if isinstance(start, int) and not isinstance(start, bool):
        now = start_time(pid)
        if now is not None and now != start:
            return "gone"  # the pid was reused by a process that started later
    return "alive"


def describe(where: Any) -> str:
    """Where an owner ran, for a line that says why it was left alone."""
    how = elsewhere(where)
    if not isinstance(where, dict):
        return "somewhere this DAL cannot identify"
    if how == "pidns":
        return f"in another pid namespace of this host (pid namespace {where.get('pidns')})"
    if how == "boot":
        return f"on host {where.get('host')!s}, whose earlier boot this DAL cannot tell from another host's"
    if how == "host":
        return f"on host {where.get('host')!s} (boot {str(where.get('boot'))[:8]})"
    return "on this host"


# --- another pid namespace of this boot ----------------------------------------------------------------


def _ns_pids(pid: int) -> list[int]:
    """Process `pid`'s pids from this /proc's pid namespace to its own (NSpid; world-readable, unlike
    /proc/PID/ns): one number for a process of this namespace. [] when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(n) for n in line.split()[1:]]
    except (OSError, ValueError):
        return []
    return []


def _proc_hides_pids() -> bool:
    """Whether this /proc hides other users' processes (mounted with hidepid)."""
    try:
        with open("/proc/self/mountinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 4 and parts[4] == "/proc":
                    return "hidepid" in line and "hidepid=0" not in line and "hidepid=off" not in line
    except OSError:
        return True
    return False


def _in_namespace(pid: int, start: Any, pidns: int) -> Verdict:
    """The process that is `pid` inside pid namespace `pidns`, looked for among this /proc's processes."""
    seen_ns = unreadable = False
    try:
        names = os.listdir("/proc")
    except OSError:
        return "unknown"
    for name in names:
        if not name.isdigit():
            continue
        ns = pid_namespace(name)
        if ns is None:
            # Not ours to read (pid 1 of a sandbox, another user's): in another namespace only if it has
            # more than one pid; one that ended meanwhile has none.
            unreadable = unreadable or len(_ns_pids(int(name))) > 1
            continue
        if ns != pidns:
            continue
        seen_ns = True
        pids = _ns_pids(int(name))
        if (pids and pids[-1] == pid and (not isinstance(start, int) or start_time(int(name)) == start)
                and not exited(int(name))):
            return "alive"
    if seen_ns:
        return "unknown" if unreadable else "gone"  # the namespace lives on; the process in it is gone
    everything = pid_namespace() == INITIAL_PID_NAMESPACE and not _proc_hides_pids() and not unreadable
    return "gone" if everything else "unknown"  # seen from the initial namespace, a namespace not there is gone
