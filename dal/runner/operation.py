"""One run's state while it executes, and the operation it belongs to: its key (locked, skipped, resumed
or retried), the run it continues, the policy it runs under, its record in the store."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dal.core.shellword import sh_quote
from dal.effects import Policy, PolicyError
from dal.eval.values import quote
from dal.receipts.ids import new_run_id, utc_timestamp
from dal.receipts.location import open_store as open_location
from dal.receipts.oplock import KeyBusy, live_here
from dal.receipts.store import RunContinued, StoreError
from dal.runner.deadrun import crashed_receipt
from dal.runner.effects import EffectHandler
from dal.runner.inforce import (
    Adopted,
    adopt,
    policy_digest,
    protect_spec,
    receipt_policy,
    stored_policy,
)
from dal.runner.liveness import run_alive
from dal.runner.report import RunnerError
from dal.runner.spec import RunHooks, RunSpec, SpecError, effect_context
from dal.runner.stored import StoredRun, run_record

if TYPE_CHECKING:
    from dal.eval.runtime import Runtime
    from dal.receipts.contract import OperationLock, RunStore


RESUMABLE = frozenset({"waiting", "interrupted", "running"})


class RunState:
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
        self.runtime: Runtime | None = None  # the script's runtime, once built (a closed output interrupts it)
        # The operation the run belongs to: its key, or `script:NAME` until operation("K") or a resume says.
        self.operation = spec.key or ""
        self.env_read: dict[str, bool] = {}  # env() names asked for -> whether the policy let the script see it
        self.leaked_env: list[str] = []  # see adopt_policy
        self._policy_files: list[str] | None = None  # see recorded_policy_files
        self.previous_by_script = False  # `dal resume` of a run whose script chose its key
        # The run this one continues when it lost its key lock rather than let go and may still be running
        # (another host): run_id, host, pid and the effect it was executing (effect, command); see _refuse_live.
        self.lost_run: dict[str, Any] | None = None

    def interrupt(self, why: str) -> None:
        """Stop the script at its next step (a signal, a closed output); nothing to stop before it runs."""
        if self.runtime is not None:
            self.runtime.interrupt(why)

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
                # (see RunJournal and docs/durability.md).
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
        session, which can end while its process lives on. When the previous holder never let go
        of the lock (lost_holder) and is this run: if its process provably still runs on this machine (its
        pid, start time, boot and pid namespace as its lock row recorded them), refuse (exit 3): that run
        stops at its next effect (its intents are fenced by the lock) and records its receipt; then the key
        is free to continue. The same when it ran in another pid namespace of this machine (a container's
        DAL) that this process cannot see into: its pid means nothing here. On another host
        nothing proves it alive or dead: the run is buried, the fence keeps it from starting another effect,
        and what it was executing is recorded as possibly still running (`self.lost_run`)."""
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
            self.lost_run = {"run_id": prev["run_id"], "host": host, "pid": pid, **in_flight(store, prev["run_id"])}
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
                # Not known to be dead: say what is known, not the kill -9 words.
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
        only its pid (another host, another pid namespace). Taken before the run is
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


def in_flight(store: RunStore, run_id: str) -> dict[str, Any]:
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


def resumable(run: RunState, store: RunStore, ref: str) -> dict[str, Any]:
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


def lock_keyless(run: RunState, store: RunStore, prev: dict[str, Any]) -> None:
    """A run without a key has no key lock: lock its run id instead, and refuse while it still runs (it holds
    that lock for its life: RunState.hold_own_lock) or once a later run continued it."""
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

