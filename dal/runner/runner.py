"""One run of a script, end to end.

check → (key: lock, skip or resume) → begin the run durably → execute with the effect handler and the
loop recorder → build the run receipt → store it → write `<run_id>.json` and `<run_id>.md`.

Whatever happens inside the script, a receipt is written. Problems outside the script (an unreadable
store, a busy key) raise `RunnerError` with a message naming the file or the key.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dal.core.digest import sha256
from dal.core.errors import DalError, DalRuntimeError, DivergenceError
from dal.core.jsontext import surrogate_at
from dal.core.readbelow import NotBelow, open_below, read_text_below, root_of
from dal.core.records import ValueRecord
from dal.core.shellword import sh_quote
from dal.effects import EffectContext, Policy, PolicyError
from dal.effects.policy import LIMIT_DEFAULTS
from dal.eval.host import PROCEED, OperationVerdict
from dal.eval.interpreter import Engine, Outcome, check_source
from dal.eval.runtime import Runtime
from dal.eval.values import describe, quote
from dal.receipts.build import effect_item, run_receipt, unjournaled_item
from dal.receipts.compact import compact
from dal.receipts.files import write_receipt_files
from dal.receipts.ids import new_run_id, utc_timestamp
from dal.receipts.location import open_store as open_location
from dal.receipts.oplock import KeyBusy, live_here, mark_live, unmark_live
from dal.receipts.retry import derive_retry
from dal.receipts.schema import ReceiptSchemaError
from dal.receipts.store import RunContinued, StoreError, StoreGone
from dal.runner import inflight
from dal.runner.effects import EffectHandler, rerunnable
from dal.runner.host import RunHost
from dal.runner.inforce import (
    Adopted,
    adopt,
    policy_digest,
    protect_spec,
    receipt_policy,
    stored_policy,
    unguarded_policy_file,
)
from dal.runner.liveness import run_alive
from dal.runner.opkeys import script_key_problem
from dal.runner.recorder import LoopRecorder
from dal.runner.spec import RunHooks, RunSpec, SpecError
from dal.runner.stored import StoredRun, run_record

if TYPE_CHECKING:
    from dal.receipts.contract import OperationLock, RunStore

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
_SHA_LIMIT = 64 * 1024 * 1024
# What one run may journal of command output (stdout and stderr of its effects, copies a resume makes of
# earlier results not counted); past it the next effect does not start and the run stops, resumable.
# --max-stored-output, else DAL_RUN_STORE_LIMIT (bytes, or 512M, 2G), else the policy's [limits]
# max_stored_output set it (docs/durability.md, "How much a run stores").
RUN_STORE_LIMIT = LIMIT_DEFAULTS["max_stored_output"]
STORE_LIMIT_ENV = "DAL_RUN_STORE_LIMIT"


class RunnerError(Exception):
    """A problem outside the script: the store, the key lock, the resumed run. Exit 2 (3 for a busy key)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.where: DalError | None = None  # the script's place it stopped at (operation("K")), for the caret


class RunReport(ValueRecord):
    """How a run ended: its receipt, exit code, error, receipt files and the signal that stopped it."""

    __slots__ = ("receipt", "exit_code", "error", "json_path", "md_path", "signal_name", "store_problem", "next_step",
                 "files_error")

    def __init__(
        self,
        receipt: dict[str, Any],
        exit_code: int,
        error: DalError | None = None,
        json_path: Path | None = None,
        md_path: Path | None = None,
        signal_name: str | None = None,
        store_problem: str | None = None,  # the store could not record the run's end: what and why
        next_step: str | None = None,  # ... and what to do then
        files_error: str | None = None,  # the run ended and is stored, but its receipt files failed: why
    ) -> None:
        self.receipt = receipt
        self.exit_code = exit_code
        self.error = error
        self.json_path = json_path
        self.md_path = md_path
        self.signal_name = signal_name
        self.store_problem = store_problem
        self.next_step = next_step
        self.files_error = files_error


def effect_context(spec: RunSpec, policy: Policy) -> EffectContext:
    """How effects run under `policy`: a limit the run's options set wins, then the policy's `[limits]`."""
    return EffectContext(
        policy=policy,
        timeout=RunSpec.effective_effect_timeout(spec.effect_timeout, policy),
        max_output=RunSpec.effective_max_output(spec.max_output, policy),
        require_sandbox=spec.require_sandbox,
        use_sandbox=spec.use_sandbox,
        unsandboxed_as_root=spec.unsandboxed_as_root,
    )


def _sha256_text(text: str) -> str:
    return sha256(text.encode("utf-8")).hexdigest()


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


