"""The custody of the run store's files (the SQLite store's data is dal/receipts/store.py's): what they say
before SQLite opens them (a damaged write-ahead log, who holds a lock, whether anyone has the store open, the
seal DAL leaves on a store it closed), whether they can be written (read-only, a full disk), the reserve that
keeps room to record a run's end, and what a damaged store's message says to do.

Nothing here opens the database file itself. A process that closes any descriptor of a file loses every
POSIX lock it holds on that file, so opening and closing `dal.db` next to a live SQLite connection in the
same process would silently drop that connection's locks. Locks are read from /proc/locks instead; the
WAL (on which SQLite holds no locks) is read directly.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from array import array
from pathlib import Path

from dal.receipts.errors import StoreDamaged, StoreError
from dal.receipts.location import STORE_ENV

# Opening for write refuses to start with less free space than this beside the store: a run journals
# before it acts, and a journal entry that cannot be written stops the run.
MIN_FREE_BYTES = 1 << 20
# Room kept for recording how a run ends: a file of this size beside the store (`<store>-reserve`), made
# when the store is opened for writing and freed by the runner when the disk fills, so that the run's
# receipt is still stored (docs/durability.md, "A full disk").
RESERVE_BYTES = 4 << 20

# SQLite's unix VFS (os_unix.c): locks on the -shm file. Every connection holds a read lock on the DMS
# byte while it is open; a writer holds WAL_WRITE_LOCK.
_SHM_WRITE_LOCK = 120
_SHM_DMS = 128
# Locks on the database file itself (rollback journals, exclusive locking mode): PENDING, RESERVED and
# the SHARED range.
_DB_LOCK_FIRST = 0x40000000
_DB_LOCK_LAST = 0x40000000 + 1 + 1 + 510

_WAL_MAGIC = (0x377F0682, 0x377F0683)
_WAL_HEADER = 32
_FRAME_HEADER = 24


def wal_path(path: Path) -> Path:
    return Path(str(path) + "-wal")


def shm_path(path: Path) -> Path:
    return Path(str(path) + "-shm")


def seal_path(path: Path) -> Path:
    return Path(str(path) + "-seal")


# -- locks -------------------------------------------------------------------------------------------


def _read_locks() -> list[list[str]] | None:
    from dal.core.procinfo import lock_table

    return lock_table()


def _locks_on(path: Path, table: list[list[str]] | None = None) -> list[tuple[int, str, int, int]] | None:
    """(pid, READ|WRITE, first byte, last byte) of every POSIX or OFD lock on `path`; None when the system
    cannot say (no /proc/locks). `table` is a /proc/locks already read."""
    from dal.core.procinfo import lock_ident

    try:
        ident = lock_ident(path.stat())
    except OSError:
        return []
    rows = _read_locks() if table is None else table
    if rows is None:
        return None
    found = []
    for parts in rows:
        if len(parts) < 8 or parts[1] == "->" or parts[1] not in ("POSIX", "OFDLCK"):
            continue  # a waiter ("->"), or a flock() lock, which SQLite does not use
        if parts[5] != ident:
            continue
        try:
            pid = int(parts[4])
            first = int(parts[6])
            last = (1 << 63) if parts[7] == "EOF" else int(parts[7])
        except ValueError:
            continue
        found.append((pid, parts[3], first, last))
    return found


# The files (st_dev, st_ino) this process holds open through a connection of its own that has read them
# (a worker's child keeps one open for the whole job: dal.receipts.jobs.connect), with how many.
_held: dict[tuple[int, int], int] = {}


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def hold(path: Path) -> tuple[int, int] | None:
    """Note that a connection of this process that has read the store at `path` is open (it holds the
    -shm file's DMS lock); returns the token for let_go()."""
    ident = _file_id(path)
    if ident is not None:
        _held[ident] = _held.get(ident, 0) + 1
    return ident


def let_go(ident: tuple[int, int] | None) -> None:
    if ident is not None and ident in _held:
        _held[ident] -= 1
        if not _held[ident]:
            del _held[ident]


class Survey:
    """Who has the store open, as far as the system says: `shared` (any SQLite connection, this process's
    included) and `ours` (this process holds a lock on the database or its -shm file). None: cannot say.

    Every connection to a WAL database maps its -shm file, so without one nobody has the store open and
    /proc/locks (whose reading costs up to milliseconds on a busy machine) is not read at all; nor is it
    while this process holds the store open itself (hold()): both answers are then yes."""

    __slots__ = ("shared", "ours")

    def __init__(self, path: Path) -> None:
        if not shm_path(path).exists():
            self.shared: bool | None = False
            self.ours: bool | None = False
            return
        if _held and _file_id(path) in _held:
            self.shared = self.ours = True
            return
        table = _read_locks()
        shm = _locks_on(shm_path(path), table)
        db = _locks_on(path, table)
        if shm is None or db is None:
            self.shared = self.ours = None
            return
        self.shared = any(first <= _SHM_DMS <= last for _, _, first, last in shm)
        self.ours = any(pid == os.getpid() for pid, *_ in shm + db)


def lock_holder(path: Path) -> int | None:
    """The pid of the process that holds the store's write lock, when the system says."""
    for target, first_byte, last_byte in ((shm_path(path), _SHM_WRITE_LOCK, _SHM_WRITE_LOCK),
                                          (path, _DB_LOCK_FIRST, _DB_LOCK_LAST)):
        for pid, kind, first, last in _locks_on(target) or []:
            if kind == "WRITE" and first <= last_byte and last >= first_byte and pid > 0:
                return pid
    return None


def describe_process(pid: int) -> str:
    """`process 1234 (sqlite3 .dal/dal.db)`, or `this process` for our own pid."""
    if pid == os.getpid():
        return f"this process ({pid})"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = []
    if not argv:
        return f"process {pid}"
    cmd = " ".join(argv)
    return f"process {pid} (`{cmd[:77] + '...' if len(cmd) > 80 else cmd}`)"


# -- the database header -----------------------------------------------------------------------------


def header_damage(path: Path) -> str | None:
    """What the 100-byte database header says is wrong (not SQLite, impossible values, fewer bytes than
    the pages it counts), or None. Call it only when this process holds no lock on the file (a Survey's
    `ours` is False): see the module doc."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(100)
    except OSError:
        return None
    if len(head) < 100 or head[:16] != b"SQLite format 3\x00":
        return "it is not an SQLite database (its header is damaged, or it is some other file)"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1) or head[21:24] != b"\x40\x20\x20":
        return "its header is damaged (impossible page size or payload fractions)"
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96]
    try:
        wal_size = wal_path(path).stat().st_size
    except OSError:  # none, or removed this instant by the last connection's checkpoint
        wal_size = 0
    if valid and pages and wal_size == 0 and pages * page_size > size:
        return (f"it is shorter than its header says ({size:,} bytes, but {pages:,} pages of {page_size:,} "
                "bytes): it was truncated")
    return None


# -- the write-ahead log -----------------------------------------------------------------------------


def _checksum(data: bytes, big_endian: bool, s0: int, s1: int) -> tuple[int, int]:
    """SQLite's WAL checksum (wal.c, walChecksumBytes) over `data`, continuing from (s0, s1)."""
    words = array("I")
    if words.itemsize != 4:  # pragma: no cover - every platform DAL runs on has 32-bit unsigned ints
        words = array("L")
    words.frombytes(data)
    if big_endian != (sys.byteorder == "big"):
        words.byteswap()
    it = iter(words)
    for x0, x1 in zip(it, it, strict=False):
        s0 = (s0 + x0 + s1) & 0xFFFFFFFF
        s1 = (s1 + x1 + s0) & 0xFFFFFFFF
    return s0, s1


def wal_damage(path: Path) -> str | None:
    """What is wrong with the store's write-ahead log, or None when it is sound (or absent).

    SQLite replays a WAL up to its first frame whose checksum fails and silently drops the rest. After a
    crash that rest is at most one transaction that never committed; committed frames *after* a bad one
    mean bytes were damaged, and the transactions SQLite would drop were real (an effect's journal
    entry among them). A bad last transaction with nothing valid after it is what a power loss leaves
    and is not reported. Only call this when no connection has the store open: a live writer appends
    to the file as we read it.
    """
    wal = wal_path(path)
    try:
        size = wal.stat().st_size
        if size <= _WAL_HEADER:
            return None
        f = open(wal, "rb")  # noqa: SIM115 - closed below; SQLite holds no locks on the WAL file
    except OSError:
        return None
    with f:
        header = f.read(_WAL_HEADER)
        if len(header) < _WAL_HEADER:
            return None
        magic, version, page_size, _seq, salt1, salt2, c1, c2 = struct.unpack(">8I", header)
        if magic not in _WAL_MAGIC or page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
            return f"its write-ahead log {wal.name} has a damaged header, so SQLite would ignore all of it"
        big = (magic & 1) == 1
        s = _checksum(header[:24], big, 0, 0)
        if s != (c1, c2):
            return f"its write-ahead log {wal.name} has a damaged header, so SQLite would ignore all of it"
        frame = _FRAME_HEADER + page_size
        count = (size - _WAL_HEADER) // frame
        bad = None
        for i in range(count):
            head = f.read(_FRAME_HEADER)
            data = f.read(page_size)
            pgno, _commit, fs1, fs2, fc1, fc2 = struct.unpack(">6I", head)
            if (fs1, fs2) != (salt1, salt2) or pgno == 0:
                return None  # the end of this generation of the log: what follows is older
            s = _checksum(head[:8] + data, big, *s)
            if s != (fc1, fc2):
                bad = i
                break
        if bad is None:
            return None
        # Is anything committed after the bad frame? Check each later frame of this generation against the
        # checksum stored in the frame before it.
        f.seek(_WAL_HEADER + bad * frame)
        prev = struct.unpack(">6I", f.read(_FRAME_HEADER))[4:6]
        f.seek(page_size, os.SEEK_CUR)
        for _ in range(bad + 1, count):
            head = f.read(_FRAME_HEADER)
            data = f.read(page_size)
            if len(data) < page_size:
                break
            pgno, commit, fs1, fs2, fc1, fc2 = struct.unpack(">6I", head)
            ours = (fs1, fs2) == (salt1, salt2) and pgno and commit
            if ours and _checksum(head[:8] + data, big, *prev) == (fc1, fc2):
                return (f"its write-ahead log {wal.name} is damaged at frame {bad + 1} of {count}, and committed "
                        "transactions follow it that SQLite would silently drop")
            prev = (fc1, fc2)
    return None


# -- space -------------------------------------------------------------------------------------------


def free_bytes(folder: Path) -> int | None:
    """Bytes this process may still write under `folder` (root may use the blocks kept for root)."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return None
    blocks = st.f_bfree if hasattr(os, "geteuid") and os.geteuid() == 0 else st.f_bavail
    return blocks * st.f_frsize


# -- the seal ----------------------------------------------------------------------------------------


_SEAL_BYTES = 128


def _fingerprint(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def sealed(path: Path) -> bool:
    """Whether the store is exactly as DAL left it when it last closed it: no WAL, and the file's device,
    inode, size and modification time as the seal records them. A copy, a restore, a truncation or a
    write by another program breaks the seal (a change that keeps all four does not)."""
    if wal_path(path).exists():
        return False
    try:
        recorded = json.loads(seal_path(path).read_bytes()[:_SEAL_BYTES].decode("ascii"))
    except (OSError, ValueError):
        return False
    return recorded == _fingerprint(path)


def seal(path: Path) -> None:
    """Record the store's fingerprint after DAL closed it (only when no WAL is left: no other connection).

    File times move in coarse ticks (a few milliseconds), so a write in the same tick as DAL's last one
    would leave the modification time as it was. The seal therefore first sets the file's modification
    time 1 ns before what it is: any later write, however soon, sets it to the current tick again."""
    if wal_path(path).exists():
        return
    try:
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 1))
    except OSError:
        return  # not ours to touch: no seal, so the next open checks the store
    mark = _fingerprint(path)
    if mark is None:
        return
    # Overwritten in place at a fixed length: no rename and no truncation, either of which makes ext4
    # flush the file (milliseconds at every run's end). A torn seal reads as no seal: one more check.
    record = json.dumps(mark).ljust(_SEAL_BYTES - 1).encode("ascii") + b"\n"
    try:
        fd = os.open(seal_path(path), os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError:
        return
    try:
        os.pwrite(fd, record, 0)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- the reserve: room to record a run's end on a full disk ------------------------------------------------


def reserve_path(path: Path) -> Path:
    return Path(str(path) + "-reserve")


def keep_reserve(store: Path) -> None:
    """Make the reserve file when it is missing (best effort: a disk without the room has none)."""
    path = reserve_path(store)
    if path.exists():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)  # real blocks, not a sparse file
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def free_reserve(store: Path) -> bool:
    """Give the reserve's room back to the filesystem; True when there was one."""
    try:
        os.unlink(reserve_path(store))
        return True
    except OSError:
        return False


# -- files DAL cannot write --------------------------------------------------------------------------------


def refuse_full_disk(path: Path) -> None:
    """StoreError when the disk holding the store has less than MIN_FREE_BYTES free."""
    free = free_bytes(path.parent)
    if free is not None and free < MIN_FREE_BYTES:
        raise StoreError(
            f"the disk holding the run store {path} is full ({free:,} bytes free): DAL journals every "
            "effect before it runs it, so it starts nothing without room to do so. Free some space (or "
            f"use another store with --store PATH); DAL wrote nothing.",
            path,
        )


def refuse_read_only(path: Path) -> None:
    """A store DAL cannot write (the file, or the folder its -wal and -shm files go in) is refused as
    read-only before SQLite tries, and fails, to create those files."""
    wal = wal_path(path)
    here = (path, path.parent) if path.exists() else (path.parent,)
    blocked = [p for p in here if not os.access(p, os.W_OK)]
    if path.parent in blocked and wal.exists() and shm_path(path).exists():
        blocked.remove(path.parent)  # the side files exist already: writing them is enough
    if blocked:
        raise StoreError(
            f"the run store {path} is read-only ({' and '.join(str(p) for p in blocked)} cannot be "
            f"written), so DAL cannot record runs in it. {writable_fix(path)} It can still be read "
            "(dal receipts).",
            path,
        )


def damaged(path: Path, what: str) -> StoreDamaged:
    """The error for a damaged store: what is wrong, that DAL did not write it, and how to recover it."""
    from shlex import quote as q  # only a damaged store pays for the import

    p = Path(path)
    keep = p.parent / f"damaged-{p.name}"
    copy = keep / p.name
    sql = f"{p}.sql"
    steps = (
        f"  To recover it: keep a copy (with its -wal file, if any), let SQLite salvage what it can from the\n"
        f"  copy (.recover, else .dump), build a new store from that, and put it in place:\n"
        f"    mkdir -p {q(str(keep))} && cp -p {q(str(p))}* {q(str(keep))}/\n"
        f"    sqlite3 {q(str(copy))} .recover > {q(sql)} || sqlite3 {q(str(copy))} .dump > {q(sql)}\n"
        f"    sqlite3 {q(str(p))}.recovered < {q(sql)}\n"
        f"    rm -f {q(str(p))} {q(str(p))}-wal {q(str(p))}-shm && mv {q(str(p))}.recovered {q(str(p))}\n"
        f"  or record new runs elsewhere with --store PATH (or {STORE_ENV}=PATH)."
    )
    return StoreDamaged(f"the run store {p} is damaged: {what}. DAL has not written to it.\n{steps}", p)


def writable_fix(path: Path) -> str:
    """What to do about a store DAL cannot write: chmod where that helps; on a file system mounted
    read-only, where it cannot, another store (or remounting)."""
    from dal.core.fsutil import read_only_mount

    if read_only_mount(path):
        return (f"It is on a file system mounted read-only, where chmod changes nothing: choose a store on a "
                f"writable disk with --store PATH or {STORE_ENV}=PATH (or remount {path.parent} read-write).")
    return (f"Make it and its folder writable (chmod u+w {path} {path.parent}), or choose another store with "
            f"--store PATH or {STORE_ENV}=PATH.")
