"""Which process a pid names: enough to tell a live run from a dead one whose pid was reused.

A pid alone is not an identity: once a process dies the kernel hands its number to the next one. On
Linux a process is named uniquely by its pid, its start time (clock ticks since boot, field 22 of
/proc/PID/stat) and the boot it belongs to (/proc/sys/kernel/random/boot_id). Where /proc is missing
every function falls back to what a pid alone can say.
"""

from __future__ import annotations

import os
from typing import Any

_BOOT_ID: list[str | None] = []  # read once per process


def boot_id() -> str | None:
    """The id of the current boot, or None where the system does not say."""
    if not _BOOT_ID:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
                _BOOT_ID.append(f.read().strip() or None)
        except (OSError, ValueError):
            _BOOT_ID.append(None)
    return _BOOT_ID[0]


def start_time(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot; None when there is no such process or the
    system does not say."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
    except (OSError, ValueError):
        return None
    # Field 2 is the command name in parentheses and may itself hold spaces or ')': split after the last.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 overall: fields 3.. start at index 0 here
    except (IndexError, ValueError):
        return None


def identity(pid: int) -> tuple[int | None, str | None]:
    """(start time, boot id) of process `pid`, to store next to the pid."""
    return start_time(pid), boot_id()


def lock_table() -> list[list[str]] | None:
    """The kernel's table of file locks (/proc/locks), each line split into its fields (`1: FLOCK ADVISORY
    WRITE 4711 08:01:1234 0 EOF`; a waiter's line has `->` as its second field); None where the system does
    not say. The one reader of it: who holds a key's flock (dal/receipts/oplock.py) and who has the SQLite
    store open (dal/receipts/storefile.py) are both read here, never by taking a lock."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            return [line.split() for line in f.read().splitlines()]
    except OSError:
        return None


def lock_ident(st: os.stat_result) -> str:
    """How /proc/locks names the file `st` describes: `MAJOR:MINOR:INODE`, the device numbers in hex."""
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def pid_exists(pid: Any) -> bool:
    """Whether some process has this pid now (any process: see `alive` for the one that was recorded)."""
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
    """Whether process `pid` has exited and only waits for its parent to reap it (state Z, zombie, or X, in
    /proc/PID/stat): it runs nothing, holds no lock and writes no journal, however long its parent lives.
    False when there is no /proc to say."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
    except (OSError, ValueError):
        return False
    return stat[stat.rfind(b")") + 2 :][:1] in (b"Z", b"X")


def alive(pid: Any, started: Any = None, boot: Any = None) -> bool:
    """Whether the process recorded as (`pid`, `started`, `boot`) still runs: a zombie does not (a `dal run`
    killed -9 whose parent never waited for it, attack10 04). Without a recorded start time or boot id (rows
    written before DAL recorded them) this is `pid_exists(pid)` and not a zombie."""
    if not pid_exists(pid) or exited(pid):
        return False
    if isinstance(boot, str) and boot:
        now = boot_id()
        if now is not None and now != boot:
            return False  # recorded in an earlier boot: every process of that boot is gone
    if isinstance(started, int) and not isinstance(started, bool):
        now_started = start_time(pid)
        if now_started is not None and now_started != started:
            return False  # the pid was reused by a process that started later
    return True


# --- where a process runs: a pid and start time name a process only in their own pid namespace ------------

# The inode of the initial pid namespace (the kernel's PROC_PID_INIT_INO): every process of the machine is
# visible from it.
INITIAL_PID_NAMESPACE = 0xEFFFFFFC
_PLACE: list[dict[str, Any]] = []  # read once per process


def _small(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip() or None
    except (OSError, ValueError):
        return None


def pid_namespace(pid: int | str = "self") -> int | None:
    """The inode of process `pid`'s pid namespace (/proc/PID/ns/pid); None when it cannot be read."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except (OSError, ValueError):
        return None


def place() -> dict[str, Any]:
    """Where this process runs, recorded next to its pid and start time: the boot's id, the pid namespace,
    the host's name and machine id (None for what the system does not say)."""
    if not _PLACE:
        _PLACE.append({"boot": boot_id(), "pidns": pid_namespace(), "host": os.uname().nodename,
                       "machine": _small("/etc/machine-id")})
    return dict(_PLACE[0])


def elsewhere(where: Any) -> str | None:
    """How a process recorded as running `where` (a place() as it was) is not here: "host" (another host,
    or a boot of this one DAL cannot tell from another host's), "boot" (an earlier boot of this very host),
    "pidns" (another pid namespace of this boot); None when it ran here."""
    me = place()
    if not isinstance(where, dict):
        return None
    if where.get("boot") != me["boot"] or me["boot"] is None:
        same = (me["machine"] is not None and where.get("machine") == me["machine"]
                and where.get("host") == me["host"])
        return "boot" if same and me["boot"] is not None else "host"
    if where.get("pidns") != me["pidns"] or me["pidns"] is None:
        return "pidns"
    return None


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


def alive_in(pid: Any, started: Any, where: Any) -> bool | None:
    """Whether the process recorded as (`pid`, `started`) running `where` (a place(); None for what an older
    DAL recorded: `alive(pid, started)` here) still runs: True, False, or None when this process cannot tell.

    In this pid namespace of this boot: its pid and start time. On another boot or host: None, even with this
    host's name and machine id (a clone of this machine's image, a container with a baked-in machine id, is
    not this host's earlier boot, and a process judged gone there would be run again). In
    another pid namespace of this boot (a container's DAL): its pid there means nothing here, so the
    namespace's processes are looked for in /proc by their namespace and their pid inside it; that proves
    the process gone only when this process sees every process of the machine (the initial pid namespace,
    a /proc that hides none, every namespace readable). On another host: None."""
    if where is None:
        return alive(pid, started)
    how = elsewhere(where)
    if how is None:
        return alive(pid, started, where.get("boot"))
    if how in ("host", "boot") or not isinstance(pid, int) or not isinstance(where.get("pidns"), int):
        return None
    return _alive_in_namespace(pid, started, where["pidns"])


def _alive_in_namespace(pid: int, started: Any, pidns: int) -> bool | None:
    seen_ns = unreadable = False
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
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
        if (pids and pids[-1] == pid and (not isinstance(started, int) or start_time(int(name)) == started)
                and not exited(int(name))):
            return True
    if seen_ns:
        return None if unreadable else False  # the namespace lives on; the process in it is gone
    everything = pid_namespace() == INITIAL_PID_NAMESPACE and not _proc_hides_pids() and not unreadable
    return False if everything else None  # seen from the initial namespace, a namespace not there is gone


def holder_identity() -> dict[str, Any]:
    """What a lock's holder records of itself beside its pid: its start time and where it runs (place())."""
    return {"start": start_time(os.getpid()), "where": place()}