def crashed_receipt(
    store: RunStore, prev: dict[str, Any], *, workspace: Path, blocker: str, attempts: dict[str, int] | None = None
) -> dict[str, Any]:
    """The receipt of a run whose process died before writing one, rebuilt from its journal: each effect
    with its recorded result, or `uncertain` when it started and never reported back."""
    info = store.run_row(prev["run_id"]) or {}
    try:
        started: StoredRun | None = StoredRun.of(info)
    except (PolicyError, SpecError):
        started = None
    items = []
    for row in _reached(store, prev["run_id"]):
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
            programs=res.get("programs") or detail.get("programs") or [],
            duration_ms=res.get("duration_ms", 0.0), line=detail.get("line", 0),
            column=0, loop_iteration=None, replayed=bool(detail.get("replayed")),
        ))
    sha = started.sha256 if started is not None else None
    roots = tuple(started.policy.write_roots) if started is not None and started.policy is not None else ()
    spec_ws = started.spec.workspace if started is not None and started.spec is not None else None
    legacy_ws = ((started.legacy or {}).get("launch") or {}).get("workspace") if started is not None else None
    ws = Path(spec_ws or legacy_ws or workspace)
    in_force = started.policy if started is not None else None
    done = ("completed", "failed", "timeout", "uncertain")
    external = ("uncertain" if any(i["status"] == "uncertain" and i["class"] == "external" for i in items) else
                "performed" if any(i["status"] in ("completed", "failed", "timeout") and i["class"] == "external"
                                   for i in items) else "none")
    receipt = run_receipt(
        run_id=prev["run_id"],
        operation=prev["operation"],
        key=prev.get("key"),
        script_path=prev.get("script_path") or "",
        script_sha256=sha if isinstance(sha, str) and len(sha) == 64 else "0" * 64,
        workspace=str(ws),
        status="interrupted",
        attempted_at=prev["started_at"],
        finished_at=utc_timestamp(),
        duration_ms=0.0,
        steps_used=0,
        steps_budget=int((started.budget("max_steps") if started else None) or 0),
        effects_count=len(items),
        effects_budget=started.budget("max_effects") if started else None,
        items=items,
        omitted=0,
        artifacts=[
            artifact_of(ws, w, roots)
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
        **({"policy": receipt_policy(in_force, None, [])} if in_force is not None else {}),
        # what the dead run was asked to do
        **({"args": started.spec.args} if started is not None and started.spec is not None and started.spec.args
           else {}),
    )
    return receipt


def _reached(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """The journal entries a run that died reached, in order: its own, and before the last of them the
    operation's entries it replayed (a replayed result is not copied into the replaying run's journal),
    marked `replayed`."""
    own = store.journal(run_id)
    last = max((r["seq"] for r in own if r["seq"] > 0), default=0)
    if not last:
        return own
    from dal.runner import journal

    mine = {r["seq"] for r in own}
    earlier = [
        {"seq": p.seq, "command": p.command, "class": p.effect_class, "result": p.result,
         "detail": {**p.detail, "replayed": True}}
        for p in journal.load(store, run_id).entries.values()
        if 0 < p.seq < last and p.seq not in mine and p.origin != run_id
    ]
    return sorted(own + earlier, key=lambda r: r["seq"])


class _RunState:
    """State of one run while it executes."""

    def __init__(self, spec: RunSpec, hooks: RunHooks) -> None:
        self.spec = spec
        self.hooks = hooks
        self.workspace = Path(spec.workspace)
        self.run_id = new_run_id()
        self.started_at = utc_timestamp()
        self.t0 = time.monotonic()
        self.store: RunStore | None = None
        self.lock: OperationLock | None = None
        self.own_lock: OperationLock | None = None  # a run without a key: `run:<run_id>`, held for its life
        self.key: str | None = spec.key
        self.key_by_script = False  # the key came from operation("K") in the script, not from the operator
        self.key_from_call = False  # ... and this run's own operation("K") call entered it (not a resume)
        self.previous: dict[str, Any] | None = None
        self.attempts: dict[str, int] | None = None
        self.begun = False
        self.skipped_of: str | None = None
        # new (a fresh journal) | resume (replays every result) | retry (after failed or exhausted: replays
        # what must not run twice) | duplicate (the key already completed)
        self.kind = "new"
        self.sha256: str | None = None  # of the script's text, once read
        # The policy in force: the command line's for a new operation, the operation's stored one (plus this
        # command line's flags) once the run turns out to continue one (see adopt_policy).
        self.policy: Policy = spec.policy
        self.adopted: Adopted | None = None
        self.handler: EffectHandler | None = None
        self.env_read: dict[str, bool] = {}  # env() names asked for -> whether the policy let the script see it
        self.leaked_env: list[str] = []  # see adopt_policy
        self._policy_files: list[str] | None = None  # see recorded_policy_files
        self.previous_by_script = False  # `dal resume` of a run whose script chose its key
        # The run this one continues when it lost its key lock rather than let go and may still be running
        # (another host): run_id, host, pid and the effect it was executing (effect, command); see _refuse_live.
        self.lost_run: dict[str, Any] | None = None

    # --- the policy in force -------------------------------------------------------------------

    def protect(self, policy: Policy) -> Policy:
        return protect_spec(self.spec, policy)

    def recorded_policy_files(self) -> list[str]:
        """The policy files runs of this workspace started under, as the store recorded them (read once)."""
        if self._policy_files is None:
            try:
                self._policy_files = self.open_store().policy_files(self.spec.policy.workspace)
            except StoreError as e:
                raise RunnerError(f"{e} Nothing ran.") from None
        return self._policy_files

    def guarded(self, policy: Policy) -> Policy:
        """The policy effects are checked and walled under: `policy` with every policy file of the workspace
        protected (docs/policy.md, "Policy files are protected"), not only the one in force. Not stored with
        the run: the stored policy is what the operation allows, this is what no script may change."""
        return policy.protecting(self.recorded_policy_files())

    def getenv(self, name: str) -> str | None:
        """`env(name)` under the policy in force."""
        visible = self.policy.env_visible(name)
        self.env_read[name] = self.env_read.get(name, False) or visible
        return self.policy.getenv(name)

    def adopt_policy(self, prev: dict[str, Any], operation: str) -> list[str]:
        """This run continues `prev`'s operation: run under the policy stored with it, widened by this
        command line's flags (docs/policy.md, "The policy in force"). Returns the env() names the script
        already read that the adopted policy does not let it read (only possible before operation("K"))."""
        store = self.open_store()
        row = store.run_row(prev["run_id"]) or prev
        try:
            stored = stored_policy(row)
        except PolicyError as e:
            raise RunnerError(f"run {prev['run_id']}: {e}; the operation cannot continue under a policy DAL "
                              "cannot read (start a new operation)") from None
        if stored is None:  # started by a DAL that kept only its flags: the command line's policy stands
            notice = (f"run {prev['run_id']} did not store its policy (an older DAL started it): this run uses "
                      f"the policy of its own command line ({self.policy.source})")
            self.adopted = Adopted(self.policy, prev["run_id"], {}, [notice])
            self._notify([notice])
            return []
        if os.path.realpath(stored.workspace) != str(self.workspace):
            raise RunnerError(
                f"operation {operation!r} started in workspace {stored.workspace}, and this run's workspace is "
                f"{self.workspace}: continue it there (--workspace {sh_quote(stored.workspace)}), or use another key"
            )
        if self.key_from_call:
            # The script chose the key: it may continue the operation only under the very policy it would
            # run under anyway, or operation("K") would hand a script K's wider policy (docs/policy.md).
            own = self.protect(self.spec.policy)
            if own != stored:
                raise RunnerError(
                    f"operation({quote(operation)}) in the script would continue operation {operation!r} (run "
                    f"{prev['run_id']}), which runs under the policy it started with (policy {policy_digest(stored)}"
                    f"), and this run's policy is another (policy {policy_digest(own)}): a key the script chooses "
                    f"continues an operation only under the same policy. Nothing more ran. To continue it, the "
                    f"operator runs `dal resume {prev['run_id']}` or `dal run --key {sh_quote(operation)} SCRIPT`; "
                    "or use another key"
                )
        try:
            self.adopted = adopt(stored, prev["run_id"], self.spec.policy, self.spec.policy_flags, operation)
        except PolicyError as e:
            raise RunnerError(str(e)) from None
        self.policy = self.protect(self.adopted.policy)
        if self.handler is not None:
            self.handler.ctx = effect_context(self.spec, self.guarded(self.policy)).evolve(
                cancel=self.handler.ctx.cancel)
        self._notify(self.adopted.notices)
        return [n for n, seen in self.env_read.items() if seen and not self.policy.env_visible(n)]

    def _notify(self, notices: list[str]) -> None:
        if self.hooks.notify is not None:
            for n in notices:
                self.hooks.notify(n)

    def receipt_policy(self) -> dict[str, Any]:
        withheld = sorted(n for n, seen in self.env_read.items() if not seen)
        return receipt_policy(self.policy, self.adopted, withheld)

    # --- store and key ---------------------------------------------------------------------

    def open_store(self) -> RunStore:
        if self.store is None:
            try:
                store = self.hooks.store if self.hooks.store is not None else open_location(self.spec.store)
                # Every commit survives kill -9; only intents that must never be lost pay an fsync
                # (see _BeginFirst and docs/durability.md).
                store.set_synchronous("NORMAL")
            except StoreError as e:
                # Opened before the run is recorded, and a run journals before each effect: nothing ran.
                raise RunnerError(str(e) if self.begun else f"{e} Nothing ran.") from None
            if os.environ.get("DAL_TEST_STORE_FAULT"):
                from dal.runner.faults import wrap

                store = wrap(store)
            self.store = store
        return self.store

    def enter_key(self, key: str, handler: EffectHandler | None, resuming: str | None = None,
                  by_script: bool = False) -> None:
        """Lock the key; decide new attempt, resume, retry or skip from the key's newest run.

        `resuming`: the run `dal resume` named; it must still be the key's newest run. `by_script`: the
        script chose the key (operation("K")): only runs of the same script count (see `_visible`)."""
        store = self.open_store()
        self.key = key
        # A resume of a run whose script chose its key continues that script's operation, and is recorded
        # as such: it never counts for an operator's `--key K` of another script (docs/policy.md).
        self.key_by_script = by_script or (resuming is not None and self.previous_by_script)
        self.key_from_call = by_script
        try:
            self.lock = store.operation_lock(key)
            self.lock.acquire(self.run_id, self.spec.wait)
        except KeyBusy as e:
            self.lock = None
            raise RunnerError(str(e), exit_code=3) from None
        except OSError as e:
            self.lock = None
            raise RunnerError(f"cannot lock operation {key!r} in {store.locks_where()}: "
                              f"{e.strerror or e}") from None
        try:
            prev = store.newest_run_of_key(key, visible=self._visible)
        except StoreError as e:
            raise RunnerError(str(e)) from None
        if resuming is not None and (prev is None or prev["run_id"] != resuming):
            later = f"run {prev['run_id']} ({prev['status']})" if prev else "a later run"
            raise RunnerError(
                f"run {resuming} was already continued by {later}: resume or inspect that one instead "
                f"(`dal receipt show {sh_quote(key)}`)"
            )
        if prev is None and by_script and not self.spec.new_attempt:
            self._refuse_other_scripts_key(store, key)
        self.attempts = self._attempts_so_far(prev)
        if prev is None:
            self.kind = "new"
            return
        status = prev["status"]
        if status == "skipped" and prev.get("skipped_of"):
            status = "completed"
        if status == "running":
            self._refuse_live(store, prev, key)
            if handler is not None and self.lost_run is not None:
                handler.lost_run = self.lost_run
            # We hold the key's lock, so the process that began this run is gone (kill -9, power
            # loss, a store that refused its receipt): give it its receipt, then continue its journal.
            self._bury(prev)
        if not self.spec.new_attempt:
            self._same_args(prev, key)
        if self.spec.new_attempt:
            # The operator closes the operation's journal: a fresh one, linked to the run it follows
            # (recorded at once, like every run that continues one: see Store.begin_run).
            self.previous = {"run_id": prev["skipped_of"]} if prev["status"] == "skipped" else prev
            self.kind = "new"
            self.begin(key)
            return
        if status == "completed":
            self.kind = "duplicate"
            self.skipped_of = prev.get("skipped_of") or prev["run_id"]
            self.previous = prev
            return
        self.previous = prev
        self.leaked_env = self.adopt_policy(prev, key)  # every later run of an operation runs under its policy
        # The journal belongs to the operation: every attempt after the first continues it, whatever the
        # last one did. A resume replays every journaled result; a retry after failed or exhausted
        # replays what must not run twice and runs reads and idempotent writes again.
        self.kind = self.continues_as(prev, status)
        if handler is not None:
            self.load_replay(prev["run_id"], handler)
        # Recorded at once, so that `dal approve` sees which run continues the operation.
        self.begin(key)

    def _refuse_live(self, store: RunStore, prev: dict[str, Any], key: str) -> None:
        """The key's lock was free, yet its newest run may still be executing: a PostgreSQL lock goes with its
        session, which can end while its process lives on (attack7 01). When the previous holder never let go
        of the lock (lost_holder) and is this run: if its process provably still runs on this machine (its
        pid, start time, boot and pid namespace as its lock row recorded them), refuse (exit 3): that run
        stops at its next effect (its intents are fenced by the lock) and records its receipt; then the key
        is free to continue. The same when it ran in another pid namespace of this machine (a container's
        DAL) that this process cannot see into: its pid means nothing here (attack10 02b). On another host
        nothing proves it alive or dead: the run is buried, the fence keeps it from starting another effect,
        and what it was executing is recorded as possibly still running (`self.lost_run`, attack10 02)."""
        from dal.runner.liveness import lost_holder_verdict

        lost = self.lock.lost_holder if self.lock is not None else None
        if not lost or lost.get("run_id") != prev["run_id"]:
            return
        try:
            row = store.run_row(prev["run_id"]) or prev
        except StoreError as e:
            raise RunnerError(str(e)) from None
        ident = lost.get("holder")
        pid = lost.get("pid", row.get("pid"))
        how, judged = lost_holder_verdict(lost, row)
        live = {"alive": True, "gone": False}.get(judged)
        if how is None and pid == os.getpid():
            return
        if live is False:
            return
        host = lost.get("host") or row.get("host") or "another host"
        if live is None and how not in ("pidns",):
            self.lost_run = {"run_id": prev["run_id"], "host": host, "pid": pid, **_in_flight(store, prev["run_id"])}
            return
        where = (f"{pid} in another pid namespace of this machine (pid namespace {ident['where'].get('pidns')})"
                 if how == "pidns" and isinstance(ident, dict) else f"{pid} on this machine")
        if live:
            raise RunnerError(
                f"operation {key!r} is being run by process {where} (run {prev['run_id']}), which lost its key "
                "lock (its database session ended) while it runs; nothing ran. That run stops at its next effect "
                "and records its receipt; run this again once it has",
                exit_code=3)
        raise RunnerError(
            f"operation {key!r} may still be being run by process {where} (run {prev['run_id']}), which lost its "
            "key lock (its database session ended); this process cannot see into that pid namespace, so it "
            "cannot tell whether that run still runs, and nothing ran. A run that still runs stops at its next "
            "effect and records its receipt: run this again once it has, or from that pid namespace or the "
            "machine's own (which see its processes) once it has ended",
            exit_code=3)

    def _same_args(self, prev: dict[str, Any], key: str) -> None:
        """An operation runs with the arguments it started with: a later invocation of its key that gives
        other values would skip, replay or resume work done for those (a message sent to another person).
        Refused before anything runs; --new-attempt starts the operation over with the new values."""
        try:
            stored = StoredRun.of(self.open_store().run_row(prev["run_id"]) or {})
        except (PolicyError, SpecError, StoreError):
            return  # a row that cannot be read is reported where the policy in force is adopted
        theirs = stored.spec.args if stored.spec is not None else {}
        mine = self.spec.args
        if theirs == mine:
            return

        def shown(args: dict[str, Any]) -> str:
            return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) or "no arguments"

        raise RunnerError(
            f"operation {key!r} was started with {shown(theirs)} (run {prev['run_id']}); this run gives "
            f"{shown(mine)}. No effect ran. Arguments are part of an operation: give other values their own key "
            f"(e.g. operation(\"send-\" + to)), run with the same values, or start the operation over with "
            "--new-attempt"
        )

    def continues_as(self, prev: dict[str, Any], status: str) -> str:
        """How this attempt uses the journal of the run it continues: `retry` after failed or exhausted,
        `resume` after waiting, interrupted or died; except that an attempt that was itself a retry and
        stopped before its end (interrupted, died) is continued as a retry again. It had run reads again
        and may have left the path the journal's older entries took before it could mark them forgotten;
        a resume would replay its fresh read and then those entries, a divergence that never was."""
        if status not in RESUMABLE:
            return "retry"
        if status in ("interrupted", "running"):
            from dal.runner.journal import RETRY, attempt_of

            try:
                row = self.open_store().run_row(prev["run_id"]) or prev
            except StoreError as e:
                raise RunnerError(str(e)) from None
            if attempt_of(row) == RETRY:
                return "retry"
        return "resume"

    def _visible(self, row: dict[str, Any]) -> bool:
        """Whether a run of this run's key belongs to the operation this run may continue or skip. A key
        chosen by a script's operation("K") names an operation of that script only: runs of K by another
        script do not count for it, and a script-chosen K of another script does not count for an operator's
        `--key K` (so that a script cannot complete, and so skip, the operator's job of that key). A script
        is the same by its path, or by its text when reached by another path (moved, renamed, the workspace
        moved or mounted elsewhere): otherwise a completed operation would run again after a `git mv`."""
        if not self.key_by_script and not StoredRun.key_by_script(row):
            return True
        theirs = StoredRun.script_of(row)
        if theirs is None or os.path.realpath(theirs) == os.path.realpath(self.spec.script):
            return True
        return self.sha256 is not None and StoredRun.script_sha256_of(row) == self.sha256

    def _refuse_other_scripts_key(self, store: RunStore, key: str) -> None:
        """operation("K") where K names runs of another script only: this script may be that one, moved and
        edited, whose effects would run a second time; or another script that chose the operator's key. Either
        way the operator decides; nothing runs until then (exit 2)."""
        try:
            other = store.newest_run_of_key(key)
        except StoreError as e:
            raise RunnerError(str(e)) from None
        if other is None:
            return
        theirs = StoredRun.script_of(store.run_row(other["run_id"])) or "an unknown script"
        raise RunnerError(
            f"operation({quote(key)}): operation {key!r} is another script's ({theirs}: run {other['run_id']}, "
            f"{other['status']}); this script ({self.spec.script}) differs from it by path and text, so it "
            "neither continues nor skips that operation. Nothing ran. If this is that script, moved and edited, "
            "and its work is done, there is nothing to do; to run this script's operation anyway (its effects "
            f"run, again if that run did them), the operator runs `dal run --key {sh_quote(key)} "
            f"{sh_quote(self.spec.script)}`; or use another key"
        )

    def _attempts_so_far(self, prev: dict[str, Any] | None) -> dict[str, int]:
        """The counts of the key's invocations before this one, from the newest receipt of the key; a
        run that died before its receipt still counts as an invocation (a resume when it continued an
        earlier run, else a new attempt)."""
        base = {"invocations": 0, "new": 0, "resumes": 0, "duplicates": 0}
        if prev is None or self.store is None:
            return base
        dead: list[dict[str, Any]] = []
        row: dict[str, Any] | None = prev
        receipt = None
        try:
            while row is not None and len(dead) < 100:
                receipt = self.store.get_run(row["run_id"])
                if receipt is not None:
                    break
                dead.append(row)
                row = self.store.run_row(row["previous_run"]) if row.get("previous_run") else None
        except StoreError as e:
            raise RunnerError(str(e)) from None
        got = (receipt or {}).get("attempts") or {}
        for k in base:
            if isinstance(got.get(k), int):
                base[k] = got[k]
        for d in dead:
            base["invocations"] += 1
            base[_count_as(d)] += 1
        return base

    def load_replay(self, run_id: str, handler: EffectHandler) -> None:
        """Hand the handler the operation's journal as it stands after `run_id`, and its decisions."""
        from dal.runner import journal

        try:
            oj = journal.load(self.open_store(), run_id)
        except StoreError as e:
            raise RunnerError(str(e)) from None
        handler.replay = oj.entries
        handler.decisions = oj.decisions
        handler.consumed = oj.consumed
        handler.decided_in = oj.runs
        handler.mode = "retry" if self.kind == "retry" else "resume"

    def _bury(self, prev: dict[str, Any]) -> None:
        """A run whose process died before writing its receipt: give it one, as interrupted. A store that
        refuses it stops this invocation before anything runs (RunnerError); the dead run stays `running`,
        its journal still the operation's, for the next one."""
        store = self.open_store()
        try:
            attempts = None
            if prev.get("key"):
                attempts = self._attempts_so_far(
                    store.run_row(prev["previous_run"]) if prev.get("previous_run") else None)
                attempts["invocations"] += 1
                attempts[_count_as(store.run_row(prev["run_id"]) or prev)] += 1
            lost = self.lost_run if self.lost_run and self.lost_run["run_id"] == prev["run_id"] else None
            blocker = ("the process running this operation died before writing its receipt (killed?); "
                       f"run {self.run_id} continues it from its journal")
            if lost is not None:
                # Not known to be dead (attack10 02): say what is known, not the kill -9 words.
                doing = (f" while executing effect {lost['effect']} (`{lost['command']}`), which it may still be "
                         "executing" if lost.get("effect") else "")
                blocker = (f"this run lost its key lock (its database session ended) on host {lost['host']}, "
                           f"process {lost['pid']}{doing}; it may still be running. Run {self.run_id} continues "
                           "the operation from its journal; this run starts no further effect")
            receipt = crashed_receipt(store, prev, workspace=self.workspace, attempts=attempts, blocker=blocker)
            store.save_receipt(receipt)
        except StoreError as e:
            raise RunnerError(f"{e} Nothing ran: run the same command again once the store can be written.") from None
        except ValueError:  # a receipt DAL cannot rebuild is DAL's bug: the journal still decides what runs
            pass

    def begin(self, operation: str) -> None:
        """Record the run before it executes anything; RunnerError when the store refuses (exit 3 when
        another run already continues the run this one would continue: two runners of one operation)."""
        try:
            self.begin_or_fail(operation)
        except RunContinued as e:
            raise RunnerError(str(e), exit_code=3) from None
        except StoreError as e:
            raise RunnerError(f"{e} Nothing ran: run the same command again once the store can be written.") from None

    def begin_or_fail(self, operation: str) -> None:
        """Record the run in the store (once); StoreError when the store refuses."""
        if self.begun:
            return
        store = self.open_store()
        continues = self.previous is not None and self.kind != "duplicate"
        store.begin_run(
            self.run_id,
            operation=operation,
            key=self.key,
            script_path=self.spec.filename,
            started_at=self.started_at,
            previous_run=self.previous["run_id"] if continues and self.previous else None,
            policy=run_record(self.spec.evolve(policy=self.policy, key=self.key), self.kind, self.sha256,
                              self.adopted.from_run if self.adopted is not None else None,
                              self.adopted.added if self.adopted is not None else None, self.key_by_script),
            # A worker's job: its holder is recorded in this same transaction (a write fewer per job).
            **({"fence": self.hooks.fence} if self.hooks.fence is not None else {}),
        )
        self.begun = True

    def hold_own_lock(self) -> None:
        """A run without a key locks its own run id for its whole life (`run:<run_id>`: the lock `dal resume`
        of this run takes), so that a resume or a decision from anywhere the store reaches meets it, never
        only its pid (another host, another pid namespace: attack10 06, 06b, 06c). Taken before the run is
        recorded; on PostgreSQL its session fences the run's intents as a key's lock does."""
        store = self.open_store()
        try:
            self.own_lock = store.operation_lock("run:" + self.run_id)
            self.own_lock.acquire(self.run_id)
        except KeyBusy as e:  # a fresh run id: nothing else holds it
            self.own_lock = None
            raise RunnerError(f"{e}. Nothing ran.", exit_code=3) from None
        except OSError as e:
            self.own_lock = None
            raise RunnerError(f"cannot lock run {self.run_id} in {store.locks_where()}: {e.strerror or e}. "
                              "Nothing ran.") from None

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        if self.own_lock is not None:
            self.own_lock.release()
            self.own_lock = None
        if self.store is not None:
            if self.hooks.store is None:  # a store the host lent stays open for its next run
                self.store.close()
            self.store = None


def _in_flight(store: RunStore, run_id: str) -> dict[str, Any]:
    """The effect run `run_id` was executing when it stopped reporting: its last journaled intent with no
    result (effect, command), or {} when none."""
    try:
        rows = store.journal(run_id)
    except StoreError:
        return {}
    open_ = [r for r in rows if r["seq"] > 0 and r.get("result") is None
             and not (r.get("detail") or {}).get("pending")]
    return {"effect": open_[-1]["seq"], "command": open_[-1]["command"]} if open_ else {}


def _count_as(row: dict[str, Any]) -> str:
    """Which count of `attempts` a run adds to, from the attempt kind stored with it."""
    kind = StoredRun.attempt_of(row)
    if kind is None:  # stored before runs had kinds
        kind = "resume" if row.get("previous_run") else "new"
    return {"resume": "resumes", "duplicate": "duplicates"}.get(kind, "new")


class _BeginFirst:
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
    $DAL_RUN_STORE_LIMIT (bytes, or with K, M, G; a value DAL cannot read is passed over), else the policy in
    force's `[limits] max_stored_output`, else RUN_STORE_LIMIT."""
    if value:
        return value
    text = os.environ.get(STORE_LIMIT_ENV, "").strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1) if text else 1
    digits = text[:-1] if scale > 1 else text
    if digits.isdigit() and int(digits) > 0:
        return int(digits) * scale
    return policy.limit("max_stored_output") if policy is not None else RUN_STORE_LIMIT


