"""The end of a run: its receipt built from what ran, stored (the store is the source of truth) and
written as files whatever failed on the way, and what to tell the operator when the store could not
record it."""

from __future__ import annotations

import errno
import time
from pathlib import Path
from typing import Any

from dal.core.digest import text_sha256
from dal.core.errors import DalError
from dal.eval.interpreter import Outcome
from dal.eval.runtime import Runtime
from dal.eval.values import describe
from dal.receipts.build import artifact_of, run_receipt, unjournaled_item
from dal.receipts.compact import compact
from dal.receipts.files import write_receipt_files
from dal.receipts.ids import utc_timestamp
from dal.receipts.retry import derive_retry
from dal.receipts.schema import ReceiptSchemaError
from dal.receipts.store import StoreError, StoreGone
from dal.runner.effects import EffectHandler
from dal.runner.journal import rerunnable
from dal.runner.operation import RunState
from dal.runner.recorder import LoopRecorder
from dal.runner.report import EXIT_BY_STATUS, RunnerError, RunReport


def _sandbox_json(handler: EffectHandler | None) -> dict[str, Any] | None:
    """How this run's commands ran (inside bubblewrap or not, and why); None when it called no run()."""
    if handler is None or not handler.count:
        return None
    from dal.effects.exec.running import wall_in_force

    how = wall_in_force(handler.ctx)
    return {"wall": how["wall"], "reason": how["refused"] or how["reason"], "refused": bool(how["refused"])}


