"""One run of a script, end to end.

check → (key: lock, skip or resume) → begin the run durably → execute with the effect handler and the
loop recorder → build the run receipt → store it → write `<run_id>.json` and `<run_id>.md`.

Whatever happens inside the script, a receipt is written. Problems outside the script (an unreadable
store, a busy key) raise `RunnerError` with a message naming the file or the key.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from dal.effects import EffectContext, Policy
from dal.errors import DalError, DalRuntimeError
from dal.eval.interpreter import Engine, Outcome, check_source
from dal.eval.runtime import Runtime, SkipSignal
from dal.eval.values import display, to_json_value
from dal.receipts import Store, StoreError, derive_retry, new_run_id, utc_timestamp, write_receipt_files
from dal.receipts.compact import compact
from dal.runner.effects import EffectHandler, Prior
from dal.runner.locks import KeyBusy, KeyLock
from dal.runner.recorder import LoopRecorder

EXIT_BY_STATUS = {
    "completed": 0,
    "skipped": 0,
    "failed": 1,
    "rejected": 2,
    "waiting": 3,
    "exhausted": 4,
    "interrupted": 130,
}
RESUMABLE = frozenset({"waiting", "interrupted", "running"})
SCHEMA = "dal.receipt/v1"
_SHA_LIMIT = 64 * 1024 * 1024


class RunnerError(Exception):
    """A problem outside the script: the store, the key lock, the resumed run. Exit 2 (3 for a busy key)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@attrs.define
class RunRequest:
    script: Path
    workspace: Path
    policy: Policy
    source: str | None = None  # the script's text; read from `script` when None
    max_steps: int = 1_000_000
    max_effects: int | None = None
    timeout: float | None = None
    effect_timeout: float = 30.0
    max_output: int = 1 << 20
    key: str | None = None
    store: Path | None = None
    receipts_dir: Path | None = None
    require_sandbox: bool = False
    use_sandbox: bool = True
    resume: str | None = None  # a run id to resume explicitly (`dal resume RUN`)
    wait: float | None = None
    policy_args: dict[str, Any] = attrs.Factory(dict)  # the flags the policy came from, kept for `dal resume`
    write: Callable[[str], Any] | None = None
    on_loop_receipt: Callable[[dict[str, Any]], None] | None = None
    handle_signals: bool = True
    write_files: bool = True


@attrs.define
class RunReport:
    receipt: dict[str, Any]
    exit_code: int
    error: DalError | None = None
    json_path: Path | None = None
    md_path: Path | None = None
    signal_name: str | None = None


def default_store(workspace: Path) -> Path:
    env = os.environ.get("DAL_STORE")
    if env:
        return Path(env)
    return workspace / ".dal" / "dal.db"