def _resumable(run: _RunState, store: RunStore, ref: str) -> dict[str, Any]:
    """The run `dal resume REF` continues; RunnerError when it cannot be resumed. Any run of an operation
    that has not completed continues it: waiting, interrupted or died (a resume), failed or exhausted
    (a retry, which replays what must not run twice)."""
    try:
        prev = store.find_run(ref)
    except StoreError as e:
        raise RunnerError(str(e)) from None
    status = prev.get("status")
    if status not in RESUMABLE and status not in ("failed", "exhausted"):
        raise RunnerError(
            f"run {prev['run_id']} is {status}: nothing to resume"
            + (f" (its operation already completed in {prev['skipped_of']})"
               if status == "skipped" and prev.get("skipped_of") else "")
            + (" (it was rejected before anything ran: fix the script and run it again)"
               if status == "rejected" else "")
            + (f" (start the work again with `dal run --key {sh_quote(prev['key'])} --new-attempt SCRIPT`)"
               if status in ("completed", "skipped") and prev.get("key") else "")
        )
    return prev


def _lock_keyless(run: _RunState, store: RunStore, prev: dict[str, Any]) -> None:
    """A run without a key has no key lock: lock its run id instead, and refuse while it still runs (it holds
    that lock for its life: _RunState.hold_own_lock) or once a later run continued it."""
    try:
        run.lock = store.operation_lock("run:" + prev["run_id"])
        run.lock.acquire(run.run_id, run.spec.wait)
    except KeyBusy as e:
        run.lock = None
        holder = e.holder
        if holder.get("run_id") == prev["run_id"]:
            where = "another thread of this process" if live_here(prev["run_id"]) else (
                f"process {holder.get('pid', '?')}" + (f" on {holder['host']}" if holder.get("host") else ""))
            raise RunnerError(f"run {prev['run_id']} is still running in {where}; nothing ran. Resume it once it "
                              "has stopped (`dal receipts` shows it), or wait for it with --wait SECONDS",
                              exit_code=3) from None
        raise RunnerError(str(e), exit_code=3) from None
    info = store.run_row(prev["run_id"]) or prev
    if info.get("resumed_by"):
        raise RunnerError(f"run {prev['run_id']} was already continued by run {info['resumed_by']}: "
                          "resume or inspect that one instead")
    if prev["status"] == "running" and live_here(prev["run_id"]):
        raise RunnerError(f"run {prev['run_id']} is still running in another thread of this process",
                          exit_code=3)
    # Our own pid without a live thread: the run ended here without its receipt (dal test's simulated crash).
    if prev["status"] == "running" and info.get("pid") != os.getpid() and run_alive(info):
        raise RunnerError(f"run {prev['run_id']} is still running in process {info['pid']}", exit_code=3)


