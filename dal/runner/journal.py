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

from typing import Any

from dal.core.records import ValueRecord
from dal.receipts.contract import RunStore
from dal.runner.effects import Prior

NEW, RESUME, RETRY = "new", "resume", "retry"
# The chain is read from the store this many runs at a time; it has no length limit: a journal never
# drops a run, however many attempts ended before their first effect.
CHAIN_PAGE = 1_000


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
                # that result late (it lost its key lock and went on: attack10 02): a resume takes it.
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
