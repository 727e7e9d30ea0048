"""The one place a run receipt (`dal.receipt/v1`, dal/receipts/schema/receipt-v1.json) and an effect item
are put together. Finished, rejected, skipped and resumed runs (dal/runner/finish.py), runs rebuilt from
the journal after their process died (`dead_run_receipt`, from dal/runner/deadrun.py), REPL sessions
(dal/repl/wiring.py) and effect handlers (dal/runner/effects.py) all call these functions, so every receipt
has the same keys in the same order; what each key holds is decided by the caller."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dal.core.digest import sha256
from dal.core.readbelow import open_below, root_of
from dal.receipts.ids import utc_timestamp
from dal.receipts.retry import derive_retry

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
    wall: str | None = None,
) -> dict[str, Any]:
    """One entry of `effects.items`: a run() call, how it was decided and how it ended; `wall`, the wall kind
    that held its programs (None for a command that did not run)."""
    item: dict[str, Any] = {
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
        "wall": wall,
        "duration_ms": duration_ms,
        "line": line,
        "column": column,
        "loop_iteration": loop_iteration,
        "replayed": replayed,
    }
    return item


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


def dead_run_receipt(
    prev: dict[str, Any], reached: list[dict[str, Any]], *, workspace: Path, write_roots: tuple[str, ...],
    script_sha256: str | None, steps_budget: int, effects_budget: int | None, policy: dict[str, Any] | None,
    args: dict[str, Any] | None, blocker: str, attempts: dict[str, int] | None,
) -> dict[str, Any]:
    """The receipt of the run `prev` (its row) whose process died before writing one, from the journal
    entries it reached (`reached`, in order, replayed ones marked) and what was stored when it began: each
    effect with its recorded result, or `uncertain` when it started and never reported back. Its status
    is `interrupted`; its step count is not known (the process died with it)."""
    items = []
    for row in reached:
        if row["seq"] <= 0 or (row.get("detail") or {}).get("forgotten") and not row.get("result"):
            continue
        res = row.get("result") or {}
        detail = row.get("detail") or {}
        if res:
            status = res.get("status", "completed")
        elif detail.get("pending") == "approval":
            status = "pending_approval"
        else:
            status = "uncertain"
        items.append(effect_item(
            seq=row["seq"], command=row["command"], status=status,
            effect_class=row.get("class"), code=res.get("code"),
            summary=res.get("summary") or ("outcome unknown" if status == "uncertain" else "not started"),
            reason=res.get("reason") or detail.get("policy"), reads=res.get("reads", []),
            writes=res.get("writes") or detail.get("writes") or [],
            programs=res.get("programs") or detail.get("programs") or [], wall=res.get("wall"),
            duration_ms=res.get("duration_ms", 0.0), line=detail.get("line", 0),
            column=0, loop_iteration=None, replayed=bool(detail.get("replayed")),
        ))
    done = ("completed", "failed", "timeout", "uncertain")
    external = ("uncertain" if any(i["status"] == "uncertain" and i["class"] == "external" for i in items) else
                "performed" if any(i["status"] in ("completed", "failed", "timeout") and i["class"] == "external"
                                   for i in items) else "none")
    return run_receipt(
        run_id=prev["run_id"],
        operation=prev["operation"],
        key=prev.get("key"),
        script_path=prev.get("script_path") or "",
        script_sha256=script_sha256 if isinstance(script_sha256, str) and len(script_sha256) == 64 else "0" * 64,
        workspace=str(workspace),
        status="interrupted",
        attempted_at=prev["started_at"],
        finished_at=utc_timestamp(),
        duration_ms=_journaled_for(prev["started_at"], reached),
        steps_used=0,  # not recorded: the process died with its count (the receipt says so, render.py)
        steps_budget=steps_budget,
        effects_count=len(items),
        effects_budget=effects_budget,
        items=items,
        omitted=0,
        artifacts=[
            artifact_of(workspace, w, write_roots)
            for w in dict.fromkeys(w for i in items if i["status"] in done for w in i["writes"])
        ],
        external_effect=external,
        retry=derive_retry("interrupted", external_effect=external),
        blocker=blocker,
        error=None,
        result=None,
        loops=[],
        attempts=attempts,
        previous_run=prev.get("previous_run"),
        skipped_of=None,
        **({"policy": policy} if policy is not None else {}),
        **({"args": args} if args else {}),
    )


def _journaled_for(started_at: str, rows: list[dict[str, Any]]) -> float:
    """How long the dead run went on at least: from its start to the last entry its journal holds (0 when
    it holds none, or the times cannot be read)."""
    from datetime import datetime

    def at(text: Any) -> datetime | None:
        try:
            return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        except ValueError:
            return None

    start = at(started_at)
    ends = [t for r in rows if not (r.get("detail") or {}).get("replayed")
            for t in (at(r.get("result_at")), at(r.get("intent_at"))) if t is not None]
    if start is None or not ends:
        return 0.0
    return max(0.0, round((max(ends) - start).total_seconds() * 1000, 3))