def _unreached(handler: EffectHandler, outcome: Outcome, checked: Any) -> Outcome:
    """A resumed script that completes without asking for effects its earlier attempt journaled has
    diverged too: those effects happened (or may have), and the script no longer accounts for them."""
    left = sorted((p for p in handler.replay.values() if p.seq > handler.seq and not p.pending
                   and not handler.forgettable(p)), key=lambda p: p.seq)
    if not left:
        return outcome
    first = left[0]
    line = first.detail.get("line")
    err = DivergenceError(
        f"the script no longer matches the journal: it ended after {handler.seq} effect"
        f"{'s' if handler.seq != 1 else ''}, but the earlier attempt journaled effect {first.seq} "
        f"`{first.command}`" + (f" (line {line})" if line else "") + " that the script no longer asks for",
        None, filename=checked.filename, source=checked.source,
        help="the script or its inputs changed since the interrupted attempt; inspect the journal "
        "(dal receipt show); if the change is intended, start a new attempt of the operation (`dal run --key "
        "KEY --new-attempt`), which runs every effect again",
    )
    return Outcome("failed", err, ended_by="error")


def execute(spec: RunSpec, hooks: RunHooks | None = None) -> RunReport:
    """Run `spec` and return its receipt. Raises RunnerError only for problems outside the script."""
    run = _RunState(spec, hooks if hooks is not None else RunHooks())
    mark_live(run.run_id)
    try:
        return _execute(run)
    finally:
        unmark_live(run.run_id)
        run.release()