def finish(
    run: RunState,
    source: str,
    operation: str,
    outcome: Outcome,
    rt: Runtime | None,
    handler: EffectHandler | None,
    recorder: LoopRecorder | None,
) -> RunReport:
    spec = run.spec
    status = outcome.status
    if status == "skipped":
        run.skipped_of = run.skipped_of or (outcome.result if isinstance(outcome.result, str) else None)
        run.kind = "duplicate"
    error = outcome.error
    if error is not None and error.kind == "store" and _disk_full(error.message):
        _free_reserve(run)  # the disk filled up: use the room kept to record how the run ended
    if handler is not None and handler.unjournaled is not None:
        _journal_late(run, handler, error)
    result_value = outcome.result if status != "skipped" else None
    script_retry = None
    blocker: str | None = None
    if outcome.ended_by == "fail":
        v = outcome.result
        if isinstance(v, dict):
            script_retry = v.get("retry") if isinstance(v.get("retry"), str) else None
            blocker = v.get("blocker") if isinstance(v.get("blocker"), str) else None
        elif isinstance(v, str):
            blocker = describe(v)
        if blocker is None:
            blocker = "the script called fail(" + (describe(v) if v is not None else "") + ")"

    external = "none"
    if handler is not None:
        if handler.external_performed:
            external = "performed"
        if handler.external_uncertain:
            external = "uncertain"
    wait = outcome.wait
    if status == "waiting" and wait is not None:
        if wait.detail.get("reason") == "pending_approval":
            external = "pending_approval"
            blocker = f"effect {wait.detail['seq']} waits for approval: `{wait.detail['command']}`"
        else:
            external = "uncertain"
            blocker = wait.reason
    if blocker is None and error is not None:
        blocker = error.message
    if status == "skipped":
        blocker = None
    retry = script_retry or derive_retry(
        status, external_effect=external, error_kind=error.kind if error is not None else None
    )

    continued_by = _continued_by(run, status)
    if continued_by is not None:
        # Another run took the operation over while this one still ran (docs/durability.md): its own end
        # must not send a person to resume what goes on elsewhere.
        retry = "none"
        blocker = (f"run {continued_by} continued this operation while this run still ran (it found this run's "
                   "process gone, or took the key's lock after this run lost it): nothing to resume here; the "
                   f"operation goes on in run {continued_by}")
        if error is not None and error.kind == "store":
            error.help = f"nothing to resume here: the operation goes on in run {continued_by}"

    attempts = None
    if run.key is not None and run.attempts is not None:
        attempts = dict(run.attempts)
        attempts["invocations"] += 1
        attempts[{"resume": "resumes", "duplicate": "duplicates"}.get(run.kind, "new")] += 1

    finished = utc_timestamp()
    rerun = spec.evolve(key=run.key).command_line(keep_new_attempt=status == "rejected")
    artifacts = [artifact_of(run.workspace, p, run.policy.write_roots) for p in (handler.writes if handler else {})]
    error_json = error.to_json() if error is not None else None
    if error is not None and error.kind == "internal" and error_json is not None:
        error_json["message"] = error.message
    undelivered = getattr(run.hooks.write, "undelivered", None)  # dal.core.outwrite.StreamWriter
    lost = undelivered() if callable(undelivered) else None
    receipt = run_receipt(
        run_id=run.run_id,
        operation=operation,
        key=run.key,
        script_path=spec.filename,
        script_sha256=text_sha256(source),
        workspace=str(run.workspace),
        status=status,
        attempted_at=run.started_at,
        finished_at=finished,
        duration_ms=round((time.monotonic() - run.t0) * 1000, 3),
        slept_ms=round(rt.slept * 1000, 3) if rt else 0.0,
        steps_used=rt.steps if rt else 0,
        steps_budget=spec.max_steps,
        effects_count=handler.count if handler else 0,
        effects_budget=spec.max_effects,
        items=handler.items if handler else [],
        omitted=handler.omitted if handler else 0,
        artifacts=artifacts,
        external_effect=external,
        retry=retry,
        blocker=blocker,
        error=error_json,
        result=compact(result_value, max_items=50, depth=6, max_nodes=1000),
        loops=recorder.receipts() if recorder else [],
        attempts=attempts,
        previous_run=run.previous["run_id"] if run.previous and run.kind != "duplicate" else None,
        skipped_of=run.skipped_of if status == "skipped" else None,
        policy=run.receipt_policy(),
        sandbox=_sandbox_json(handler),
        **({"args": spec.args} if spec.args else {}),
        **({"rerun": rerun} if rerun is not None else {}),
        **({"undelivered": lost} if isinstance(lost, str) else {}),
        **({"continued_by": continued_by} if continued_by is not None else {}),
    )
    exit_code = EXIT_BY_STATUS[status]
    if error is not None and error.kind == "store":
        exit_code = 2  # the run store could not be used (docs/cli.md): the run stopped, resumable
    # The store is the source of truth, but a store problem must not lose the receipt: the files are
    # written whatever happens, and the problem is reported after.
    store_problem: StoreError | None = None
    stored = False  # the store holds the receipt, fsynced: the files are copies, written without fsyncs
    try:
        store = run.open_store()
        run.begin(operation)
        store.set_synchronous("FULL")  # the receipt survives a power loss in the store (docs/durability.md)
        try:
            try:
                try:
                    store.save_receipt(receipt)
                except StoreError as e:
                    if not (_disk_full(str(e)) and _free_reserve(run)):
                        raise
                    store.save_receipt(receipt)  # the disk is full: again, in the room the reserve kept
            except ReceiptSchemaError as e:
                # A receipt DAL built that breaks its own schema is a bug in DAL: keep it anyway, then say so.
                store.save_receipt(receipt, validate=False)
                store_problem = StoreError(
                    f"internal error in DAL (please report it): the receipt does not match dal.receipt/v1 ({e}); "
                    "it was stored unchecked", None,
                )
            stored = True
        finally:
            store.set_synchronous("NORMAL")
    except (StoreError, RunnerError) as e:
        store_problem = e if isinstance(e, StoreError) else StoreError(str(e), None)
    json_path = md_path = None
    files_problem: OSError | None = None
    files_error = None
    # A receipt the store holds (fsynced) is copied to files unless the host asked for none (a job's run
    # without a receipts folder of its own, docs/workers.md); one the store could not take always is.
    want_files = not stored or run.hooks.receipt_files
    fence = run.hooks.fence  # a worker's run of a job: its next step is the worker's, not `dal resume`
    job = {"job_id": fence.job_id} if fence is not None else None
    try:
        try:
            if want_files:
                json_path, md_path = write_receipt_files(receipt, spec.receipts_dir(), workspace=run.workspace,
                                                         durable=not stored, job=job)
        except OSError as e:
            if not (e.errno == errno.ENOSPC and _free_reserve(run)):
                raise
            json_path, md_path = write_receipt_files(receipt, spec.receipts_dir(), workspace=run.workspace,
                                                     durable=not stored, job=job)
    except OSError as e:
        files_problem = e
        if store_problem is None:
            # After the effects: the run is what the store says it is; only its files are missing.

            files_error = (f"the receipt files of run {run.run_id} could not be written in "
                           f"{spec.receipts_dir()} ({e.strerror or e}). The run "
                           f"ended {status} and is recorded in the store {run.store.path if run.store else ''}:"
                           f" `dal receipt show {run.run_id}` shows its receipt (with --json: the file's "
                           "contents)")
    if store_problem is not None:
        # The store could not record how the run ended. Whatever it had journaled stays the operation's
        # journal: the next attempt finds this run `running` with no live process and continues from it.
        problem, next_step = _unrecorded(run, receipt, store_problem, json_path, files_problem)
        return RunReport(receipt, 2, error, json_path, md_path, store_problem=problem, next_step=next_step)
    return RunReport(receipt, exit_code, error, json_path, md_path, files_error=files_error)


