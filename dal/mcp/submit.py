"""`submit`: a job on the queue, as `dal submit` records one (docs/workers.md) — the spec built by the same
builder, the checked text pinned, the policy in force fixed now — but under the policy the server narrowed,
which `dal submit`'s flags could not express (they only add)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

DEFAULT_MAX_ATTEMPTS = 5  # as `dal submit --max-attempts`


def submit(script: str | Path, text: str, *, key: str, policy: Any, workspace: Path, store: str | None,
           args: dict[str, Any] | None, newest: dict[str, Any] | None, **budgets: Any) -> dict[str, Any]:
    """Queue one job of `script` (a path, or the source `text` itself) under `key`; the job, or why nothing
    was submitted. Raises ValueError for a script that does not check or a key no job may have."""
    import dal.api as api
    from dal.core.liveness import host_name
    from dal.eval.args import bind
    from dal.eval.interpreter import check_source
    from dal.receipts.location import open_store
    from dal.receipts.store import StoreError
    from dal.runner.build import SpecError, build_spec, pin_script

    name = str(script) if isinstance(script, Path) else "<script>"
    checked, errors = check_source(text, name)
    if errors:
        return {"submitted": False, "reason": "the script does not parse or resolve: nothing submitted",
                "diagnostics": [d.rendered for d in api.check(text, filename=name) if d.severity == "error"]}
    try:
        spec = build_spec(script if isinstance(script, Path) else None,
                          source=None if isinstance(script, Path) else text,
                          workspace=workspace, store=store, policy=policy, args=args, **budgets)
    except SpecError as e:
        raise ValueError(str(e)) from None
    bound, errors = bind(checked.program, spec.args, filename=name, source=text, command="")
    if errors:
        return {"submitted": False, "reason": "bad script arguments: nothing submitted",
                "diagnostics": [str(e) for e in errors]}
    if bound:
        spec = spec.evolve(extensions={**spec.extensions, "args": bound})
    if newest is not None and (newest["status"] == "completed" or (
            newest["status"] == "skipped" and newest.get("skipped_of"))):
        done_in = newest.get("skipped_of") or newest["run_id"]
        return {"submitted": False, "reason": f"operation {key!r} already completed in run {done_in}: nothing "
                "submitted", "receipt": f"dal://runs/{done_in}"}
    # The job runs the text checked here, whatever the file holds later (docs/workers.md).
    pinned = pin_script(spec, text)
    data = pinned.evolve(key=None, new_attempt=False,
                         extensions={**pinned.extensions, "new_attempt_of": None}).to_json()
    try:
        with open_store(spec.store) as db:  # a SQLite file or a PostgreSQL database
            job, made = db.jobs().submit(spec=data, key=key, queue="default", priority=0, run_at=time.time(),
                                         max_attempts=DEFAULT_MAX_ATTEMPTS, host=host_name(), movable=False)
    except StoreError as e:
        raise ValueError(str(e)) from None
    shown = {k: job[k] for k in ("job_id", "key", "queue", "state")}
    if not made:
        return {"submitted": False, "job": shown,
                "reason": f"key {key!r} already has job {job['job_id']} ({job['state']}): nothing submitted"}
    return {"submitted": True, "job": shown,
            "note": "a `dal worker` runs it; its runs' receipts are dal://runs/<id> (list_waiting shows any that "
                    "waits for a person)"}