def _script_text(spec: RunSpec) -> str:
    """The script's text. Below the workspace or a write root a script's programs may have swapped its name
    for a symlink (and its text reaches receipts and diagnostics), so it is read there by descriptor, never
    leaving that root; a script the operator named elsewhere is read as named."""
    below = root_of(spec.script, (spec.workspace, *spec.policy.write_roots))
    if below is None:
        return Path(spec.script).read_text(encoding="utf-8")
    return read_text_below(*below)


def _read_source(spec: RunSpec) -> str:
    name = spec.filename
    try:
        return _script_text(spec)
    except NotBelow as e:
        raise RunnerError(f"cannot read {name}: {e.strerror}") from None
    except FileNotFoundError:
        raise RunnerError(f"no such script: {name}") from None
    except IsADirectoryError:
        raise RunnerError(f"{name} is a directory, not a script") from None
    except UnicodeDecodeError as e:
        raise RunnerError(f"{name} is not UTF-8 text (invalid byte at offset {e.start})") from None
    except OSError as e:
        raise RunnerError(f"cannot read {name}: {e.strerror}") from None


def _check_pinned(spec: RunSpec, digest: str) -> None:
    """A job, a schedule slot and a resume run only the text their run was specified with
    (dal.runner.build.pin_script): a script rewritten since — by another script of the workspace, say,
    to run under this run's wider policy — is refused before anything runs."""
    pinned = spec.extensions.get("script_sha256")
    if not isinstance(pinned, str) or pinned == digest:
        return
    what = "it was submitted or scheduled" if spec.resume is None else f"run {spec.resume} ran it"
    raise RunnerError(
        f"{spec.filename} changed since {what} (its sha256 was {pinned[:12]}..., now {digest[:12]}...): "
        "nothing ran. This run may only run that text, under the policy given for it. Put the script back, or "
        "start the work over with the changed script (submit it again, or `dal run --key KEY --new-attempt`)")


