"""The durable run store: one SQLite file, the source of truth for runs, loop receipts, the effect journal
and approvals.

Durability: WAL with `synchronous=FULL` by default, so every commit is on disk before it returns
(set_synchronous("NORMAL") keeps commits safe from kill -9 but not from power loss). The runtime
commits at effect boundaries (journal intent, journal result) and once at the end of a run (the receipt),
so a `kill -9` at any instant leaves a consistent store that has every effect it started.

Errors: every SQLite failure a user can cause or meet (locked, read-only, damaged, newer schema, not a
DAL store, a full disk) becomes a StoreError whose message names the file and what to do. Nothing here
ever deletes or recreates a store file, and a store that fails a check is never written.

Checks on every open (docs/receipts.md, "When the file is the problem"): an empty file, a damaged
write-ahead log left by a crash, the pages the header promises, the schema (every table, column and
index the store's version must have); then `PRAGMA integrity_check` when the store is small, a crash left
its WAL, or it is not exactly as DAL last left it (the seal, dal.receipts.storefile). Opening for write
also takes the write lock once (a store locked by someone else is refused before anything runs) and
needs some free space.

Readers (`dal receipts`, `dal receipt show`) open the file with `Store(path, readonly=True)`, which never
creates the store, its folder or the WAL side files.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from dal.core.fsutil import fsync_dir
from dal.core.gitignored import ignore_folder
from dal.core.jsontext import dumps as _dumps
from dal.core.jsontext import escape_surrogates as _utf8
from dal.receipts import storefile
from dal.receipts.errors import (  # noqa: F401 - the store's errors, imported from here by many
    AmbiguousKey,
    Continued,
    DecisionTooLate,
    LockLost,
    NoStore,
    RunContinued,
    RunNotFound,
    StoreDamaged,
    StoreError,
    StoreGone,
    StoreLocked,
    continued_error,
)
from dal.receipts.ids import RUN_ID_RE, utc_timestamp
from dal.receipts.jobs_schema import MIGRATION as _JOBS_MIGRATION
from dal.receipts.location import DEFAULT_STORE, STORE_ENV, StoreLocation  # noqa: F401 - names in use
from dal.receipts.packing import decider, pack_result, unpack_result
from dal.receipts.storefile import MIN_FREE_BYTES, RESERVE_BYTES, damaged, writable_fix  # noqa: F401 - names in use
from dal.receipts.tables import render

if TYPE_CHECKING:
    from dal.receipts.jobs import JobQueue
    from dal.receipts.oplock import KeyLock

SCHEMA_VERSION = 5
# How long a writer waits for the store's write lock (SQLite's busy timeout), unless DAL_STORE_TIMEOUT
# says otherwise. DAL's own transactions last milliseconds, so a lock held this long is someone else's
# (an open sqlite3 shell, a backup).
BUSY_TIMEOUT = 5.0
TIMEOUT_ENV = "DAL_STORE_TIMEOUT"
# A store up to this size gets PRAGMA integrity_check on every open (0.5 to 1 ms per MiB from the page
# cache); a larger one only when something looks off (see the module doc).
FULL_CHECK_ALWAYS = 2 << 20

T = TypeVar("T")

# Each entry moves the store from version N-1 to N inside one transaction. Append only: a released
# migration is never edited, so every store reaches the same shape.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE schema_version (
            version INTEGER PRIMARY KEY,
            applied_at TEXT NOT NULL
        )""",
        # status is a receipt status, or 'running' while the run has no receipt yet.
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            operation TEXT NOT NULL,
            key TEXT,
            status TEXT NOT NULL,
            retry TEXT,
            external_effect TEXT,
            blocker TEXT,
            script_path TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            duration_ms REAL,
            previous_run TEXT,
            skipped_of TEXT,
            pid INTEGER,
            policy TEXT,
            receipt TEXT
        )""",
        "CREATE INDEX runs_by_operation ON runs(operation, run_id)",
        "CREATE INDEX runs_by_key ON runs(key, run_id)",
        "CREATE INDEX runs_by_status ON runs(status, run_id)",
        render("loops", "sqlite", indent=12, close=8),
        # loops and effects: one description for both stores (dal/receipts/tables.py).
        render("effects", "sqlite", indent=12, close=8),
        """CREATE TABLE approvals (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            seq INTEGER,
            decision TEXT NOT NULL,
            who TEXT NOT NULL,
            at TEXT NOT NULL,
            note TEXT
        )""",
        "CREATE INDEX approvals_by_run ON approvals(run_id, seq)",
    ],
    # A pid alone does not say whether the run's process still lives: once it dies its pid goes to the
    # next process. Its start time (clock ticks since boot, /proc/PID/stat field 22) and the boot it
    # belongs to (/proc/sys/kernel/random/boot_id) do (dal.core.liveness). NULL where the system does not say.
    2: [
        "ALTER TABLE runs ADD COLUMN pid_start INTEGER",
        "ALTER TABLE runs ADD COLUMN boot_id TEXT",
    ],
    # The job queue: jobs, workers, schedules (dal/receipts/jobs_schema.py, docs/workers.md).
    3: _JOBS_MIGRATION,
    # The order of runs is the order the store recorded them in (`ord`, assigned in begin_run's
    # transaction, under the key lock), never a clock reading taken before the lock: a run that started
    # first but got the lock last, or a clock stepped back, must not make an older run "the newest".
    # Existing runs keep the order they were inserted in (rowid). A decision keeps the command the person
    # decided about, so that it never applies to another one.
    4: [
        "ALTER TABLE runs ADD COLUMN ord INTEGER",
        "UPDATE runs SET ord = rowid",
        "CREATE INDEX runs_by_ord ON runs(ord)",
        "CREATE INDEX runs_by_key_ord ON runs(key, ord)",
        "ALTER TABLE approvals ADD COLUMN command TEXT",
    ],
    # The run that continued a run (run_row's `resumed_by`, the `resumed` label of `dal receipts` and the
    # console) is looked up by previous_run: without an index every look-up read every run.
    5: [
        "CREATE INDEX runs_by_previous ON runs(previous_run)",
    ],
}

_RUN_COLUMNS = (
    "run_id, operation, key, status, retry, external_effect, blocker, script_path, started_at, "
    "finished_at, duration_ms, previous_run, skipped_of"
)


def store_path(store: str | os.PathLike[str] | None = None, workspace: str | os.PathLike[str] | None = None) -> Path:
    """Where the store lives: `--store PATH`, else `$DAL_STORE`, else `<workspace>/.dal/dal.db`, parsed
    as every command parses it (StoreLocation.parse: `~` expanded, made absolute)."""
    return StoreLocation.parse(store, workspace or ".").file


def busy_timeout() -> float:
    """Seconds a writer waits for the store's write lock: $DAL_STORE_TIMEOUT, else BUSY_TIMEOUT (5)."""
    text = os.environ.get(TIMEOUT_ENV)
    if text:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if 0 <= value <= 86400:
            return value
        raise StoreError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds (0 to 86400)")
    return BUSY_TIMEOUT


