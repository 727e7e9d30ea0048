"""The operation's journal: what every attempt of one operation journaled, read as one.

The attempts of an operation form a chain: each run names the run it continues (`previous_run`). A chain
starts at a run that began a fresh journal: the first run of a key, or `dal run --new-attempt`; the
attempt kind (`new`, `resume`, `retry`) is stored with each run (dal/runner/stored.py).
Every later attempt — a resume after waiting, interrupted or died; a retry after failed or exhausted —
continues the journal of the whole chain, so an attempt that ends before it reaches the effects the
journal holds (a small budget, an edit that fails early) loses nothing: the next one still finds them.

Reading the chain from its oldest run to its newest, the entry of each sequence number is the newest
one, except that a copy of an earlier result a resume could not finish writing (an intent marked
`replayed` without a result) never hides the result it copies, nor does a hold for a person's word about an
effect of unknown outcome (`uncertain`) hide the result its run recorded after the hold, and an entry a
retry marked `forgotten` (it took another path through reads and idempotent writes) removes the number from
the journal.

Decisions (`dal approve`, `deny`, `resolve`) belong to the operation's effect, not to one run: a
decision recorded for any run of the chain applies to the effect with its number, once. A journal
entry that acted on a decision names it (`detail["decision"]`, the decision's id); a decision whose id is
at or below the highest one named for that effect has been used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from dal.core.records import ValueRecord
from dal.core.sizes import parse_size
from dal.effects import Policy
from dal.effects.policy import LIMIT_DEFAULTS
from dal.receipts.contract import RunStore
from dal.receipts.store import StoreError

NEW, RESUME, RETRY = "new", "resume", "retry"
# The chain is read from the store this many runs at a time; it has no length limit: a journal never
# drops a run, however many attempts ended before their first effect.
CHAIN_PAGE = 1_000


class Prior(ValueRecord):
    """One journaled effect of an earlier attempt of the same operation."""

    __slots__ = ("seq", "command", "effect_class", "idempotent", "result", "kind", "detail", "origin")

    def __init__(
        self,
        seq: int,
        command: str,
        effect_class: str | None,
        idempotent: bool,
        result: dict[str, Any] | None,  # None: intent without result
        kind: str = "effect",  # effect | value (now(), env())
        detail: dict[str, Any] | None = None,
        origin: str = "",  # the run whose journal holds this entry
    ) -> None:
        self.seq = seq
        self.command = command
        self.effect_class = effect_class
        self.idempotent = idempotent
        self.result = result
        self.kind = kind
        self.detail = {} if detail is None else detail
        self.origin = origin

    @property
    def pending(self) -> bool:
        """Journaled as proposed (waiting for approval): it never started."""
        return self.result is None and self.detail.get("pending") == "approval"


def rerunnable(effect_class: str | None, idempotent: bool) -> bool:
    """May an effect whose outcome is unknown simply run again? Reads and idempotent local effects."""
    return effect_class == "read" or (effect_class == "local" and idempotent)


class OperationJournal(ValueRecord):
    """The journal of the chain ending at one run."""

    __slots__ = ("runs", "entries", "consumed", "decisions")

    def __init__(
        self,
        runs: list[str],  # the chain, newest first
        entries: dict[int, Prior],  # seq -> the entry that stands (values have negative numbers)
        consumed: dict[int, int],  # seq -> the highest decision id an entry of that effect acted on
        decisions: dict[int, list[dict[str, Any]]],  # seq -> decisions not yet used, oldest first
    ) -> None:
        self.runs = runs
        self.entries = entries
        self.consumed = consumed
        self.decisions = decisions


def attempt_of(row: dict[str, Any]) -> str | None:
    """The attempt kind a run was stored with; None for runs stored before attempts had kinds."""
    from dal.runner.stored import StoredRun

    return StoredRun.attempt_of(row)


def chain(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """The runs whose journals make up the operation's journal at `run_id`, newest first: back along
    `previous_run` to the run that began the journal. A run stored without a kind continues the one
    before it, which never drops a journaled effect."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    at: str | None = run_id
    while at is not None:
        rows = store.lineage(at, limit=CHAIN_PAGE)
        for row in rows:
            if row["run_id"] in seen:  # a damaged store whose runs continue each other in a circle
                return out
            seen.add(row["run_id"])
            kind = attempt_of(row)
            row["policy"] = None  # only the kind is needed here; a long chain must not hold every spec
            out.append(row)
            if kind == NEW:
                return out
        at = rows[-1]["previous_run"] if len(rows) == CHAIN_PAGE else None
    return out


def _prior(row: dict[str, Any], origin: str) -> Prior:
    detail = row.get("detail") or {}
    return Prior(
        seq=row["seq"],
        command=row["command"],
        effect_class=row.get("class"),
        idempotent=bool(detail.get("idempotent")),
        result=row.get("result"),
        kind=detail.get("kind", "effect"),
        detail=detail,
        origin=origin,
    )