def _execute(run: _RunState) -> RunReport:
    spec, hooks = run.spec, run.hooks
    if spec.key is not None and (at := surrogate_at(spec.key)) is not None:
        raise RunnerError(f"the operation key {quote(spec.key)} is not valid Unicode text "
                          f"(a lone surrogate at character {at})")
    source = _read_source(spec)
    run.sha256 = _sha256_text(source)
    _check_pinned(spec, run.sha256)
    from dal.receipts.files import probe_receipts_dir

    problem = probe_receipts_dir(spec.receipts_dir(), run.workspace)
    if problem is not None:
        raise RunnerError(f"cannot write receipt files in {problem}. Nothing ran. Make the folder writable "
                          "or choose another with --receipts DIR.")
    filename = spec.filename
    checked, errors = (hooks.check or check_source)(source, filename)
    bound: dict[str, Any] = {}
    if checked is not None:
        # The script's arguments, checked before anything runs; from here on the spec (stored with the
        # run, restored by a resume, repeated by `rerun`) holds every argument's value, defaults included.
        from dal.eval.args import bind

        bound, errors = bind(checked.program, spec.args, filename=filename, source=source)
        if not errors and (bound or spec.args):
            run.spec = spec = spec.evolve(extensions={**spec.extensions, "args": bound})
    operation = spec.key or f"script:{Path(filename).stem}"
    run.policy = run.protect(spec.policy)

    if errors:
        run.open_store()
        run.kind = "rejected"
        run.begin(operation)
        return _finish(run, source, operation, Outcome("rejected", errors[0], ended_by="error"),
                       rt=None, handler=None, recorder=None)

    from dal.effects.guard.recover import RecoverRefused, recover

    try:  # what a DAL killed -9 mid-command left: its walls' processes, the checks after its pipeline
        undone = recover(run.policy)
    except RecoverRefused as e:
        raise RunnerError(str(e)) from None
    if undone:
        # Fail closed: this run's policy was loaded from the tree as that command left it (a nested dal.toml
        # it made is the policy of `cd sub && dal run`); the next invocation loads it from the tree put back.
        raise RunnerError("; ".join(undone) + ". Nothing ran: this run's policy was read before that was undone; "
                          "run the command again")
    recorder = LoopRecorder(on_receipt=hooks.on_loop_receipt)
    stopped: list[RunnerError] = []  # operation("K") found the key busy: reported once the script stopped
    got: dict[str, str] = {}  # the signal (or SIGPIPE of a closed output) that stopped the run

    def on_operation(key: str, span: Any) -> OperationVerdict:
        if run.key is not None:
            if key != run.key:
                raise DalRuntimeError(
                    f"operation({json.dumps(key)}) does not match the key this run was started with "
                    f"({run.key!r})"
                )
            return PROCEED
        if (problem := script_key_problem(key)) is not None:
            raise DalRuntimeError(problem)
        try:
            run.enter_key(key, handler, by_script=True)
        except RunnerError as e:
            e.where = DalRuntimeError(str(e), span, filename=spec.filename, source=source)
            stopped.append(e)  # not the script's failure: the runner reports it as the run's end
            return OperationVerdict(stop=str(e))
        if run.leaked_env:
            names = ", ".join(run.leaked_env)
            raise DalRuntimeError(
                f"env() read {names} before operation({json.dumps(key)}) under this command line's policy, but "
                f"operation {key!r} runs under the policy it started with, which does not let the script read "
                f"{'it' if len(run.leaked_env) == 1 else 'them'}: call operation() before env(), or add "
                f"--allow-env={','.join(run.leaked_env)}"
            )
        state["operation"] = key
        if run.kind == "duplicate":
            return OperationVerdict(skip_of=run.skipped_of or "")
        return PROCEED

    on_denied = None
    if hooks.on_denied is not None:
        def on_denied(result: Any, span: Any) -> None:
            policy = run.handler.ctx.policy if run.handler is not None else None  # the one in force now
            hooks.on_denied(EffectDenied(result.command, result.decision.reason, span, filename=filename,
                                         source=source, policy=policy))

    # The writer is the host's before the runtime exists; a closed pipe interrupts the runtime built next.
    write = _stop_on_closed_pipe(hooks.write or sys.stdout.write, got, lambda why: rt.interrupt(why))
    host = RunHost(write=write, recorder=recorder, getenv=run.getenv, on_operation=on_operation,
                   on_denied=on_denied)
    rt = Runtime(max_steps=spec.max_steps, timeout=spec.timeout, host=host, max_memory=spec.max_memory,
                 args=bound)
    store = run.open_store()
    if (problem := unguarded_policy_file(spec.policy, run.recorded_policy_files())) is not None:
        raise RunnerError(problem)
    ctx = effect_context(spec, run.guarded(run.policy))
    state = {"operation": operation}
    # The run is recorded in the store just before its first journal write (or at its end), so that an
    # operation key set by operation("K") at the top of the script is part of the run's record.
    journal = _BeginFirst(store, lambda: run.begin_or_fail(state["operation"]), keyed=lambda: run.key is not None,
                          fence=hooks.fence,
                          # asked at each effect: the policy in force is the operation's once its key is entered
                          limit=lambda: run_store_limit(spec.max_stored_output, run.policy))
    handler = EffectHandler(rt, ctx, journal=journal, run_id=run.run_id, max_effects=spec.max_effects,
                            fake=hooks.fake, simulate_crash=hooks.simulate_crash)
    host.attach(handler)
    run.handler = handler

    if spec.resume:
        prev = _resumable(run, store, spec.resume)
        if prev.get("key"):
            operation = state["operation"] = prev["key"]
            run.previous_by_script = StoredRun.key_by_script(prev)
            run.enter_key(prev["key"], handler, resuming=prev["run_id"])
        else:
            _lock_keyless(run, store, prev)
            run.hold_own_lock()
            run.adopt_policy(prev, prev["operation"])
            run.previous = prev
            run.kind = run.continues_as(prev, prev["status"])
            if prev["status"] == "running":
                run._bury(prev)
            operation = prev["operation"]
            state["operation"] = operation
            # Recorded before its journal is read: a run judged dead that still runs (no key lock fences it)
            # journals no intent once this one is recorded (Store: Continued), so the journal read next is whole.
            run.begin(operation)
            run.load_replay(prev["run_id"], handler)
    elif spec.key:
        run.enter_key(spec.key, handler)
    else:
        run.hold_own_lock()

    if run.kind == "duplicate":
        return _finish(run, source, operation, Outcome("skipped", ended_by="skip"), rt, handler, recorder)

    restore: dict[int, Any] = {}
    if hooks.handle_signals and threading.current_thread() is threading.main_thread():

        def on_signal(signum: int, frame: Any) -> None:
            name = signal.Signals(signum).name
            got["signal"] = name
            rt.interrupt(name)

        # A closed terminal (SIGHUP) or Ctrl-\ (SIGQUIT) stops the run as SIGTERM does: the command under way
        # ends, and what the wall and the git guard undo after it is undone (killed outright, DAL would leave a
        # program's nested dal.toml in place: attack6 08).
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            restore[s] = signal.signal(s, on_signal)
    inflight.started(rt)  # a host's other thread may stop it (dal/runner/inflight.py)
    try:
        outcome = Engine(rt).execute(checked)  # type: ignore[arg-type]
    finally:
        inflight.ended(rt)
        for s, h in restore.items():
            signal.signal(s, h)
    if outcome.ended_by == "stop" and stopped:
        raise stopped[0]
    operation = state["operation"]
    if outcome.status == "completed" and run.kind in ("resume", "retry"):
        outcome = _unreached(handler, outcome, checked)
    report = _finish(run, source, operation, outcome, rt, handler, recorder)
    report.signal_name = got.get("signal")
    if report.exit_code == 2:
        return report
    if report.receipt["status"] == "interrupted" and got.get("signal") in _SIGNAL_EXIT:
        report.exit_code = _SIGNAL_EXIT[got["signal"]]
    return report