def describe_error(exc: BaseException, path: Path, doing: str) -> StoreError:
    """Turn a SQLite error into a StoreError a user can act on."""
    if isinstance(exc, UnicodeEncodeError):  # a value handed in (a lone surrogate), not the store's text
        return StoreError(f"a value to be stored while {doing} is not valid Unicode text (a lone surrogate at "
                          f"character {exc.start}): nothing was written, and the run store {path} is fine", path)
    if isinstance(exc, UnicodeError):
        return damaged(path, f"it holds text that is not valid UTF-8 (found while {doing})")
    msg = str(exc)
    low = msg.lower()
    where = f"the run store {path}"
    if "locked" in low or "busy" in low:
        return StoreLocked(
            f"{where} is locked by another process (another dal run still writing?) while {doing}. "
            "Wait for it to finish and try again; nothing already stored was lost.",
            path,
        )
    if "readonly" in low or "read-only" in low or "permission" in low:
        return StoreError(f"{where} is read-only, so DAL cannot record runs while {doing}. {writable_fix(path)}",
                          path)
    if "not a database" in low:
        return damaged(path, "it is not an SQLite database (its header is damaged, or it is some other file)")
    if "malformed" in low or "corrupt" in low or "no such" in low or "unsupported file format" in low:
        return damaged(path, f"SQLite says `{msg}` while {doing}")
    if "unable to open" in low:
        if path.is_dir():
            return StoreError(f"{where} is a directory, not a file. Pass the file with --store PATH.", path)
        return StoreError(
            f"cannot open {where} while {doing} ({msg}). Check that {path.parent} exists and is "
            f"writable, or choose another store with --store PATH or {STORE_ENV}=PATH.",
            path,
        )
    if "disk is full" in low or "disk i/o" in low or "no space" in low:
        return StoreError(
            f"{where} could not be written while {doing} ({msg}). Free disk space or check the device; "
            "what was stored before is intact.",
            path,
        )
    return StoreError(f"{where} failed while {doing}: {msg}", path)


_SHAPES: dict[tuple[str, ...], tuple[dict[str, list[tuple[Any, ...]]], dict[str, list[Any]]]] = {}


def _shape_of(conn: sqlite3.Connection) -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, list[Any]]]:
    """The tables (their columns, in order) and indexes (their table and columns) of a database."""
    tables: dict[str, list[tuple[Any, ...]]] = {}
    for name, col, ctype, notnull, pk in conn.execute(
        'SELECT m.name, p.name, p.type, p."notnull", p.pk FROM sqlite_master AS m, pragma_table_info(m.name) AS p'
        " WHERE m.type = 'table' ORDER BY m.name, p.cid"
    ):
        tables.setdefault(name, []).append((col, str(ctype).upper(), notnull, pk))
    indexes: dict[str, list[Any]] = {}
    for name, table, col in conn.execute(
        "SELECT m.name, m.tbl_name, i.name FROM sqlite_master AS m, pragma_index_info(m.name) AS i"
        " WHERE m.type = 'index' ORDER BY m.name, i.seqno"
    ):
        indexes.setdefault(name, [table]).append(col)
    return tables, indexes


def _expected_shape(version: int) -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, list[Any]]]:
    """The shape migrations 1..version give a new database (built in memory, once per process)."""
    statements = tuple(s for target in range(1, version + 1) for s in MIGRATIONS.get(target, ()))
    if statements not in _SHAPES:
        mem = sqlite3.connect(":memory:")
        try:
            for statement in statements:
                mem.execute(statement)
            _SHAPES[statements] = _shape_of(mem)
        finally:
            mem.close()
    return _SHAPES[statements]


# The digest of sqlite_master that migrations 1..N leave (schema_digest()), so that opening a sound store
# does not build the expected shape in memory (about 1 ms). A store whose digest differs is compared
# column by column (_shape_problem), which also accepts objects an operator added. Kept in step with
# MIGRATIONS by tests/receipts/test_store.py.
SCHEMA_DIGESTS = {
    1: "aff8ee56dcd6b3694c990b204427b881120c47751e6cd9b9d63bb73d7f34cec7",
    2: "c6a43d30776b6647bba3b71ef39c65a0bebce4e746bbf76e18858be4a81923a8",
    3: "2dc9691ce37d9983394476c418688f9ea4e0baafe75de61a54edb7af7361a14c",
    4: "d3b1e3fc7adc8983977b4cddc5cdd704ae90bca7b8168af776c026c511535dd4",
    5: "eb92bb2797166cdcf21713546f2a504b993bc88cf0ef35f0d38dfdaff9240fa1",
}


def schema_digest(conn: sqlite3.Connection) -> str:
    """SHA-256 of the database's schema: every object's type, name, table and SQL text, in name order."""
    from dal.core.digest import sha256

    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall()
    return sha256(json.dumps(rows).encode("utf-8")).hexdigest()


def _shape_problem(conn: sqlite3.Connection, version: int) -> str | None:
    """What a store of `version` lacks of the tables, columns and indexes DAL made (objects added by
    someone else are left alone); None when it has them all."""
    if SCHEMA_DIGESTS.get(version) == schema_digest(conn) and version <= SCHEMA_VERSION:
        return None  # exactly what DAL's migrations make
    want_tables, want_indexes = _expected_shape(version)
    tables, indexes = _shape_of(conn)
    for name, columns in want_tables.items():
        if name not in tables:
            return f"its table `{name}` is missing"
        if tables[name] != columns:
            have = {c[0] for c in tables[name]}
            missing = [c[0] for c in columns if c[0] not in have]
            extra = sorted(have - {c[0] for c in columns})
            detail = "; ".join(
                part for part in (
                    f"missing: {', '.join(missing)}" if missing else "",
                    f"unexpected: {', '.join(extra)}" if extra else "",
                ) if part
            ) or "a column's type or constraints differ"
            return f"its table `{name}` does not have the columns a version {version} store has ({detail})"
    for name, spec in want_indexes.items():
        if indexes.get(name) != spec:
            return f"its index `{name}` is missing or changed"
    return None