def load(store: RunStore, run_id: str) -> OperationJournal:
    """The operation's journal at `run_id` (which may have no journal of its own yet)."""
    runs = chain(store, run_id)
    ids = [r["run_id"] for r in runs]
    if run_id not in ids:
        ids.insert(0, run_id)
    entries: dict[int, Prior] = {}
    consumed: dict[int, int] = {}
    for rid in reversed(ids):
        for row in store.journal(rid):
            p = _prior(row, rid)
            used = p.detail.get("decision")
            if isinstance(used, int):
                consumed[p.seq] = max(consumed.get(p.seq, 0), used)
            have = entries.get(p.seq)
            if p.detail.get("forgotten") and p.result is None:
                entries.pop(p.seq, None)  # a retry took another path here: the entry left the journal
                continue
            if (p.result is None and (p.detail.get("replayed") or p.detail.get("uncertain")) and have is not None
                    and have.result is not None and have.command == p.command):
                # A copy whose result was never written: the result it copies stands. Likewise a hold for a
                # person, made while the effect had no result, once the run that was executing it records
                # that result late (it lost its key lock and went on): a resume takes it.
                continue
            entries[p.seq] = p
    decisions: dict[int, list[dict[str, Any]]] = {}
    for rid in ids:
        for row in store.approvals(rid):
            seq = row.get("seq")
            if isinstance(seq, int) and row["id"] > consumed.get(seq, 0):
                decisions.setdefault(seq, []).append(row)
    for rows in decisions.values():
        rows.sort(key=lambda r: r["id"])
    return OperationJournal(ids, entries, consumed, decisions)


def newest_of(store: RunStore, row: dict[str, Any]) -> dict[str, Any]:
    """The newest run of the operation `row` belongs to: for a key, the key's newest run that counts
    (rejected runs do not); without a key, the last run of the chain of runs that continued it."""
    if row.get("key"):
        from dal.receipts.queries import same_operation

        # Of its own operation only: another script may have chosen the same key (docs/policy.md).
        newest = store.newest_run_of_key(row["key"], visible=lambda other: same_operation(row, other))
        if newest is not None:
            return store.run_row(newest["run_id"]) or newest
    seen = {row.get("run_id")}
    while row.get("resumed_by") and row["resumed_by"] not in seen:
        later = store.run_row(row["resumed_by"])
        if later is None:
            break
        seen.add(later["run_id"])
        row = later
    return row


# What one run may journal of command output (stdout and stderr of its effects, copies a resume makes of
# earlier results not counted); past it the next effect does not start and the run stops, resumable.
# --max-stored-output, else DAL_RUN_STORE_LIMIT (bytes, or 512M, 2G), else the policy's [limits]
# max_stored_output set it (docs/durability.md, "How much a run stores").
RUN_STORE_LIMIT = LIMIT_DEFAULTS["max_stored_output"]


STORE_LIMIT_ENV = "DAL_RUN_STORE_LIMIT"


class RunJournal:
    """The store as the effect journal, recording the run itself before the first journal entry.

    The runner's connection commits with synchronous=NORMAL (every commit survives kill -9); an intent
    marked `durable` (an effect that must not run twice: non-idempotent local, external) is committed
    with synchronous=FULL, so that it is on disk before the effect starts, power loss included."""

    takes_durable = True

    def __init__(self, store: RunStore, begin: Callable[[], None], keyed: Callable[[], bool] = lambda: True,
                 fence: Any = None, limit: Callable[[], int] | None = None) -> None:
        self._store = store
        self._begin = begin
        self._keyed = keyed
        self._fence = fence  # a job's lease (dal worker): an intent or hold is written only while it holds
        self._limit = limit or run_store_limit
        self.stored = 0  # bytes of command output this run journaled (not counting copies of earlier results)
        self._copies: set[int] = set()  # effects whose journaled result is a copy a resume makes

    def journal_hold(self, *args: Any, **kw: Any) -> dict[str, Any] | None:
        # A gate's transaction may journal the intent of the effect a person just approved: fsynced.
        self._begin()
        if self._fence is not None:
            kw["fence"] = self._fence
        self._store.set_synchronous("FULL")
        try:
            return self._store.journal_hold(*args, **kw)
        finally:
            self._store.set_synchronous("NORMAL")

    def journal_intent(self, *args: Any, durable: bool = False, **kw: Any) -> None:
        if self._fence is not None:
            kw["fence"] = self._fence
        detail = kw.get("detail") or {}
        if detail.get("replayed"):
            self._copies.add(args[1])
        elif detail.get("kind") != "value" and self.stored > (limit := self._limit()):
            raise StoreError(
                f"this run has journaled {self.stored:,} bytes of command output, more than one run may store "
                f"({limit:,} bytes; --max-stored-output, {STORE_LIMIT_ENV} or [limits] max_stored_output sets it), "
                f"so effect {args[1]} does not start. "
                "Resume the run to go on (a resume journals afresh), or raise the limit", None)
        if self._keyed() or detail.get("kind") != "value":
            # now()/env() before operation("K") must not record the run without its key: a run with no
            # key yet is recorded at its first effect (values journaled before wait under its id).
            self._begin()
        if not durable:
            self._store.journal_intent(*args, **kw)
            return
        self._store.set_synchronous("FULL")
        try:
            self._store.journal_intent(*args, **kw)
        finally:
            self._store.set_synchronous("NORMAL")

    def journal_result(self, *args: Any, **kw: Any) -> None:
        self._store.journal_result(*args, **kw)
        result = args[2] if len(args) > 2 else kw.get("result_json")
        if isinstance(result, dict) and args[1] not in self._copies:
            self.stored += sum(len(result.get(k) or "") for k in ("stdout", "stderr") if isinstance(result.get(k), str))


def run_store_limit(value: int | None = None, policy: Policy | None = None) -> int:
    """The most command output one run journals: `value` (the run's --max-stored-output, stored with it), else
    $DAL_RUN_STORE_LIMIT (a size, dal/core/sizes.py: ValueError naming the variable for one DAL cannot read),
    else the policy in force's `[limits] max_stored_output`, else RUN_STORE_LIMIT."""
    if value:
        return value
    text = os.environ.get(STORE_LIMIT_ENV, "").strip()
    if text:
        try:
            return parse_size(text)
        except ValueError as e:
            raise ValueError(f"{STORE_LIMIT_ENV}={text}: {e}") from None
    return policy.limit("max_stored_output") if policy is not None else RUN_STORE_LIMIT

