"""Questions about runs that the runner, the CLI, the API and the worker ask of a store, answered with the
store contract's primitives (run_row, runs_of_key, run_ids_with_prefix, find), so that every store
implementation answers them the same way. The SQLite store exposes them as its methods
(`Store.newest_run_of_key`, `Store.find_run`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dal.receipts.contract import RunStore


def attempt_of(row: dict[str, Any] | None) -> str | None:
    """The attempt kind stored with a run (new, resume, retry, duplicate, rejected), without reading the
    rest (None for runs stored before attempts had kinds). Never raises: a damaged row has no kind."""
    data = (row or {}).get("policy") or {}
    kind = data.get("attempt") if "spec" in data else (data.get("launch") or {}).get("attempt")
    return kind if isinstance(kind, str) else None


def newest_run_of_key(store: RunStore, key: str,
                      visible: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any] | None:
    """The newest run of `key` that decides what the next invocation does. Runs that executed nothing
    are passed over: a rejected run (a broken script run under a completed key does not reopen it), and
    a duplicate or rejected invocation the store recorded the start of but not the end (it died, or the
    store refused its receipt), which must not read as an operation left half done. `visible` (given a
    `run_row()`): only runs it accepts count."""

    def counts(row: dict[str, Any]) -> bool:
        if row["status"] == "rejected":
            return False
        info: dict[str, Any] = {}
        if row["status"] == "running" or visible is not None:
            info = store.run_row(row["run_id"]) or {}
        if visible is not None and not visible(info):
            return False
        if row["status"] == "running":
            kind = attempt_of(info)
            return kind not in ("duplicate", "rejected")
        return True

    rows = store.runs_of_key(key, limit=20)
    for row in rows:
        if counts(row):
            return row
    if len(rows) == 20:
        for row in store.runs_of_key(key, limit=None):
            if counts(row):
                return row
    return None


def find_run(store: RunStore, ref: str) -> dict[str, Any]:
    """The run `ref` names, as `run_row()` gives it, even one that died before its receipt: a run id
    or a unique prefix, a key or operation (its newest run), or `latest`. Raises RunNotFound."""
    ref = ref.strip()
    if ref.startswith("run_"):
        ids = store.run_ids_with_prefix(ref)
        if ref in ids or len(ids) == 1:
            return store.run_row(ref if ref in ids else ids[0]) or {}
    elif ref == "latest":
        # The newest run, finished or not: the one `dal receipt show latest` shows (one meaning everywhere).
        rows = store.list_runs(limit=1)
        if rows:
            return store.run_row(rows[0]["run_id"]) or rows[0]
    elif ref:
        newest = newest_run_of_key(store, ref)
        if newest is not None:
            return store.run_row(newest["run_id"]) or newest
    receipt = store.find(ref)
    return store.run_row(receipt["run_id"]) or receipt