# 128 + the signal's number, as a shell reports a program it stopped; Ctrl-C keeps the runtime's 130.
_SIGNAL_EXIT = {"SIGTERM": 143, "SIGPIPE": 141, "SIGHUP": 129, "SIGQUIT": 131}


def _stop_on_closed_pipe(write: Callable[[str], Any], got: dict[str, str],
                         interrupt: Callable[[str], Any]) -> Callable[[str], Any]:
    """The script's output, where a reader that went away (`dal run x | head -2`) stops the run as SIGPIPE
    stops a Unix tool: at its next step (`interrupt` asks the runtime), `interrupted` with its receipt, and
    later output is dropped. An output that cannot be written (ENOSPC, EIO) stops it the same way."""

    def guarded(text: str) -> Any:
        if got.get("signal") == "SIGPIPE" or "output" in got:
            return None
        try:
            return write(text)
        except BrokenPipeError:
            got["signal"] = "SIGPIPE"
            interrupt("SIGPIPE")
            return None
        except OSError as e:  # a full disk, an I/O error: the run stops resumable, not as a bug (attack10 05)
            got["output"] = e.strerror or str(e)
            interrupt(f"a failed write of the script's output ({got['output']})")
            return None

    return guarded


class EffectDenied(DalError):
    """Not raised: what `RunHooks.on_denied` is handed for a denied run() (located, rendered as a warning)."""

    kind = "denied"

    def __init__(self, command: str, reason: str, span: Any, *, filename: str, source: str,
                 policy: Any = None) -> None:
        super().__init__(f"run({json.dumps(command, ensure_ascii=False)}) was denied: {reason}", span,
                         filename=filename, source=source)
        self.command = command
        self.reason = reason
        self.policy = policy  # the dal.effects.Policy that denied it, for a hint that names its roots