def policy_json(policy: Policy, args: dict[str, Any]) -> dict[str, Any]:
    """What the store keeps of a run's policy: where it came from and what it allowed."""
    return {
        "source": policy.source,
        "args": args,
        "allowed": sorted(policy.allowed),
        "approval": sorted(policy.approval),
        "read_roots": list(policy.read_roots),
        "write_roots": list(policy.write_roots),
        "allow_net": policy.allow_net,
    }


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _artifact(workspace: Path, rel: str) -> dict[str, Any]:
    p = Path(rel)
    full = p if p.is_absolute() else workspace / p
    try:
        st = full.stat()
    except OSError:
        return {"path": rel, "state": "missing", "size": None, "sha256": None}
    if not full.is_file():
        return {"path": rel, "state": "exists", "size": None, "sha256": None}
    digest = None
    if st.st_size <= _SHA_LIMIT:
        h = hashlib.sha256()
        try:
            with open(full, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            digest = h.hexdigest()
        except OSError:
            digest = None
    return {"path": rel, "state": "exists", "size": st.st_size, "sha256": digest}


class _Run:
    """State of one run while it executes."""

    def __init__(self, req: RunRequest) -> None:
        self.req = req
        self.workspace = req.workspace.resolve()
        self.run_id = new_run_id()
        self.started_at = utc_timestamp()
        self.t0 = time.monotonic()
        self.store: Store | None = None
        self.lock: KeyLock | None = None
        self.key: str | None = req.key
        self.previous: dict[str, Any] | None = None
        self.attempts: dict[str, int] | None = None
        self.begun = False
        self.skipped_of: str | None = None
        self.kind = "new"  # new | resume | duplicate

    # --- store and key ---------------------------------------------------------------------

    def open_store(self) -> Store:
        if self.store is None:
            path = self.req.store or default_store(self.workspace)
            try:
                self.store = Store(path)
            except StoreError as e:
                raise RunnerError(str(e)) from None
        return self.store

    def enter_key(self, key: str, handler: EffectHandler | None) -> None:
        """Lock the key; decide new attempt, resume or skip from the key's newest run."""
        store = self.open_store()
        self.key = key
        self.lock = KeyLock(store.path.parent / "locks", key)
        try:
            self.lock.acquire(self.run_id, self.req.wait)
        except KeyBusy as e:
            self.lock = None
            raise RunnerError(str(e), exit_code=3) from None
        rows = store.list_runs(key=key, limit=1)
        prev = rows[0] if rows else None
        self.attempts = self._attempts_so_far(prev)
        if prev is None:
            self.kind = "new"
            return
        status = prev["status"]
        if status == "skipped" and prev.get("skipped_of"):
            status = "completed"
        if status == "completed":
            self.kind = "duplicate"
            self.skipped_of = prev.get("skipped_of") or prev["run_id"]
            self.previous = prev
            return
        self.previous = prev
        if status in RESUMABLE:
            if status == "running":
                self._bury(prev)
            self.kind = "resume"
            if handler is not None:
                self.load_replay(prev["run_id"], handler)
        else:
            self.kind = "new"  # failed, exhausted, rejected: a new attempt linked to the last one

    def _attempts_so_far(self, prev: dict[str, Any] | None) -> dict[str, int]:
        base = {"invocations": 0, "new": 0, "resumes": 0, "duplicates": 0}
        if prev is not None and self.store is not None:
            receipt = self.store.get_run(prev["run_id"])
            got = (receipt or {}).get("attempts") or {}
            for k in base:
                if isinstance(got.get(k), int):
                    base[k] = got[k]
            if not receipt:  # a run that died before its receipt still counted as an invocation
                base["invocations"] += 1
        return base

    def load_replay(self, run_id: str, handler: EffectHandler) -> None:
        store = self.open_store()
        replay: dict[int, Prior] = {}
        for row in store.journal(run_id):
            detail = row.get("detail") or {}
            replay[row["seq"]] = Prior(
                seq=row["seq"],
                command=row["command"],
                effect_class=row.get("class"),
                idempotent=bool(detail.get("idempotent")),
                result=row.get("result"),
                kind=detail.get("kind", "effect"),
            )
        decisions: dict[int, dict[str, Any]] = {}
        for row in store.approvals(run_id):
            if row.get("seq") is not None:
                decisions[int(row["seq"])] = row
        handler.replay = replay
        handler.decisions = decisions

    def _bury(self, prev: dict[str, Any]) -> None:
        """A run whose process died before writing its receipt: give it one, as interrupted."""
        store = self.open_store()
        journal = store.journal(prev["run_id"])
        items = []
        for row in journal:
            if row["seq"] <= 0:
                continue
            res = row.get("result") or {}
            items.append({
                "seq": row["seq"], "command": row["command"],
                "status": res.get("status", "uncertain") if res else "uncertain",
                "class": row.get("class"), "code": res.get("code"), "summary": res.get("summary", "outcome unknown"),
                "reason": res.get("reason"), "reads": res.get("reads", []), "writes": res.get("writes", []),
                "duration_ms": res.get("duration_ms", 0.0), "line": (row.get("detail") or {}).get("line", 0),
                "column": 0, "loop_iteration": None, "replayed": False,
            })
        receipt = {
            "schema": SCHEMA,
            "run_id": prev["run_id"],
            "operation": prev["operation"],
            "key": prev.get("key"),
            "script": {"path": prev.get("script_path") or "", "sha256": ""},
            "workspace": str(self.workspace),
            "status": "interrupted",
            "attempted_at": prev["started_at"],
            "finished_at": utc_timestamp(),
            "duration_ms": 0.0,
            "steps": {"used": 0, "budget": 0},
            "effects": {"count": len(items), "budget": None, "items": items, "omitted": 0},
            "artifacts": [],
            "external_effect": "uncertain" if any(i["status"] == "uncertain" and i["class"] == "external"
                                                  for i in items) else "none",
            "retry": "resume",
            "blocker": "the process running this operation died before writing its receipt (killed?); "
                       "the next invocation with its key resumes it from the journal",
            "error": None,
            "result": None,
            "loops": [],
            "loops_omitted": 0,
            "attempts": None,
            "previous_run": prev.get("previous_run"),
            "skipped_of": None,
        }
        try:
            store.save_receipt(receipt)
        except StoreError:
            pass

    def begin(self, operation: str) -> None:
        if self.begun:
            return
        store = self.open_store()
        try:
            store.begin_run(
                self.run_id,
                operation=operation,
                key=self.key,
                script_path=str(self.req.script),
                started_at=self.started_at,
                previous_run=self.previous["run_id"] if self.previous else None,
                policy=policy_json(self.req.policy, self.req.policy_args),
            )
        except StoreError as e:
            raise RunnerError(str(e)) from None
        self.begun = True

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        if self.store is not None:
            self.store.close()
            self.store = None


class _BeginFirst:
    """The store as the effect journal, recording the run itself before the first journal entry."""

    def __init__(self, store: Store, begin: Callable[[], None]) -> None:
        self._store = store
        self._begin = begin

    def journal_intent(self, *args: Any, **kw: Any) -> None:
        self._begin()
        self._store.journal_intent(*args, **kw)

    def journal_result(self, *args: Any, **kw: Any) -> None:
        self._store.journal_result(*args, **kw)


def execute(req: RunRequest) -> RunReport:
    """Run `req.script` and return its receipt. Raises RunnerError only for problems outside the script."""
    run = _Run(req)
    try:
        return _execute(run)
    finally:
        run.release()


def _read_source(req: RunRequest) -> str:
    if req.source is not None:
        return req.source
    try:
        return req.script.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunnerError(f"no such script: {req.script}") from None
    except IsADirectoryError:
        raise RunnerError(f"{req.script} is a directory, not a script") from None
    except UnicodeDecodeError as e:
        raise RunnerError(f"{req.script} is not UTF-8 text (invalid byte at offset {e.start})") from None
    except OSError as e:
        raise RunnerError(f"cannot read {req.script}: {e.strerror}") from None


def _execute(run: _Run) -> RunReport:
    req = run.req
    source = _read_source(req)
    filename = str(req.script)
    checked, errors = check_source(source, filename)
    operation = req.key or f"script:{Path(filename).stem}"

    if errors:
        run.open_store()
        run.begin(operation)
        return _finish(run, source, operation, Outcome("rejected", errors[0], ended_by="error"),
                       rt=None, handler=None, recorder=None)

    rt = Runtime(max_steps=req.max_steps, timeout=req.timeout, write=req.write or sys.stdout.write)
    ctx = EffectContext(
        policy=req.policy,
        timeout=req.effect_timeout,
        max_output=req.max_output,
        require_sandbox=req.require_sandbox,
        use_sandbox=req.use_sandbox,
    )
    store = run.open_store()
    state = {"operation": operation}
    # The run is recorded in the store just before its first journal write (or at its end), so that an
    # operation key set by operation("K") at the top of the script is part of the run's record.
    journal = _BeginFirst(store, lambda: run.begin(state["operation"]))
    handler = EffectHandler(rt, ctx, journal=journal, run_id=run.run_id, max_effects=req.max_effects)
    recorder = LoopRecorder(on_receipt=req.on_loop_receipt)
    rt.effects = handler
    rt.observe = handler.observe
    rt.recorder = recorder

    if req.resume:
        try:
            prev = store.find(req.resume)
        except StoreError as e:
            raise RunnerError(str(e)) from None
        if prev.get("status") not in RESUMABLE:
            raise RunnerError(
                f"run {prev['run_id']} is {prev.get('status')}: only waiting or interrupted runs resume "
                f"(a failed or exhausted run starts a new attempt: run the script again"
                + (f" with --key {prev['key']}" if prev.get("key") else "") + ")"
            )
        if prev.get("key"):
            run.key = prev["key"]
            operation = prev["key"]
        run.enter_key(run.key, handler) if run.key else None
        if not run.key:
            run.previous = prev
            run.kind = "resume"
            run.load_replay(prev["run_id"], handler)

    elif req.key:
        run.enter_key(req.key, handler)

    if run.kind == "duplicate":
        run.begin(operation)
        return _finish(run, source, operation, Outcome("skipped", ended_by="skip"), rt, handler, recorder)

    def set_operation(key: str, span: Any) -> None:
        if run.key is not None:
            if key != run.key:
                raise DalRuntimeError(
                    f"operation({json.dumps(key)}) does not match the key this run was started with "
                    f"({run.key!r})"
                )
            return
        run.enter_key(key, handler)
        state["operation"] = key
        if run.kind == "duplicate":
            raise SkipSignal(run.skipped_of or "")

    rt.state["set_operation"] = set_operation

    got: dict[str, str] = {}
    restore: dict[int, Any] = {}
    if req.handle_signals and threading.current_thread() is threading.main_thread():

        def on_signal(signum: int, frame: Any) -> None:
            name = signal.Signals(signum).name
            got["signal"] = name
            rt.interrupt(name)

        for s in (signal.SIGINT, signal.SIGTERM):
            restore[s] = signal.signal(s, on_signal)
    try:
        outcome = Engine(rt).execute(checked)  # type: ignore[arg-type]
    finally:
        for s, h in restore.items():
            signal.signal(s, h)
    operation = state["operation"]
    report = _finish(run, source, operation, outcome, rt, handler, recorder)
    report.signal_name = got.get("signal")
    if report.receipt["status"] == "interrupted" and got.get("signal") == "SIGTERM":
        report.exit_code = 143
    return report


def _finish(
    run: _Run,
    source: str,
    operation: str,
    outcome: Outcome,
    rt: Runtime | None,
    handler: EffectHandler | None,
    recorder: LoopRecorder | None,
) -> RunReport:
    req = run.req
    status = outcome.status
    if status == "skipped":
        run.skipped_of = run.skipped_of or (outcome.result if isinstance(outcome.result, str) else None)
        run.kind = "duplicate"
    error = outcome.error
    result_value = outcome.result if status != "skipped" else None
    script_retry = None
    blocker: str | None = None
    if outcome.ended_by == "fail":
        v = outcome.result
        if isinstance(v, dict):
            script_retry = v.get("retry") if isinstance(v.get("retry"), str) else None
            blocker = v.get("blocker") if isinstance(v.get("blocker"), str) else None
        elif isinstance(v, str):
            blocker = v
        if blocker is None:
            blocker = "the script called fail(" + (display(v) if v is not None else "") + ")"

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

    attempts = None
    if run.key is not None and run.attempts is not None:
        attempts = dict(run.attempts)
        attempts["invocations"] += 1
        attempts[{"new": "new", "resume": "resumes", "duplicate": "duplicates"}[run.kind]] += 1

    finished = utc_timestamp()
    artifacts = [_artifact(run.workspace, p) for p in (handler.writes if handler else {})]
    receipt: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": run.run_id,
        "operation": operation,
        "key": run.key,
        "script": {"path": str(req.script), "sha256": _sha256_text(source)},
        "workspace": str(run.workspace),
        "status": status,
        "attempted_at": run.started_at,
        "finished_at": finished,
        "duration_ms": round((time.monotonic() - run.t0) * 1000, 3),
        "steps": {"used": rt.steps if rt else 0, "budget": req.max_steps},
        "effects": {
            "count": handler.count if handler else 0,
            "budget": req.max_effects,
            "items": handler.items if handler else [],
            "omitted": handler.omitted if handler else 0,
        },
        "artifacts": artifacts,
        "external_effect": external,
        "retry": retry,
        "blocker": blocker,
        "error": error.to_json() if error is not None else None,
        "result": compact(to_json_value(result_value), max_items=50, depth=6, max_nodes=1000),
        "loops": recorder.receipts() if recorder else [],
        "loops_omitted": 0,
        "attempts": attempts,
        "previous_run": run.previous["run_id"] if run.previous and run.kind != "duplicate" else None,
        "skipped_of": run.skipped_of if status == "skipped" else None,
    }
    if error is not None and error.kind == "internal":
        receipt["error"]["message"] = error.message
    # The store is the source of truth, but a store problem must not lose the receipt: the files are
    # written whatever happens, and the problem is reported after.
    store_problem: StoreError | None = None
    try:
        store = run.open_store()
        run.begin(operation)
        store.save_receipt(receipt)
    except (StoreError, RunnerError) as e:
        store_problem = e if isinstance(e, StoreError) else StoreError(str(e), None)
    json_path = md_path = None
    if req.write_files:
        try:
            json_path, md_path = write_receipt_files(receipt, req.receipts_dir, workspace=run.workspace)
        except OSError as e:
            raise RunnerError(f"cannot write the receipt files: {e}") from None
    if store_problem is not None:
        raise RunnerError(f"{store_problem} (the receipt was written to {json_path})")
    return RunReport(receipt, EXIT_BY_STATUS[status], error, json_path, md_path)
