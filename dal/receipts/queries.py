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


def key_by_script(row: dict[str, Any] | None) -> bool:
    """Whether the run's key was chosen by its script (operation("K") with no key from the operator)."""
    return ((row or {}).get("policy") or {}).get("key_by") == "script"


def script_of(row: dict[str, Any] | None) -> str | None:
    """The absolute path of the script the run ran (None for a row stored before specs existed)."""
    spec = ((row or {}).get("policy") or {}).get("spec")
    script = spec.get("script") if isinstance(spec, dict) else None
    return script if isinstance(script, str) else None


def script_sha256_of(row: dict[str, Any] | None) -> str | None:
    """The SHA-256 of the script text the run ran, or None (a row stored before specs existed)."""
    data = (row or {}).get("policy") or {}
    sha = data.get("sha256") if "spec" in data else None
    return sha if isinstance(sha, str) else None


def _same_script(row: dict[str, Any] | None, other: dict[str, Any] | None) -> bool:
    """The same script: by its resolved path, or by its text when reached by another path (the runner's
    `_visible` asks the same, docs/policy.md "No squatting")."""
    import os

    mine, theirs = script_of(row), script_of(other)
    if mine is None or theirs is None or os.path.realpath(mine) == os.path.realpath(theirs):
        return True
    sha = script_sha256_of(row)
    return sha is not None and sha == script_sha256_of(other)


def same_operation(row: dict[str, Any] | None, other: dict[str, Any] | None) -> bool:
    """Whether `other`, a run of the same key as `row` (both run_row()s), belongs to `row`'s operation: runs
    the operator keyed are one operation, and a key a script chose names an operation of that script
    only (docs/policy.md, "No squatting")."""
    if not key_by_script(row) and not key_by_script(other):
        return True
    return _same_script(row, other)


SQUAT_SCAN = 200  # the newest runs of a key looked at for another script's operation of the same key


def operations_of_key(store: RunStore, key: str) -> dict[str, list[dict[str, Any]]]:
    """The runs of `key` (the newest SQUAT_SCAN, rejected ones left out) by the operation they belong to,
    named by its script: runs keyed by the operator (`--key`, a job, the API) are one operation whatever
    their script, together with the runs whose script chose the key in one of those scripts; each other
    script that chose the key with operation("K") is an operation of its own (docs/policy.md, "No
    squatting"). Newest first within each."""
    rows = [store.run_row(r["run_id"]) or r for r in store.runs_of_key(key, limit=SQUAT_SCAN)
            if r["status"] != "rejected"]
    groups: list[tuple[str, list[dict[str, Any]]]] = []  # (name, runs); the operator's first when any
    operator = [r for r in rows if not key_by_script(r)]
    if operator:
        groups.append(("the operator's --key", operator))
    for r in rows:
        if not key_by_script(r):
            continue
        home = next((g for g in groups if any(_same_script(r, o) for o in g[1])), None)
        if home is None:
            groups.append((script_of(r) or "a script", [r]))
        else:
            home[1].append(r)
    return {name: sorted(runs, key=rows.index) for name, runs in groups}


def unambiguous_key(store: RunStore, key: str) -> None:
    """Raise AmbiguousKey when `key` names runs of more than one operation: a deciding or continuing command
    (`dal approve/deny/resolve/resume/receipt show K`) must not pick the newest of them, which may be a
    squatting script's."""
    from dal.core.shellword import sh_quote
    from dal.receipts.store import AmbiguousKey

    ops = operations_of_key(store, key)
    if len(ops) < 2:
        return
    shown = "; ".join(f"{name}: {rows[0]['run_id']} ({rows[0]['status']})" for name, rows in ops.items())
    raise AmbiguousKey(
        f"{key!r} names runs of {len(ops)} scripts: name the run ({shown}). A script chose this key with "
        f"operation(...); list them with `dal receipts --key {sh_quote(key)}`", getattr(store, "path", None))


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
        unambiguous_key(store, ref)
        newest = newest_run_of_key(store, ref)
        if newest is not None:
            return store.run_row(newest["run_id"]) or newest
    receipt = store.find(ref)
    return store.run_row(receipt["run_id"]) or receipt