def _continued_by(run: RunState, status: str) -> str | None:
    """The run that continued this one's operation while it still ran, when one did: a run judged dead (from
    another machine or pid namespace) or whose PostgreSQL key lock was lost, which then ended by itself. Asked
    only of a run that did not complete (the rare ends; a completed run's receipt is true as it stands, and
    `dal receipt show` names its successor from the store)."""
    if not run.begun or status in ("completed", "skipped", "rejected") or run.store is None:
        return None
    try:
        later = (run.store.run_row(run.run_id) or {}).get("resumed_by")
    except StoreError:
        return None
    return later if isinstance(later, str) and later != run.run_id else None


def _disk_full(message: str) -> bool:
    low = message.lower()
    return "disk is full" in low or "no space left" in low


def _free_reserve(run: RunState) -> bool:
    """Free the store's reserve file (Store.free_reserve); True when that gave room back."""
    try:
        return run.open_store().free_reserve()
    except (StoreError, RunnerError):
        return False


def _journal_late(run: RunState, handler: EffectHandler, error: DalError | None) -> None:
    """An effect ran but the store refused its result: try once more now that the run has stopped (a
    lock may have gone). If the store still refuses, the effect's outcome is unknown to the journal, and
    the receipt says so as the next attempt will see it: read and idempotent effects run again, anything
    else waits for `dal resolve`."""
    late = handler.unjournaled or {}
    handler.unjournaled = None
    seq = late.get("seq")
    try:
        run.open_store().journal_result(run.run_id, seq, late["result"])
        note = "DAL journaled the result when the run stopped, so its outcome is known."
        journaled = True
    except (StoreError, RunnerError):
        journaled = False
        safe = rerunnable(late.get("class"), bool(late.get("idempotent")))
        note = ("Its outcome is unknown to the journal: the next attempt runs it again (" +
                ("a read" if late.get("class") == "read" else "idempotent") + ")." if safe else
                "Its outcome is unknown to the journal, so the next attempt holds it until a person says what "
                "happened (`dal resolve`).")
        for i, item in enumerate(handler.items):
            if item["seq"] == seq and not item["replayed"]:
                handler.items[i] = unjournaled_item(item)
                if not safe:
                    handler.external_uncertain = True
    if error is not None and getattr(error, "seq", None) == seq:
        error.message = error.message.rstrip(".") + ". " + note
        if journaled:
            error.help = "what was journaled is intact; once the store can be written, resume the run"


def _unrecorded(
    run: RunState, receipt: dict[str, Any], problem: Exception, json_path: Path | None, files_problem: OSError | None
) -> tuple[str, str]:
    """What to tell the operator when the store did not record the run's end: the problem and the next step."""
    rid = receipt["run_id"]
    where = (f"the receipt is only in {json_path}" if json_path is not None
             else f"no receipt file could be written either ({files_problem})" if files_problem is not None
             else "the receipt is not stored")
    text = f"{str(problem).rstrip('.')}; {where}"
    again = " (or the same `dal run --key` command)" if run.key else ""
    if run.begun:
        step = (f"once the run store can be written again, `dal resume {rid}`{again}: it continues from the "
                "journal, and nothing the journal holds runs again")
    elif run.previous is not None and run.kind in ("resume", "retry"):
        step = (f"once the run store can be written again, `dal resume {run.previous['run_id']}`{again}: "
                "nothing of this attempt was journaled")
    else:
        # The run is recorded before its first effect starts: nothing ran. The same command line (with its
        # policy flags) is the move, not one rebuilt here.
        step = "nothing ran: once the run store can be written again, run the same command again"
    if isinstance(problem, StoreGone):
        # The journal is gone: no resume can continue it, and a new invocation would run everything again.
        step = (f"the effects this receipt lists ran and are journaled nowhere else: check them (`{json_path}`) "
                "before you run the operation again, which runs every effect again")
    if receipt["status"] == "skipped":
        step = f"nothing: the operation already completed in {receipt['skipped_of']}, and nothing ran"
    return text, step