def _sandbox_json(handler: EffectHandler | None) -> dict[str, Any] | None:
    """How this run's commands ran (inside bubblewrap or not, and why); None when it called no run()."""
    if handler is None or not handler.count:
        return None
    from dal.effects.exec.running import wall_in_force

    how = wall_in_force(handler.ctx)
    return {"wall": how["wall"], "reason": how["refused"] or how["reason"], "refused": bool(how["refused"])}


def _finish(
    run: _RunState,
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
        script_sha256=_sha256_text(source),
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
    try:
        try:
            if want_files:
                json_path, md_path = write_receipt_files(receipt, spec.receipts_dir(), workspace=run.workspace,
                                                         durable=not stored)
        except OSError as e:
            if not (e.errno == errno.ENOSPC and _free_reserve(run)):
                raise
            json_path, md_path = write_receipt_files(receipt, spec.receipts_dir(), workspace=run.workspace,
                                                     durable=not stored)
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


def _continued_by(run: _RunState, status: str) -> str | None:
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


def _free_reserve(run: _RunState) -> bool:
    """Free the store's reserve file (Store.free_reserve); True when that gave room back."""
    try:
        return run.open_store().free_reserve()
    except (StoreError, RunnerError):
        return False


def _journal_late(run: _RunState, handler: EffectHandler, error: DalError | None) -> None:
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
    run: _RunState, receipt: dict[str, Any], problem: Exception, json_path: Path | None, files_problem: OSError | None
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
