"""The store contract: the operations the runner, the CLI, the API, `dal test` and the worker ask of a run
store, as typed protocols. The SQLite store (dal/receipts/store.py, `Store`) is the first implementation;
a PostgreSQL store implements the same protocols and passes the same contract tests
(tests/receipts/store_contract.py, with a fixture parametrized over store factories).

What every implementation promises (the contract tests check each):
- runs: `begin_run` records a run before it executes (status `running`, once per run id);
  `save_receipt` ends it (or records a run that never began); `list_runs` and `runs_of_key` are newest
  first in the order the store recorded the runs (not their ids' clock; `latest` is the last recorded); `find`
  and `find_run` name a run by id, unique id prefix, key or operation (its newest run) or `latest`,
  raising RunNotFound (a StoreError) otherwise; `lineage` follows `previous_run` newest first;
  `run_row` gives a run's row, receipt or not, with `resumed_by` (the run that continued it).
- the journal: an intent is recorded before its effect starts and may be recorded again while it has no
  result; a result makes the entry final (StoreError on a second intent); `journal_hold` returns a
  matching decision or journals the hold, in one transaction, so a decision is never lost between the
  two. An intent (or hold) of a run that another run already continues (its `previous_run`) is refused,
  `Continued`, nothing written: a run judged dead while it lived on starts no effect once its successor is
  recorded, and the successor reads the journal only after that. A result is never refused.
- decisions: `record_approval` returns the stored row with an id that grows; `approvals` is oldest first.
- the operation lock: `operation_lock(key)` excludes a second holder of the same key in any process
  until the first releases it or exits (kill -9 included); other keys are independent. `acquire`
  raises KeyBusy (dal/receipts/oplock.py) naming the holder.
  `key_holder(key)` says who holds it now (its run_id, pid), by any process on any host the store serves,
  or None: what tells a live run on another machine from a dead one (a pid says nothing across hosts).
  A lock that can be lost while its holder lives on (a PostgreSQL session that ended) says so: the lock's
  `lost_holder` after `acquire` is the holder before it that never let go, and `lost_key_holder(key)` is that
  holder while no one holds the key; a lock only its holder's exit releases (a flock) has neither (None).
- jobs (`jobs()`): the queue the worker and `dal submit` use; a key has at most one open job, a job is
  claimed by one worker at a time, and a worker whose lease was taken over is fenced.

Store errors are StoreError (dal/receipts/store.py) with a message that names the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

Row = dict[str, Any]


class OperationLock(Protocol):
    """The exclusive lock of one operation key. `lost_holder`, once acquired: the previous holder when its
    lock went without its letting go (its run_id, pid, host and `holder`: where it ran), else None."""

    lost_holder: Row | None

    def acquire(self, run_id: str, wait: float | None = None) -> None:
        """Take the lock for `run_id`, waiting up to `wait` seconds; raise KeyBusy naming the holder."""
        ...

    def release(self) -> None: ...


class JobStore(Protocol):
    """The job queue (dal/receipts/jobs.py, `JobQueue`): what `dal submit`, `dal jobs`, `dal worker` and
    decisions use. `fence` values are jobs.Fence (job id, lease epoch, owner)."""

    def clock(self) -> float:
        """The time that decides what is due (scheduled jobs, schedules' slots, backoffs): the database's for a
        shared store, so that every worker agrees whatever its own clock says."""
        ...

    def open_job(self, key: str) -> Row | None: ...

    def submit(self, *, spec: dict[str, Any], key: str | None, queue: str, priority: int, run_at: float,
               max_attempts: int, host: str, movable: bool, schedule: str | None = None,
               now: float | None = None) -> tuple[Row, bool]:
        """Add a job; (the job, True), or (the key's open job, False) when it has one already."""
        ...

    def get(self, job_id: int) -> Row | None: ...

    def list(self, *, state: str | None = None, queue: str | None = None, key: str | None = None,
             limit: int | None = 100) -> list[Row]: ...

    def counts(self) -> dict[str, int]: ...

    def counts_by_queue(self) -> dict[tuple[str, str], int]:
        """How many jobs are in each (state, queue): the worker's metrics."""
        ...

    def claim(self, *, owner: str, queues: Sequence[str], host: str, lease: float,
              now: float | None = None) -> Row | None: ...

    def claim_some(self, *, owner: str, queues: Sequence[str], host: str, lease: float, limit: int,
                   now: float | None = None) -> list[Row]:
        """Up to `limit` jobs claimed as claim() claims one, in one transaction, best first; claim() is
        claim_some with a limit of one."""
        ...

    def heartbeat(self, fence: Any, lease: float, now: float | None = None) -> bool: ...

    def set_holder(self, fence: Any, holder: dict[str, Any]) -> bool: ...

    def route(self, fence: Any, event: str, *, run_at: float | None = None, failures: int | None = None,
              streak: int | None = None, run: Row | None = None, waits_on: Sequence[int] = (),
              note: str | None = None, now: float | None = None) -> str | None: ...

    def wake_key(self, key: str, now: float | None = None) -> int: ...

    def sweep_waiting(self, now: float | None = None) -> int: ...

    def retry(self, job_id: int, now: float | None = None, note: str = ...) -> Row: ...

    def cancel(self, job_id: int, now: float | None = None, note: str = ...) -> Row: ...


class RunStore(Protocol):
    """A run store: runs and their receipts, the effect journal, decisions, the operation lock, jobs.
    `path` names it in messages (a file's path, or a database's URL without its password)."""

    path: Any
    readonly: bool

    # -- runs ------------------------------------------------------------------------------------------

    def begin_run(self, run_id: str, *, operation: str, key: str | None = None, script_path: str | None = None,
                  started_at: str | None = None, previous_run: str | None = None, pid: int | None = None,
                  policy: Any = None, fence: Any = None) -> None:
        """`fence` (a worker's run of a job): the same transaction records the run's process (pid, start
        time, boot id, fence.owner) as the job's holder while the job still runs under that fence, and
        writes no holder (raising nothing) when it does not."""
        ...

    def save_receipt(self, receipt: dict[str, Any], *, validate: bool | None = None) -> None: ...

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """The receipt of a run that ended, or None."""
        ...

    def run_row(self, run_id: str) -> Row | None:
        """A run's row, ended or not, with `resumed_by`, `pid` and the stored `policy`."""
        ...

    def run_ids_with_prefix(self, prefix: str, limit: int = 6) -> list[str]: ...

    def find(self, ref: str) -> dict[str, Any]:
        """The receipt `ref` names (run id, unique prefix, key or operation, `latest`); RunNotFound."""
        ...

    def find_run(self, ref: str) -> Row:
        """The run `ref` names, as run_row() gives it, receipt or not; RunNotFound."""
        ...

    def runs_of_key(self, key: str, *, limit: int | None = 20) -> list[Row]:
        """The runs of `key`, newest first in the order the store recorded them (not by run id)."""
        ...

    def newest_run_of_key(self, key: str, visible: Callable[[Row], bool] | None = None) -> Row | None:
        """The run of `key` that decides what its next invocation does (rejected runs do not count; with
        `visible`, given a run_row(), only runs it accepts)."""
        ...

    def list_runs(self, *, status: str | None = None, operation: str | None = None, key: str | None = None,
                  waiting: bool = False, limit: int | None = 50, retry: str | None = None) -> list[Row]:
        """Runs newest first, in the order the store recorded them; `retry`: of that retry class only."""
        ...

    def policy_files(self, workspace: str) -> list[str]:
        """The policy files (absolute paths) runs in `workspace` started under, each once: every run protects
        them, so that no run rewrites the file another operation of the workspace runs under."""
        ...

    def count_runs(self, *, status: str | None = None, operation: str | None = None, key: str | None = None,
                   waiting: bool = False, retry: str | None = None) -> int: ...

    def lineage(self, run_id: str, *, limit: int = 10_000) -> list[Row]:
        """`run_id` and the runs it continues, newest first."""
        ...

    def loops(self, run_id: str) -> list[dict[str, Any]]: ...

    # -- the effect journal --------------------------------------------------------------------------

    def journal_intent(self, run_id: str, seq: int, command: str, effect_class: str | None, *,
                       detail: dict[str, Any] | None = None, fence: Any = None) -> None: ...

    def journal_result(self, run_id: str, seq: int, result_json: Any, *, status: str | None = None) -> None: ...

    def journal(self, run_id: str) -> list[Row]: ...

    def journal_hold(self, run_id: str, seq: int, command: str, effect_class: str | None, *,
                     detail: dict[str, Any] | None = None, decided_in: Iterable[str] = (),
                     kinds: Iterable[str] = (), after: int = 0, fence: Any = None,
                     act: Callable[[Row], tuple[dict[str, Any], Any] | None] | None = None,
                     result: Any = None) -> Row | None:
        """The newest decision of `kinds` about effect `seq` recorded for a run in `decided_in` (id above
        `after`), with the entry `act(decision)` gives journaled; or, when there is none, the hold (`detail`,
        and `result` when not None) journaled and None returned: one transaction."""
        ...

    def set_synchronous(self, level: str) -> None:
        """How durably the next writes commit: NORMAL, or FULL (on disk before the write returns)."""
        ...

    # -- decisions -----------------------------------------------------------------------------------

    def record_approval(self, run_id: str, seq: int | None, decision: str, *, who: str | None = None,
                        note: str | None = None, command: str | None = None,
                        unless_acted_by: str | None = None) -> Row:
        """`command`: the command decided about (the decision applies to no other); `unless_acted_by`: a run
        that may be at the effect now; DecisionTooLate, nothing recorded, when it already acted on a decision."""
        ...

    def approvals(self, run_id: str) -> list[Row]: ...

    # -- the operation lock and the queue ------------------------------------------------------------

    def operation_lock(self, key: str) -> OperationLock: ...

    def key_holder(self, key: str) -> Row | None:
        """Who holds `key`'s operation lock right now (`run_id`, `pid`; `host` where the store spans hosts),
        or None when no one does. Read without taking the lock."""
        ...

    def lost_key_holder(self, key: str) -> Row | None:
        """The key's last holder when its lock went without its letting go and no one holds it now (run_id, pid,
        host and where it ran); None otherwise, and always for a lock only its holder's exit releases."""
        ...

    def locks_where(self) -> str:
        """Where the operation locks are, for messages."""
        ...

    def jobs(self) -> JobStore: ...

    def free_reserve(self) -> bool:
        """Give back the room kept to record a run's end on a full disk; True when there was some."""
        ...

    def close(self) -> None: ...
