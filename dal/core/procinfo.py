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


def alive(pid: Any, started: Any = None, boot: Any = None) -> bool:
    """Whether the process recorded as (`pid`, `started`, `boot`) still runs. Without a recorded start
    time or boot id (rows written before DAL recorded them) this is `pid_exists(pid)`."""
    if not pid_exists(pid):
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
