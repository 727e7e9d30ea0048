"""One key, one runner: an exclusive lock per operation key, the SQLite store's operation lock
(`Store.operation_lock`): flock files in `<store dir>/locks`.

`flock` locks belong to the open file description: the kernel releases them when the holder exits,
however it exits (kill -9 included), so a dead holder never blocks the key and its run becomes resumable.
Each KeyLock opens the file itself, so two threads of one process exclude each other as two processes do.

A run without a key holds the lock `run:<its run id>` for its whole life instead, the lock `dal resume RUN`
takes before it continues that run: a resume from anywhere that shares the store's folder (another pid
namespace: a container, a sidecar) meets the live run's lock, never only its pid. Those files
are one per run, so their holder removes its file before it lets go; a taker checks that the file it locked
is still the one at the path. `live_here` tells a resume in the same process (a host running scripts in
threads) that the run it names is still executing in another thread.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from dal.core.digest import sha256
from dal.core.liveness import elsewhere, holder_identity

# What KeyBusy's message tells the person at the command line; a front end without a --wait flag (dal mcp)
# replaces it with its own.
WAIT_HINT = "; wait for it with --wait SECONDS, or inspect it with `dal receipts`"


class KeyBusy(Exception):
    def __init__(self, key: str, holder: dict[str, Any]) -> None:
        pid = holder.get("pid", "?")
        run = holder.get("run_id")
        host = holder.get("host")  # the PostgreSQL store's lock names the holder's machine too
        # A pid is a number of its own pid namespace: say so when the holder's is not this one's (a container's).
        where = holder.get("where")
        inner = (f" of another pid namespace of this machine (pid namespace {where.get('pidns')})"
                 if isinstance(where, dict) and elsewhere(where) == "pidns" else "")
        super().__init__(
            f"operation {key!r} is being run by process {pid}{inner}" + (f" on {host}" if host else "")
            + (f" (run {run})" if run else "")
            + WAIT_HINT
        )
        self.key = key
        self.holder = holder


def lock_path(folder: Path, key: str) -> Path:
    return folder / f"{sha256(key.encode('utf-8')).hexdigest()[:24]}.lock"


def held_by(folder: Path, key: str) -> dict[str, Any] | None:
    """Who holds `key`'s lock now (the holder's pid, run_id), or None when no process does. Asked of the kernel's
    lock table (/proc/locks), never by taking the lock, which would make a starting holder fail as busy."""
    from dal.core.procinfo import lock_ident, lock_table

    path = lock_path(folder, key)
    try:
        where = lock_ident(os.stat(path))
    except OSError:
        return None
    for fields in lock_table() or []:
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where:
            pid = int(fields[4]) if fields[4].isdigit() else None
            try:
                with open(path, "rb") as f:
                    holder = {**KeyLock.parse_holder(f.read(4096)), "key": key}
            except OSError:
                holder = {"key": key}
            if pid is not None and holder.get("pid") != pid:
                # The file still names the previous holder: the new one has the lock and has not written
                # itself there yet. The kernel's pid is the one that holds it; nothing else of the file is.
                return {"pid": pid, "key": key}
            return holder
    return _probe(path, key) if not _sees_every_lock() else None


# The inode of the machine's first pid namespace (the kernel's PROC_PID_INIT_INO).
_INITIAL_PID_NAMESPACE = 0xEFFFFFFC


def _sees_every_lock() -> bool:
    """Whether this process's /proc/locks lists every process's locks: it lists only those of processes in
    its own pid namespace's view, so a container's lists none of the host's."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino == _INITIAL_PID_NAMESPACE
    except OSError:
        return False


def _probe(path: Path, key: str) -> dict[str, Any] | None:
    """Who holds `key`'s lock, asked of the lock itself: a shared lock is refused while an exclusive one is
    held. Held for an instant when it is granted; a taker meanwhile retries (KeyLock.acquire's _GRACE)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return {**KeyLock._read_holder(fd), "key": key}
    except OSError:
        return None
    finally:
        os.close(fd)  # lets go of the shared lock too
    return None


# How long a taker without --wait retries a busy lock: a reader's _probe holds it for an instant.
_GRACE = 0.1


class KeyLock:
    """The lock of one operation key (or `run:ID` for a run without a key); `acquire` raises KeyBusy."""

    def __init__(self, folder: Path, key: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = lock_path(folder, key)
        self.key = key
        self._fd: int | None = None
        # Only its holder's exit lets go of a flock: no holder ever lost it while living on (contract.py).
        self.lost_holder: dict[str, Any] | None = None
        # A run's own lock (see above): one file per run, removed by its holder as it lets go.
        self.transient = key.startswith("run:")

    def acquire(self, run_id: str, wait: float | None = None) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + max(wait or 0.0, _GRACE)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if self.transient and not self._still_there(fd):
                    # Its holder removed this file as it let go; whoever comes next locks the file now there.
                    os.close(fd)
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                    continue
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = self._read_holder(fd)
                    os.close(fd)
                    raise KeyBusy(self.key, holder) from None
                time.sleep(0.05)
        # Write, then cut to length: a process reading the holder meanwhile never sees an empty file.
        # With its start time and place: a pid alone names no process outside its own pid namespace and boot.
        data = json.dumps({"pid": os.getpid(), "run_id": run_id, "key": self.key, **holder_identity()}).encode()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        self._fd = fd

    def _still_there(self, fd: int) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)

    @staticmethod
    def _read_holder(fd: int) -> dict[str, Any]:
        try:
            return KeyLock.parse_holder(os.pread(fd, 4096, 0))
        except OSError:
            return {}

    @staticmethod
    def parse_holder(data: bytes) -> dict[str, Any]:
        try:
            got = json.loads(data.decode() or "{}")  # a longer stale tail makes this fail: holder unknown
        except ValueError:
            return {}
        return got if isinstance(got, dict) else {}

    def release(self) -> None:
        if self._fd is not None:
            try:
                if self.transient:
                    try:
                        os.unlink(self.path)  # while still held: a taker that locks it next sees it gone
                    except OSError:
                        pass
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None


_LIVE: set[str] = set()
_LIVE_GUARD = threading.Lock()


def mark_live(run_id: str) -> None:
    """`run_id` executes in this process (until unmark_live)."""
    with _LIVE_GUARD:
        _LIVE.add(run_id)


def unmark_live(run_id: str) -> None:
    with _LIVE_GUARD:
        _LIVE.discard(run_id)


def live_here(run_id: str) -> bool:
    """Whether `run_id` is executing in a thread of this process right now."""
    with _LIVE_GUARD:
        return run_id in _LIVE
