"""The run store's errors, the same for every backend (SQLite: dal/receipts/store.py; PostgreSQL:
dal/receipts/pg/): each says what is wrong with which store and what to do, and names the store by its `path`
(a file, or a database's URL without its password)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class StoreError(Exception):
    """A problem with the run store that the user can act on; the message says which file and what to do."""

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        super().__init__(message)
        # A database server's store is named by its URL (without a password), which a Path would mangle.
        self.path: Any = path if isinstance(path, str) and "://" in path else Path(path) if path is not None else None


class NoStore(StoreError):
    """No store exists yet at the path (so there are no runs to show)."""


class RunNotFound(StoreError, LookupError):
    """No run in the store matches the reference."""


class AmbiguousKey(RunNotFound):
    """A key names runs of more than one operation (a script chose another's key): name the run
    (dal/receipts/queries.py, unambiguous_key)."""


class StoreDamaged(StoreError):
    """The store file is damaged (or is not a store DAL can use as it is); it was not written. The message
    says what is wrong and how to recover it."""


class StoreLocked(StoreError):
    """Another process held the store's write lock for longer than the busy timeout."""


class StoreGone(StoreError):
    """The store file was deleted or replaced while a writer had it open (see Store._still_there)."""


class LockLost(StoreError):
    """An intent of a run that no longer holds its key's lock (the PostgreSQL lock's session ended): nothing
    was written and the effect does not start (dal/receipts/pg/lock.py)."""


class Continued(StoreError):
    """An intent of a run that another run already continues (its `previous_run`): the other run judged this
    one dead (its process looked gone from where that run started: another machine, another pid namespace)
    or took its key's lock after this one lost it. Nothing was written and the effect does not start; `by` is
    the run that continues it."""

    def __init__(self, message: str, path: Path | str | None, by: str) -> None:
        super().__init__(message, path)
        self.by = by


def continued_error(run_id: str, seq: int, by: str, path: Path | str | None) -> Continued:
    """The refusal of effect `seq` of `run_id`, which run `by` continues (both stores say it alike)."""
    return Continued(
        f"run {by} continued this run's operation while this run still ran (it found this run's process gone, "
        f"or took its key's lock after this run lost it), so this run starts no more effects: effect {seq} of "
        f"run {run_id} was not journaled and does not start; the operation goes on in run {by}", path, by)


class DecisionTooLate(StoreError):
    """record_approval() found that the run at the effect already acted on an earlier decision."""

    def __init__(self, message: str, path: Path | str | None, run_id: str, finished: bool) -> None:
        super().__init__(message, path)
        self.run_id = run_id
        self.finished = finished


class RunContinued(StoreError):
    """begin_run() of a run that continues `previous_run`, which another run already continues: two
    runners of one operation at once (nothing was recorded). `by` is the run that continues it."""

    def __init__(self, message: str, path: Path | str | None, by: str) -> None:
        super().__init__(message, path)
        self.by = by


class IllegalTransition(StoreError):
    """The job is not in a state that event may leave from; the message names the job and its state."""


class Fenced(StoreError):
    """A journal write on behalf of a job whose lease this worker no longer holds: nothing was written."""