class Store:
    """A connection to one run store. Use as a context manager, or call close().

    `Store(path)` creates the file and its folder when missing and migrates an older store.
    `Store(path, readonly=True)` raises NoStore when there is no file and never writes anything.
    Either raises StoreDamaged for a store that fails the checks in the module doc, StoreLocked when
    opening for write finds the write lock held for `timeout` seconds (default: busy_timeout()).
    """

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False, timeout: float | None = None) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._timeout = busy_timeout() if timeout is None else timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._immutable_stat: tuple[int, int] | None = None
        self._file_id: tuple[Path, int, int] | None = None  # the file a writer opened (see _still_there)
        self._seal_on_close = False
        self._schema: int | None = None  # the version the store had when opened
        self._shared = False  # another connection had the store open when this one came (see _vet_file)
        try:
            if readonly:
                self._open_readonly()
            else:
                self._open_readwrite()
                if self.path.parent.name == ".dal":
                    ignore_folder(self.path.parent)  # git never sees the store (dal.core.gitignored)
        except BaseException:
            self.close()  # a store we refuse must not stay open (or locked) behind the error
            raise

    # -- opening -------------------------------------------------------------------------------------

    def _open_readwrite(self) -> None:
        if self.path.is_dir():
            raise StoreError(
                f"the run store {self.path} is a directory, not a file. Pass the file with --store PATH.",
                self.path,
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(
                f"cannot create the folder {self.path.parent} for the run store {self.path} ({e.strerror}). "
                + (f"The file system is mounted read-only, where chmod changes nothing: choose a store on a "
                   f"writable disk with --store PATH or {STORE_ENV}=PATH." if e.errno == errno.EROFS else
                   f"Make it writable or choose another store with --store PATH or {STORE_ENV}=PATH."),
                self.path,
            ) from None
        if self.path.exists():
            leftover = self._vet_file()  # a damaged store is reported as such first, whatever else is wrong
            storefile.refuse_read_only(self.path)
            storefile.refuse_full_disk(self.path)
        else:
            storefile.refuse_read_only(self.path)
            storefile.refuse_full_disk(self.path)
            self._create()
            leftover = self._vet_file()
        # Vet through a read-only connection: a read-write one would create -wal and -shm files, and
        # could leave them behind when the store turns out to be damaged.
        self._connect_readonly()
        version = self._vet_settled(leftover)
        self.close()
        self._immutable_stat = None
        with self._guard("opening it"):
            conn = sqlite3.connect(str(self.path), timeout=self._timeout, isolation_level=None, check_same_thread=False)
            self._conn = conn
            st = os.stat(self.path)
            self._file_id = (self.path.absolute(), st.st_dev, st.st_ino)
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            if self._version() != version:  # migrated (or replaced) by another process since we looked
                version = self._version()
                self._check_version(version)
        with self._guard("opening it"):
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise sqlite3.OperationalError(f"could not switch to WAL (journal mode stays {mode})")
            # FULL: a commit is fsynced before it returns, so a journaled intent survives kill -9 and
            # power loss. Commits happen only at effect boundaries and run ends, so this is cheap.
            conn.execute("PRAGMA synchronous = FULL")
        self._probe_write()
        with self._guard("upgrading it"):
            self._migrate(version)
        self._schema = SCHEMA_VERSION
        self._seal_on_close = True
        storefile.keep_reserve(self.path)

    @property
    def reserve_path(self) -> Path:
        return storefile.reserve_path(self.path)

    def free_reserve(self) -> bool:
        """Give the reserve's room back to the filesystem (the disk is full and a run's end must be
        recorded); True when there was one. The next open for writing makes it again."""
        return storefile.free_reserve(self.path)

    def _create(self) -> None:
        """Make a new, migrated store at self.path without ever leaving a half-made one there: it is built
        under a temporary name and linked into place (if another process made one meanwhile, that one
        stays)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{os.urandom(4).hex()}.new")
        conn: sqlite3.Connection | None = None
        try:
            with self._guard("creating it"):
                # Readable by its owner only, like the receipts: it journals what runs printed and the env()
                # values they were allowed. SQLite gives its -wal and -shm files the same mode.
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
                conn = sqlite3.connect(str(tmp), isolation_level=None)
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                self._conn = conn
                self._migrate(None)
                self._conn = None
                conn.close()
                conn = None
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass  # another process created the store first: use theirs
            except OSError:
                if not self.path.exists():  # a filesystem without hard links: the old way, in place
                    os.replace(tmp, self.path)
            fsync_dir(self.path.parent)
        except OSError as e:
            raise describe_error(sqlite3.OperationalError(e.strerror or str(e)), self.path, "creating it") from None
        finally:
            self._conn = None
            if conn is not None:
                conn.close()
            for side in ("", "-wal", "-shm"):
                try:
                    os.unlink(str(tmp) + side)
                except OSError:
                    pass

    def _open_readonly(self) -> None:
        if not self.path.exists():
            raise NoStore(f"no runs yet: there is no run store at {self.path}", self.path)
        if self.path.is_dir():
            raise StoreError(
                f"the run store {self.path} is a directory, not a file. Pass the file with --store PATH.",
                self.path,
            )
        leftover = self._vet_file()
        self._connect_readonly()
        self._vet_settled(leftover)

    def _vet_file(self) -> bool:
        """Checks on the files before SQLite opens them; True when a crash left a WAL behind (no process
        has the store open), which _vet() then checks in full."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return False  # SQLite will say what is wrong
        if 0 < size < 512:  # an SQLite database is at least one page, and a page at least 512 bytes
            raise damaged(self.path, f"it is too short to be an SQLite database ({size} bytes): truncated, or "
                          "some other file")
        if size == 0:
            raise StoreDamaged(
                f"the run store {self.path} is an empty file (0 bytes). DAL never leaves an empty store, so "
                "this is a store that was truncated, or a file DAL did not make; DAL has left it as it is. "
                f"If it held runs, restore it from a backup; if not, remove it (rm {self.path}) and DAL will "
                "make a new store there.",
                self.path,
            )
        who = storefile.Survey(self.path)
        if who.ours is False:  # reading the file ourselves is safe only while we hold no lock on it
            problem = storefile.header_damage(self.path)
            if problem:
                raise damaged(self.path, problem)
        self._shared = who.shared is not False
        wal = storefile.wal_path(self.path)
        try:
            wal_size = wal.stat().st_size
        except OSError:
            return False
        if wal_size == 0 or self._shared:
            return False  # no log, or a live one: its writer vetted the store when it opened it
        problem = storefile.wal_damage(self.path)
        if problem and storefile.Survey(self.path).shared is False:
            # (A process that connected while we read may have been writing the log under us: then what
            # we read proves nothing, and that process checked the log before it wrote.)
            raise damaged(self.path, problem)
        return not problem

    def _vet_settled(self, leftover: bool) -> int | None:
        """_vet(), believing damage found through an immutable connection only if the file did not change
        while it was read. Immutable reads take no locks: a writer that came meanwhile (a checkpoint folding
        its WAL back into the file as its last connection closes) can rewrite pages under the read, and
        integrity_check then reports an index that disagrees with its table in a sound store. Such a read is
        repeated through the WAL's locks, which give one consistent snapshot."""
        try:
            return self._vet(leftover)
        except StoreDamaged:
            if self._immutable_stat is None or not self._changed():
                raise
        assert self._conn is not None
        self._conn.close()
        self._conn = None
        self._connect_readonly(immutable=False)
        return self._vet(leftover)

    def _vet(self, leftover: bool) -> int | None:
        """Checks through SQLite before anything is written: the schema, the pages the header promises and,
        when warranted, PRAGMA integrity_check. Returns the store's version (None for an empty database)."""
        assert self._conn is not None
        conn = self._conn
        with self._guard("checking it"):
            try:
                size = self.path.stat().st_size
                wal = storefile.wal_path(self.path)
                wal_size = wal.stat().st_size if wal.exists() else 0
            except OSError:
                size, wal_size = 0, 0
            if wal_size == 0 and size:
                # (storefile.header_damage checks this first, when reading the file ourselves is safe.)
                pages = conn.execute("PRAGMA page_count").fetchone()[0]
                page_size = conn.execute("PRAGMA page_size").fetchone()[0]
                if pages * page_size > size:
                    raise damaged(
                        self.path,
                        f"it is shorter than its header says ({size:,} bytes, but {pages:,} pages of {page_size:,}"
                        " bytes): it was truncated",
                    )
            version = self._version()
            self._check_version(version)
            self._schema = version
            if version is not None:
                problem = _shape_problem(conn, version)
                if problem:
                    raise damaged(self.path, problem)
            if self._wants_full_check(size + wal_size, leftover):
                # integrity_check, not quick_check: it also finds an index that disagrees with its table
                # (a write would make it worse), for about 10% more time.
                rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(3)").fetchall()]
                if rows != ["ok"] and self._immutable_stat is not None and self._changed():
                    # Read as immutable (no writer when we looked), but one came while we read: what we read
                    # may be torn (a worker's parent writes the queue at any moment). Read it again through
                    # the WAL, as _read() does, and only then believe the damage.
                    conn.close()
                    self._immutable_stat = None
                    conn = self._conn = sqlite3.connect(f"file:{quote(self.path.resolve().as_posix())}?mode=ro",
                                                        uri=True, timeout=self._timeout, check_same_thread=False)
                    rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(3)").fetchall()]
                if rows != ["ok"]:
                    lines = [ln for r in rows for ln in r.splitlines() if ln.strip() and not ln.startswith("***")]
                    found = "; ".join(lines)
                    raise damaged(self.path, f"PRAGMA integrity_check finds damage ({found[:300]})")
        return version

    def _wants_full_check(self, size: int, leftover: bool) -> bool:
        if size <= FULL_CHECK_ALWAYS or leftover:
            return True
        if self._shared:
            return False  # another connection had it open as we came: it checked the store when it opened it
        return not storefile.sealed(self.path)

    def _probe_write(self) -> None:
        """Take the write lock once, so a store that someone else holds locked refuses the run before
        anything runs (rather than at its first effect)."""
        assert self._conn is not None
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute("ROLLBACK")
        except sqlite3.OperationalError as e:
            if "locked" not in str(e).lower() and "busy" not in str(e).lower():
                raise describe_error(e, self.path, "opening it") from None
            holder = storefile.lock_holder(self.path)
            who = storefile.describe_process(holder) if holder else "another process"
            raise StoreLocked(
                f"the run store {self.path} is locked: {who} has held its write lock for more than "
                f"{self._timeout:g} s. DAL wrote nothing to it. Wait for that process to finish (or end it) and "
                f"try again, or record runs in another store with --store PATH (or {STORE_ENV}=PATH).",
                self.path,
            ) from None

    def _connect_readonly(self, *, immutable: bool = True) -> None:
        # A `mode=ro` connection to a WAL database creates -wal and -shm files that it cannot remove. When
        # no writer is active (no -wal file), read the file as immutable instead, which creates nothing;
        # _read() falls back to `mode=ro` if a writer appears while we read.
        wal = Path(str(self.path) + "-wal")
        uri_path = quote(self.path.resolve().as_posix())  # a `?`, `#` or `%` in the path must not end it
        with self._guard("opening it"):
            if wal.exists() or not immutable:
                self._immutable_stat = None
                self._conn = sqlite3.connect(
                    f"file:{uri_path}?mode=ro", uri=True, timeout=self._timeout, check_same_thread=False
                )
            else:
                self._immutable_stat = self._stat()
                self._conn = sqlite3.connect(f"file:{uri_path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")

    def _stat(self) -> tuple[int, int]:
        try:
            st = self.path.stat()
        except OSError:  # moved away while we read: reconnecting will say so as a StoreError
            return (0, 0)
        return (st.st_mtime_ns, st.st_size)

    def _version(self) -> int | None:
        assert self._conn is not None
        has_table = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone()
        if not has_table:
            others = self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if others:
                raise StoreError(
                    f"{self.path} is an SQLite database but not a DAL run store (it has other tables). "
                    "DAL has left it untouched; point --store or DAL_STORE at another file.",
                    self.path,
                )
            return None
        return self._conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0

    def _check_version(self, version: int | None) -> None:
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"the run store {self.path} was written by a newer DAL (store version {version}; this DAL "
                f"knows up to {SCHEMA_VERSION}). Upgrade DAL to read it, or use another store with "
                "--store PATH. The store was not changed.",
                self.path,
            )

    def _migrate(self, version: int | None) -> None:
        assert self._conn is not None
        if version == SCHEMA_VERSION:
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._version()  # another process may have migrated while we waited for the lock
            self._check_version(version)
            for target in range((version or 0) + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target]:
                    self._conn.execute(statement)
                self._conn.execute(
                    "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                    (target, utc_timestamp()),
                )
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    # -- plumbing ------------------------------------------------------------------------------------

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, UnicodeError) as e:
            raise describe_error(e, self.path, doing) from None

    @contextmanager
    def _write(self, doing: str) -> Iterator[sqlite3.Connection]:
        if self.readonly or self._conn is None:
            raise StoreError(f"the run store {self.path} was opened read-only; cannot write while {doing}.", self.path)
        with self._lock, self._guard(doing):
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._still_there(doing)
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _still_there(self, doing: str) -> None:
        """A store deleted (or replaced) while it is open keeps taking writes into a file nobody will read
        again (a cleanup job's `rm -rf .dal`): the next invocation would find no journal and run everything
        again. Every write checks that the path still names the file opened, and refuses when it does not."""
        if self._file_id is None:
            return
        where, dev, ino = self._file_id
        try:
            st = os.stat(where)
            same = (st.st_dev, st.st_ino) == (dev, ino)
        except OSError:
            same = False
        if not same:
            raise StoreGone(
                f"the run store {self.path} was deleted or replaced while this process used it (found while "
                f"{doing}): what it journaled went with it, and nothing more was written.", self.path)

    def _read(self, doing: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._conn is None:
            raise StoreError(f"the run store {self.path} is closed.", self.path)
        with self._lock, self._guard(doing):
            if self._immutable_stat is None:
                return fn(self._conn)
            # Reading as immutable: if a writer started meanwhile, what we read may be stale or torn, so
            # read again through the WAL, and only then believe an error.
            try:
                result = fn(self._conn)
                changed = False
            except sqlite3.DatabaseError:
                if not self._changed():
                    raise
                changed = True
            if changed or self._changed():
                self._conn.close()
                self._connect_readonly()
                result = fn(self._conn)
            return result

    def _changed(self) -> bool:
        wal = Path(str(self.path) + "-wal")
        return wal.exists() or self._stat() != self._immutable_stat

    def close(self) -> None:
        """Close the connection (in WAL mode the last writer to close also folds the WAL back, and then
        seals the store: see storefile.sealed)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                if self._seal_on_close:
                    self._seal_on_close = False
                    storefile.seal(self.path)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version(self) -> int:
        """The store's schema version (0 for an empty file opened read-only)."""
        return self._read("reading its version", lambda c: self._version() or 0)

    def set_synchronous(self, level: str) -> None:
        """Switch this connection between `FULL` (each commit fsynced before it returns; the default) and
        `NORMAL` (commits survive kill -9 of the process but the last ones may roll back after a power
        loss; the store stays consistent either way). The runner uses NORMAL and asks for FULL only
        for journal entries whose loss could make an effect run twice, and for the run's receipt
        (docs/durability.md)."""
        level = level.upper()
        if level not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, not {level!r}")
        with self._lock, self._guard("setting its durability"):
            if self._conn is not None and not self.readonly:
                self._conn.execute(f"PRAGMA synchronous = {level}")

    def integrity_check(self) -> list[str]:
        """Problems SQLite finds in the file; `[]` when it is sound."""
        rows = self._read("checking it", lambda c: c.execute("PRAGMA integrity_check").fetchall())
        return [] if rows == [("ok",)] else [r[0] for r in rows]

    @property
    def _newest_first(self) -> str:
        """ORDER BY for the runs of one operation, newest first: in the order the store recorded them (a
        reader of a store older than version 4, which has no `ord`, falls back to the ids' clock order)."""
        return "ord DESC" if (self._schema or 0) >= 4 else "run_id DESC"

    def _has_tables(self, conn: sqlite3.Connection) -> bool:
        return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone())

    # -- runs and receipts ---------------------------------------------------------------------------

    def begin_run(
        self,
        run_id: str,
        *,
        operation: str,
        key: str | None = None,
        script_path: str | None = None,
        started_at: str | None = None,
        previous_run: str | None = None,
        pid: int | None = None,
        policy: Any = None,
        fence: Any = None,
    ) -> None:
        """Record that a run started (status `running`, no receipt yet), durably, before its first effect.

        With the pid (default: this process) go its start time and the boot id (dal.core.liveness), so that a
        later reader tells this process from another that got the same pid after it died.

        `fence` (a worker's run of a job, jobs.Fence): the same transaction records this process as the
        job's holder, while the job is still running under that lease (else it records no holder and
        raises nothing: the run's first intent is fenced anyway). One write per job fewer than a holder
        recorded on its own."""
        from dal.core.liveness import identity

        pid = os.getpid() if pid is None else pid
        pid_start, boot = identity(pid)
        with self._write(f"starting run {run_id}") as c:
            if previous_run is not None:
                # Compare and set, in the transaction that records the run: a run has at most one
                # successor, whatever locks the runners took (two paths to one store, a lock folder lost).
                later = c.execute("SELECT run_id FROM runs WHERE previous_run = ? LIMIT 1", (previous_run,)).fetchone()
                if later is not None:
                    raise RunContinued(
                        f"run {previous_run} was already continued by run {later[0]}, recorded while this one "
                        "was starting: another invocation of the operation runs it (through another path to "
                        f"the store {self.path}?). Nothing ran.", self.path, later[0])
            c.execute(
                "INSERT INTO runs (run_id, operation, key, status, script_path, started_at, previous_run,"
                " pid, pid_start, boot_id, policy, ord)"
                " VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(ord), 0) + 1 FROM runs))",
                (
                    run_id,
                    _utf8(operation),
                    _opt_utf8(key),
                    _opt_utf8(script_path),
                    started_at or utc_timestamp(),
                    previous_run,
                    pid,
                    pid_start,
                    boot,
                    None if policy is None else json.dumps(policy),
                ),
            )
            if fence is not None:
                from dal.receipts.jobs import record_holder

                record_holder(c, fence, {"pid": pid, "start": pid_start, "boot": boot, "worker": fence.owner})

    def save_receipt(self, receipt: dict[str, Any], *, validate: bool | None = None) -> None:
        """Store a run receipt and its loop receipts in one durable transaction (insert or replace).

        With `validate` (default: `schema.validation_on()`, i.e. DAL_VALIDATE_RECEIPTS=1, which the test suite
        sets) the receipt is checked against `dal.receipt/v1` first (ReceiptSchemaError):
        every field, and the first few and the last entry of each long list (VALIDATE_SAMPLE), so the
        check stays in milliseconds for a receipt with thousands of evidence entries.
        """
        self.save_receipts([receipt], validate=validate)

    def save_receipts(self, receipts: Iterable[dict[str, Any]], *, validate: bool | None = None) -> int:
        """save_receipt() for many receipts in one transaction (imports, tests); returns how many."""
        from dal.receipts.schema import checked

        batch = checked(receipts, validate)
        if not batch:
            return 0
        what = f"saving the receipt of {batch[0]['run_id']}" if len(batch) == 1 else f"saving {len(batch)} receipts"
        with self._write(what) as c:
            for receipt in batch:
                self._insert_receipt(c, receipt)
        return len(batch)

    def _insert_receipt(self, c: sqlite3.Connection, receipt: dict[str, Any]) -> None:
        loops = receipt.get("loops") or []
        # The loops live in their own table; the stored run receipt keeps an empty list in their place so
        # get_run() can put them back in the same key order.
        body = _dumps({**receipt, "loops": []}, separators=(",", ":"))
        run_id = receipt["run_id"]
        script = receipt.get("script") or {}
        c.execute(
            "INSERT INTO runs (run_id, operation, key, status, retry, external_effect, blocker,"
            " script_path,"
            " started_at, finished_at, duration_ms, previous_run, skipped_of, pid, receipt, ord)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(ord), 0) + 1 FROM runs))"
            " ON CONFLICT (run_id) DO UPDATE SET operation = excluded.operation, key = excluded.key,"
            " status = excluded.status, retry = excluded.retry,"
            " external_effect = excluded.external_effect,"
            " blocker = excluded.blocker, script_path = excluded.script_path,"
            " started_at = excluded.started_at, finished_at = excluded.finished_at,"
            " duration_ms = excluded.duration_ms, previous_run = excluded.previous_run,"
            " skipped_of = excluded.skipped_of, receipt = excluded.receipt",
            (
                run_id,
                _utf8(receipt["operation"]),
                _opt_utf8(receipt.get("key")),
                receipt["status"],
                receipt.get("retry"),
                receipt.get("external_effect"),
                _opt_utf8(receipt.get("blocker")),
                _opt_utf8(script.get("path")),
                receipt["attempted_at"],
                receipt.get("finished_at"),
                receipt.get("duration_ms"),
                receipt.get("previous_run"),
                receipt.get("skipped_of"),
                os.getpid(),
                body,
            ),
        )
        c.execute("DELETE FROM loops WHERE run_id = ?", (run_id,))
        c.executemany(
            'INSERT INTO loops (run_id, idx, kind, file, line, "column", exit, clause, iterations,'
            " receipt)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    run_id,
                    i,
                    lp["kind"],
                    lp["file"],
                    lp["line"],
                    lp["column"],
                    lp["exit"],
                    lp.get("clause"),
                    lp["iterations"],
                    _dumps(lp, separators=(",", ":")),
                )
                for i, lp in enumerate(loops)
            ],
        )

    def _assemble(self, conn: sqlite3.Connection, run_id: str, body: str) -> dict[str, Any]:
        rows = conn.execute("SELECT receipt FROM loops WHERE run_id = ? ORDER BY idx", (run_id,)).fetchall()
        try:
            receipt = json.loads(body)
            receipt["loops"] = [json.loads(r[0]) for r in rows]
        except (ValueError, TypeError) as e:
            raise StoreError(
                f"the stored receipt of {run_id} in {self.path} is damaged ({e}); the other runs are "
                f"unaffected. Check the file with `sqlite3 {self.path} 'pragma integrity_check'`.",
                self.path,
            ) from None
        return receipt

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """The stored receipt of `run_id`, or None when there is no such run or it has not ended yet."""

        def read(c: sqlite3.Connection) -> dict[str, Any] | None:
            if not self._has_tables(c):
                return None
            row = c.execute("SELECT receipt FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None or row[0] is None:
                return None
            return self._assemble(c, run_id, row[0])

        return self._read(f"reading run {run_id}", read)

    def run_row(self, run_id: str) -> dict[str, Any] | None:
        """The summary row of `run_id` (as list_runs() gives it, plus `pid`, `pid_start` and `boot_id` (the
        process that began it; see dal.core.liveness.verdict), the parsed `policy` and `resumed_by`, the newest run
        that names it as previous_run), whether or not the run has a receipt yet; None when there is no such
        run."""
        # A reader of a version 1 store (readers never migrate) has no identity columns to read.
        ident = "pid_start, boot_id" if (self._schema or 0) >= 2 else "NULL AS pid_start, NULL AS boot_id"

        def read(c: sqlite3.Connection) -> dict[str, Any] | None:
            if not self._has_tables(c):
                return None
            cur = c.execute(f"SELECT {_RUN_COLUMNS}, pid, {ident}, policy FROM runs WHERE run_id = ?", (run_id,))
            row = cur.fetchone()
            if row is None:
                return None
            out = dict(zip([d[0] for d in cur.description], row, strict=True))
            out["policy"] = json.loads(out["policy"]) if out["policy"] else None
            later = c.execute(
                f"SELECT run_id FROM runs WHERE previous_run = ? ORDER BY {self._newest_first} LIMIT 1", (run_id,)
            ).fetchone()
            out["resumed_by"] = later[0] if later else None
            return out

        return self._read(f"reading run {run_id}", read)

    def run_ids_with_prefix(self, prefix: str, limit: int = 6) -> list[str]:
        """Run ids that start with `prefix`, finished or not, oldest first (at most `limit`)."""
        return self._read(
            f"looking up {prefix!r}",
            lambda c: [
                r[0]
                for r in c.execute(
                    "SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? ORDER BY run_id LIMIT ?",
                    (prefix, prefix + "\U0010ffff", limit),
                ).fetchall()
            ]
            if self._has_tables(c)
            else [],
        )

    def loops(self, run_id: str) -> list[dict[str, Any]]:
        """The loop receipts of a run, in the order they were emitted."""
        return self._read(
            f"reading the loops of {run_id}",
            lambda c: (
                [
                    json.loads(r[0])
                    for r in c.execute("SELECT receipt FROM loops WHERE run_id = ? ORDER BY idx", (run_id,)).fetchall()
                ]
                if self._has_tables(c)
                else []
            ),
        )

    def find(self, ref: str) -> dict[str, Any]:
        """The receipt `ref` names: a run id, a unique prefix of one (`run_2026…`), an operation or key (its
        newest run), or `latest` (the newest run). Raises RunNotFound with a message saying why."""
        ref = ref.strip()
        if ref and ref != "latest" and not RUN_ID_RE.match(ref) and not ref.startswith("run_"):
            from dal.receipts.queries import unambiguous_key

            unambiguous_key(self, ref)
        return self._read(f"looking up {ref!r}", lambda c: self._find(c, ref))

    def _find(self, c: sqlite3.Connection, ref: str) -> dict[str, Any]:
        if not self._has_tables(c):
            raise RunNotFound(f"no runs yet in {self.path}", self.path)
        if not ref:
            raise RunNotFound("give a run id, an operation or key, or `latest`", self.path)
        if ref == "latest":
            row = c.execute(
                f"SELECT run_id, receipt FROM runs WHERE receipt IS NOT NULL ORDER BY {self._newest_first} LIMIT 1"
            ).fetchone()
            if row is None:
                raise RunNotFound(f"no finished runs yet in {self.path}", self.path)
            return self._assemble(c, row[0], row[1])
        if ref.startswith("run_"):
            # Prefix search as a range over the primary key, so it stays an index lookup.
            rows = c.execute(
                "SELECT run_id, receipt FROM runs WHERE run_id >= ? AND run_id < ? ORDER BY run_id LIMIT 6",
                (ref, ref + "\U0010ffff"),
            ).fetchall()
            exact = [r for r in rows if r[0] == ref]
            if exact:
                rows = exact
            if len(rows) > 1:
                shown = ", ".join(r[0] for r in rows[:5])
                raise RunNotFound(
                    f"{ref!r} matches several runs ({shown}{', …' if len(rows) > 5 else ''}); give more of the id",
                    self.path,
                )
            if rows:
                run_id, body = rows[0]
                if body is None:
                    raise RunNotFound(f"run {run_id} has not finished yet: it has no receipt", self.path)
                return self._assemble(c, run_id, body)
            if RUN_ID_RE.match(ref):
                raise RunNotFound(f"no run {ref} in {self.path} (list runs with `dal receipts`)", self.path)
        row = c.execute(
            "SELECT run_id, receipt FROM runs WHERE (key = ? OR operation = ?) AND receipt IS NOT NULL"
            f" ORDER BY {self._newest_first} LIMIT 1",
            (ref, ref),
        ).fetchone()
        if row is None:
            raise RunNotFound(
                f"no run, operation or key matches {ref!r} in {self.path} (list runs with `dal receipts`)",
                self.path,
            )
        return self._assemble(c, row[0], row[1])

    def list_runs(
        self,
        *,
        status: str | None = None,
        operation: str | None = None,
        key: str | None = None,
        waiting: bool = False,
        limit: int | None = 50,
        retry: str | None = None,
    ) -> list[dict[str, Any]]:
        """Runs newest first in the order the store recorded them (not their ids' clock, which a clock step
        can put out of order: `latest` is the run recorded last), as summary rows (run_id, operation, key,
        status, retry, external_effect, blocker, script_path, started_at, finished_at, duration_ms,
        previous_run, skipped_of).
        Which run of a key is the newest is runs_of_key()'s to say.

        `operation` matches the operation or the key, exactly or as a glob when it has `*`, `?` or `[`.
        `waiting` keeps only runs that wait for a person or a resume.
        `retry` keeps only runs of that retry class.
        """
        where, args = self._filters(status=status, operation=operation, key=key, waiting=waiting, retry=retry)
        sql = f"SELECT {_RUN_COLUMNS} FROM runs{where} ORDER BY {self._newest_first}"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(max(0, int(limit)))

        return self._run_rows("listing runs", sql, args)

    def runs_of_key(self, key: str, *, limit: int | None = 20) -> list[dict[str, Any]]:
        """The runs of `key`, newest first in the order the store recorded them (`ord`, assigned under the
        key's lock), as list_runs() rows: what decides which run an operation continues. A run's id is a
        clock reading taken before the lock, so it cannot say that."""
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE key = ? ORDER BY {self._newest_first}"
        args: list[Any] = [key]
        if limit is not None:
            sql += " LIMIT ?"
            args.append(max(0, int(limit)))

        return self._run_rows(f"listing the runs of {key!r}", sql, args)

    def policy_files(self, workspace: str) -> list[str]:
        """The policy files runs in `workspace` started under (contract.RunStore.policy_files)."""
        sql = ("SELECT DISTINCT json_extract(policy, '$.spec.policy.source') FROM runs"
               " WHERE json_extract(policy, '$.spec.policy.file_sha256') IS NOT NULL"
               " AND json_extract(policy, '$.spec.policy.workspace') = ?")

        def read(c: sqlite3.Connection) -> list[str]:
            if not self._has_tables(c):
                return []
            return [r[0] for r in c.execute(sql, (workspace,)).fetchall() if isinstance(r[0], str)]

        return self._read("listing the policy files of runs", read)

    def _run_rows(self, what: str, sql: str, args: list[Any]) -> list[dict[str, Any]]:
        """The rows of a SELECT over runs as dicts; none from a store whose tables do not exist yet."""

        def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
            if not self._has_tables(c):
                return []
            cur = c.execute(sql, args)
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

        return self._read(what, read)

    def count_runs(
        self,
        *,
        status: str | None = None,
        operation: str | None = None,
        key: str | None = None,
        waiting: bool = False,
        retry: str | None = None,
    ) -> int:
        """How many runs list_runs() would return without a limit."""
        where, args = self._filters(status=status, operation=operation, key=key, waiting=waiting, retry=retry)
        return self._read(
            "counting runs",
            lambda c: c.execute(f"SELECT count(*) FROM runs{where}", args).fetchone()[0] if self._has_tables(c) else 0,
        )

    @staticmethod
    def _filters(*, status: str | None, operation: str | None, key: str | None, waiting: bool,
                 retry: str | None = None) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        if status:
            clauses.append("status = ?")
            args.append(status)
        if retry:
            clauses.append("retry = ?")
            args.append(retry)
        if waiting:
            # A waiting run that a later run resumed (its previous_run) no longer waits for anyone.
            clauses.append(
                "status = 'waiting' AND run_id NOT IN (SELECT previous_run FROM runs WHERE previous_run IS NOT NULL)"
            )
        if operation:
            op = "GLOB" if any(ch in operation for ch in "*?[") else "="
            clauses.append(f"(operation {op} ? OR key {op} ?)")
            args += [operation, operation]
        if key is not None:
            clauses.append("key = ?")
            args.append(key)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), args

    # -- effect journal ------------------------------------------------------------------------------

    def journal_intent(
        self,
        run_id: str,
        seq: int,
        command: str,
        effect_class: str | None,
        *,
        detail: dict[str, Any] | None = None,
        fence: Any = None,
    ) -> None:
        """Durably record that effect `seq` of `run_id` is about to start (before it runs).

        `detail` holds whatever the runtime needs to judge it later (policy decision, idempotent, line).
        Recording the same intent again is allowed while it has no result (a resumed run retrying it);
        once a result is journaled the entry is final and StoreError is raised. `fence` (a run of a job:
        dal.receipts.jobs.Fence) is checked in the same transaction; a worker that lost the job's lease
        gets jobs.Fenced and nothing is written.
        """
        with self._write(f"journaling effect {seq} of {run_id}") as c:
            if fence is not None:
                _check_fence(c, fence)
            self._not_continued(c, run_id, seq)
            cur = c.execute(
                "INSERT INTO effects (run_id, seq, command, class, status, intent_at, detail)"
                " VALUES (?, ?, ?, ?, 'intent', ?, ?)"
                " ON CONFLICT (run_id, seq) DO UPDATE SET command = excluded.command, class = excluded.class,"
                " intent_at = excluded.intent_at, detail = excluded.detail WHERE effects.result IS NULL",
                (
                    run_id,
                    seq,
                    command,
                    effect_class,
                    utc_timestamp(),
                    None if detail is None else _dumps(detail),
                ),
            )
            if cur.rowcount == 0:
                raise StoreError(
                    f"effect {seq} of run {run_id} already has a journaled result; it is final.", self.path
                )

    def journal_result(self, run_id: str, seq: int, result_json: Any, *, status: str | None = None) -> None:
        """Durably record the result of effect `seq` (after it ended). `status` defaults to
        `result_json["status"]` when that is a map with one, else `done`."""
        if status is None:
            status = result_json.get("status") if isinstance(result_json, dict) else None
            status = status if isinstance(status, str) else "done"
        with self._write(f"journaling the result of effect {seq} of {run_id}") as c:
            cur = c.execute(
                "UPDATE effects SET result = ?, status = ?, result_at = ? WHERE run_id = ? AND seq = ?",
                (_dumps(pack_result(result_json)), status, utc_timestamp(), run_id, seq),
            )
            if cur.rowcount == 0:
                raise StoreError(
                    f"no intent journaled for effect {seq} of run {run_id}; record the intent first.",
                    self.path,
                )

    def journal(self, run_id: str) -> list[dict[str, Any]]:
        """The journal of a run in sequence order: seq, command, class, status (`intent` while the outcome
        is unknown), intent_at, result_at, detail, result (parsed JSON, or None without a result)."""

        def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
            if not self._has_tables(c):
                return []
            rows = c.execute(
                "SELECT seq, command, class, status, intent_at, result_at, detail, result FROM effects"
                " WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
            return [
                {
                    "seq": seq,
                    "command": command,
                    "class": cls,
                    "status": status,
                    "intent_at": intent_at,
                    "result_at": result_at,
                    "detail": None if detail is None else json.loads(detail),
                    "result": None if result is None else unpack_result(json.loads(result)),
                }
                for seq, command, cls, status, intent_at, result_at, detail, result in rows
            ]

        return self._read(f"reading the journal of {run_id}", read)

    def journal_hold(
        self,
        run_id: str,
        seq: int,
        command: str,
        effect_class: str | None,
        *,
        detail: dict[str, Any] | None = None,
        decided_in: Iterable[str] = (),
        kinds: Iterable[str] = (),
        after: int = 0,
        fence: Any = None,
        act: Callable[[dict[str, Any]], tuple[dict[str, Any], Any] | None] | None = None,
        result: Any = None,
    ) -> dict[str, Any] | None:
        """Effect `seq` needs a person's decision (an approval, or what happened to an effect of unknown
        outcome). In one transaction: the newest decision of one of `kinds` about effect `seq` of
        `command` (or of no recorded command: decisions stored before they kept one) recorded for any run in
        `decided_in` with an id above `after`, as approvals() gives it; when there is one, the journal entry
        that acts on it, `act(row)` -> (detail, result or None), is journaled for `run_id` (nothing when
        `act` is None or returns None); when there is none, the hold (`detail`, with `result` when that is
        not None: a replayed result the person may still ask to run again) is journaled and None is returned.

        A decision recorded at the same moment is therefore either acted on here or recorded after the
        hold is journaled, never lost in between, and the decision acted on is the newest one at the gate,
        not one read earlier: the runner's check at a gate and `dal approve` cannot pass each other."""
        runs, wanted = list(dict.fromkeys(decided_in)), list(dict.fromkeys(kinds))
        with self._write(f"journaling effect {seq} of {run_id}") as c:
            if fence is not None:
                _check_fence(c, fence)
            if runs and wanted:
                cur = c.execute(
                    "SELECT id, run_id, seq, decision, who, at, note FROM approvals"
                    f" WHERE run_id IN ({', '.join('?' * len(runs))}) AND seq = ?"
                    f" AND decision IN ({', '.join('?' * len(wanted))}) AND id > ?"
                    " AND (command IS NULL OR command = ?) ORDER BY id DESC LIMIT 1",
                    (*runs, seq, *wanted, after, command),
                )
                row = cur.fetchone()
                if row is not None:
                    found = dict(zip([d[0] for d in cur.description], row, strict=True))
                    entry = act(found) if act is not None else None
                    if entry is not None:
                        self._put_entry(c, run_id, seq, command, effect_class, entry[0], entry[1])
                    return found
            self._put_entry(c, run_id, seq, command, effect_class, detail, result)
        return None

    def _put_entry(self, c: sqlite3.Connection, run_id: str, seq: int, command: str, effect_class: str | None,
                   detail: dict[str, Any] | None, result: Any) -> None:
        """An intent (and its result, when not None) inside the caller's transaction."""
        self._not_continued(c, run_id, seq)
        cur = c.execute(
            "INSERT INTO effects (run_id, seq, command, class, status, intent_at, detail)"
            " VALUES (?, ?, ?, ?, 'intent', ?, ?)"
            " ON CONFLICT (run_id, seq) DO UPDATE SET command = excluded.command, class = excluded.class,"
            " intent_at = excluded.intent_at, detail = excluded.detail WHERE effects.result IS NULL",
            (run_id, seq, command, effect_class, utc_timestamp(), None if detail is None else _dumps(detail)),
        )
        if cur.rowcount == 0:
            raise StoreError(f"effect {seq} of run {run_id} already has a journaled result; it is final.", self.path)
        if result is not None:
            status = result.get("status") if isinstance(result, dict) else None
            c.execute(
                "UPDATE effects SET result = ?, status = ?, result_at = ? WHERE run_id = ? AND seq = ?",
                (_dumps(result), status if isinstance(status, str) else "done", utc_timestamp(), run_id, seq),
            )

    def _not_continued(self, c: sqlite3.Connection, run_id: str, seq: int) -> None:
        """Continued (nothing written) when another run continues `run_id`: a run judged dead while it lived on
        starts no effect after its successor was recorded, which reads the journal only after that (writes are
        serialized, so this check and the successor's record cannot pass each other)."""
        later = c.execute("SELECT run_id FROM runs WHERE previous_run = ? LIMIT 1", (run_id,)).fetchone()
        if later is not None:
            raise continued_error(run_id, seq, later[0], self.path)

    def lineage(self, run_id: str, *, limit: int = 10_000) -> list[dict[str, Any]]:
        """`run_id` and the runs it continues, newest first, following `previous_run`: each as run_id,
        previous_run, status, key, pid and the parsed `policy`. Ends at a run with no previous run, at a
        previous run the store does not hold, or after `limit` runs. One query, however long the chain.
        (Each row also has `pid_start` and `boot_id`, as run_row() gives them.)"""
        ident = ("runs.pid_start, runs.boot_id" if (self._schema or 0) >= 2
                 else "NULL AS pid_start, NULL AS boot_id")

        def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
            if not self._has_tables(c):
                return []
            cur = c.execute(
                "WITH RECURSIVE chain(run_id, depth) AS (SELECT ?, 0 UNION ALL"
                " SELECT r.previous_run, chain.depth + 1 FROM runs r JOIN chain ON r.run_id = chain.run_id"
                " WHERE r.previous_run IS NOT NULL AND chain.depth + 1 < ?)"
                f" SELECT runs.run_id, runs.previous_run, runs.status, runs.key, runs.pid, {ident}, runs.policy"
                " FROM chain JOIN runs ON runs.run_id = chain.run_id ORDER BY chain.depth",
                (run_id, max(1, int(limit))),
            )
            names = [d[0] for d in cur.description]
            out = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
            for row in out:
                row["policy"] = json.loads(row["policy"]) if row["policy"] else None
            return out

        return self._read(f"reading the runs before {run_id}", read)

    # -- approvals -----------------------------------------------------------------------------------

    def record_approval(
        self, run_id: str, seq: int | None, decision: str, *, who: str | None = None, note: str | None = None,
        command: str | None = None, unless_acted_by: str | None = None,
    ) -> dict[str, Any]:
        """Durably record a person's decision about effect `seq` of a run (e.g. `approve`, `deny`, or a
        resolution `done`/`failed`/`retry`) and return the stored row. `command`: the command the person
        decided about; the decision applies to no other (see journal_hold).

        `unless_acted_by`: a run that may be at the effect right now. If its journal shows it already
        acted on a decision about effect `seq` (it is executing it, or did), nothing is recorded and
        DecisionTooLate is raised, in the same transaction, so the check and the record cannot be passed."""
        row = {
            "run_id": run_id,
            "seq": seq,
            "decision": decision,
            "who": who or decider(),
            "at": utc_timestamp(),
            "note": note,
        }
        with self._write(f"recording a decision for {run_id}") as c:
            if unless_acted_by is not None:
                got = c.execute("SELECT detail, result FROM effects WHERE run_id = ? AND seq = ?",
                                (unless_acted_by, seq)).fetchone()
                detail = json.loads(got[0]) if got is not None and got[0] else {}
                if got is not None and "decision" in detail and not (detail.get("pending") or detail.get("uncertain")):
                    raise DecisionTooLate(
                        f"run {unless_acted_by} already acted on an earlier decision about effect {seq} "
                        + ("and recorded its result" if got[1] is not None else "and is executing it now"),
                        self.path, unless_acted_by, got[1] is not None)
            cur = c.execute(
                "INSERT INTO approvals (run_id, seq, decision, who, at, note, command) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, seq, decision, row["who"], row["at"], note, command),
            )
            row["id"] = cur.lastrowid
        return row

    def approvals(self, run_id: str) -> list[dict[str, Any]]:
        """Decisions recorded for a run, oldest first (with the command each was about; None for decisions
        stored before decisions kept it)."""

        def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
            if not self._has_tables(c):
                return []
            command = "command" if (self._schema or 0) >= 4 else "NULL AS command"
            cur = c.execute(
                f"SELECT id, run_id, seq, decision, who, at, note, {command} FROM approvals WHERE run_id = ?"
                " ORDER BY id",
                (run_id,),
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

        return self._read(f"reading decisions for {run_id}", read)

    # -- queries and the operation lock (the store contract: dal/receipts/contract.py) ---------------

    def newest_run_of_key(self, key: str,
                          visible: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any] | None:
        """The newest run of `key` that decides what its next invocation does (dal/receipts/queries.py)."""
        from dal.receipts.queries import newest_run_of_key

        return newest_run_of_key(self, key, visible)

    def find_run(self, ref: str) -> dict[str, Any]:
        """The run `ref` names, as run_row() gives it, receipt or not (dal/receipts/queries.py)."""
        from dal.receipts.queries import find_run

        return find_run(self, ref)

    def operation_lock(self, key: str) -> KeyLock:
        """The exclusive lock of operation `key` (a flock file in `locks/` beside the store file with every
        symlink resolved, so every path to one store agrees on it; released by the kernel when its holder
        exits, kill -9 included). Raises OSError when the folder cannot be made."""
        from dal.receipts.location import locks_folder
        from dal.receipts.oplock import KeyLock

        return KeyLock(locks_folder(self.path), key)

    def key_holder(self, key: str) -> dict[str, Any] | None:
        """Who holds the key's lock right now (pid, run_id); None when no process does (contract.RunStore)."""
        from dal.receipts.location import locks_folder
        from dal.receipts.oplock import held_by

        return held_by(locks_folder(self.path), key)

    def lost_key_holder(self, key: str) -> dict[str, Any] | None:
        """None: a flock goes only with its holder's exit, so no holder lost it while living on."""
        return None

    def locks_where(self) -> str:
        """Where the operation locks are, for messages."""
        from dal.receipts.location import locks_folder

        return str(locks_folder(self.path))

    def jobs(self) -> JobQueue:
        """The job queue in this store, over this connection."""
        from dal.receipts.jobs import JobQueue

        return JobQueue.of(self)


def _check_fence(conn: sqlite3.Connection, fence: Any) -> None:
    from dal.receipts.jobs import check_fence  # only a run of a job pays for the queue's module

    check_fence(conn, fence)


def _opt_utf8(text: Any) -> Any:
    """A text column: a lone surrogate (a DAL string may hold one) written as its `\\uXXXX` escape."""
    return _utf8(text) if isinstance(text, str) else text
