"""The one place a run receipt (`dal.receipt/v1`, dal/receipts/schema/receipt-v1.json) and an effect item
are put together. Finished, rejected, skipped and resumed runs (dal/runner/finish.py), runs rebuilt from
the journal after their process died (dal/runner/deadrun.py), REPL sessions (dal/repl/wiring.py) and effect
handlers (dal/runner/effects.py) all call these two functions, so every receipt has the same keys in the
same order; what each key holds is decided by the caller."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dal.core.digest import sha256
from dal.core.readbelow import open_below, root_of

SCHEMA = "dal.receipt/v1"

_OMIT: Any = object()  # a key some receipts do not have (slept_ms, policy, sandbox, args, rerun, output)
# A text in a receipt (an effect's summary, a loop's evidence, a command) longer than this is cut there:
# receipts are for people, and the journal keeps each output whole (docs/receipts.md).
RECEIPT_TEXT_LIMIT = 8192


def effect_item(
    *,
    seq: int,
    command: str,
    status: str,
    effect_class: str | None,
    code: int | None,
    summary: str,
    reason: str | None,
    reads: list[str],
    writes: list[str],
    programs: list[str],
    duration_ms: float,
    line: int,
    column: int,
    loop_iteration: int | None,
    replayed: bool,
) -> dict[str, Any]:
    """One entry of `effects.items`: a run() call, how it was decided and how it ended."""
    return {
        "seq": seq,
        "command": command,
        "status": status,
        "class": effect_class,
        "code": code,
        "summary": summary,
        "reason": reason,
        "reads": reads,
        "writes": writes,
        "programs": programs,
        "duration_ms": duration_ms,
        "line": line,
        "column": column,
        "loop_iteration": loop_iteration,
        "replayed": replayed,
    }


def unjournaled_item(item: dict[str, Any]) -> dict[str, Any]:
    """The item of an effect that ran but whose result the store refused: its outcome is unknown to the
    journal, so the receipt says what the next attempt will see."""
    return {**item, "status": "uncertain", "summary": "outcome unknown",
            "reason": f"{item['reason']}; it ran ({item['summary']}), but its result was not journaled"}


def run_receipt(
    *,
    run_id: str,
    operation: str,
    key: str | None,
    script_path: str,
    script_sha256: str,
    workspace: str,
    status: str,
    attempted_at: str,
    finished_at: str,
    duration_ms: float,
    steps_used: int,
    steps_budget: int,
    effects_count: int,
    effects_budget: int | None,
    items: list[dict[str, Any]],
    omitted: int,
    artifacts: list[dict[str, Any]],
    external_effect: str,
    retry: str,
    blocker: str | None,
    error: dict[str, Any] | None,
    result: Any,
    loops: list[dict[str, Any]],
    attempts: dict[str, int] | None,
    previous_run: str | None,
    skipped_of: str | None,
    loops_omitted: int = 0,
    slept_ms: float = _OMIT,
    policy: dict[str, Any] | None = _OMIT,
    sandbox: dict[str, Any] | None = _OMIT,
    args: dict[str, Any] = _OMIT,
    rerun: str = _OMIT,
    undelivered: str = _OMIT,
    continued_by: str = _OMIT,
) -> dict[str, Any]:
    """A run receipt from a run's facts. `slept_ms`, `policy`, `sandbox`, `args` (the script's arguments),
    `rerun`, `undelivered` (the script's output its reader never got: `output.undelivered`) and `continued_by`
    (the run that continued this one's operation while it still ran) are left out when not given (a receipt
    rebuilt from the journal knows no sandbox; a REPL session has no command line). Every text longer than
    RECEIPT_TEXT_LIMIT is cut there, saying how much was cut."""
    receipt: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": run_id,
        "operation": operation,
        "key": key,
        "script": {"path": script_path, "sha256": script_sha256},
        "workspace": workspace,
        "status": status,
        "attempted_at": attempted_at,
        "finished_at": finished_at,
        "duration_ms": duration_ms,
    }
    if slept_ms is not _OMIT:
        receipt["slept_ms"] = slept_ms  # time, not effects: sleep() waited this long
    receipt.update({
        "steps": {"used": steps_used, "budget": steps_budget},
        "effects": {"count": effects_count, "budget": effects_budget, "items": items, "omitted": omitted},
        "artifacts": artifacts,
        "external_effect": external_effect,
        "retry": retry,
        "blocker": blocker,
        "error": error,
        "result": result,
        "loops": loops,
        "loops_omitted": loops_omitted,
        "attempts": attempts,
        "previous_run": previous_run,
        "skipped_of": skipped_of,
    })
    if continued_by is not _OMIT:
        receipt["continued_by"] = continued_by
    for name, value in (("policy", policy), ("sandbox", sandbox), ("args", args), ("rerun", rerun)):
        if value is not _OMIT:
            receipt[name] = value
    if undelivered is not _OMIT:
        receipt["output"] = {"undelivered": undelivered}
    return bounded(receipt)


def bounded(value: Any) -> Any:
    """`value` (a receipt) with every text longer than RECEIPT_TEXT_LIMIT cut there, saying how much."""
    if isinstance(value, str):
        if len(value) <= RECEIPT_TEXT_LIMIT:
            return value
        return value[:RECEIPT_TEXT_LIMIT] + f"… ({len(value) - RECEIPT_TEXT_LIMIT:,} more characters not kept here)"
    if isinstance(value, dict):
        return {k: bounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [bounded(v) for v in value]
    return value


_SHA_LIMIT = 64 * 1024 * 1024


def artifact_of(workspace: Path, rel: str, roots: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a path the run wrote holds now, for the receipt. The script's programs may have put a symlink
    out (or a FIFO) in its place, and the receipt reaches the agent: so the file is opened once, by
    descriptor, below the workspace or the write root it is in (dal/core/readbelow.py), its size and digest
    taken from that descriptor; a name that leads out, is not a regular file or has other links is reported
    as existing, with neither. A path below none of them is not opened at all."""
    p = Path(rel)
    full = p if p.is_absolute() else workspace / p
    below = root_of(full, (str(workspace), *roots))
    if below is None:
        return {"path": rel, "state": "exists" if os.path.lexists(full) else "missing", "size": None, "sha256": None}
    try:
        fd = open_below(*below)
    except (FileNotFoundError, NotADirectoryError):
        return {"path": rel, "state": "missing", "size": None, "sha256": None}
    except OSError:  # a folder, a link out, a FIFO, another hard link, a loop: it exists, and is not read
        return {"path": rel, "state": "exists", "size": None, "sha256": None}
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        digest = None
        if size <= _SHA_LIMIT:
            h = sha256()
            try:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
                digest = h.hexdigest()
            except OSError:
                digest = None
    return {"path": rel, "state": "exists", "size": size, "sha256": digest}

