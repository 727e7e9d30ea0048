"""The kernel's table of file locks, read without taking a lock: who holds a key's flock and who has the SQLite
store open. Whether a process still runs, and where this one runs, is dal/core/liveness.py's."""

from __future__ import annotations

import os


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
