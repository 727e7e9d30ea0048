"""`run()` inside a run: budget, policy, journal, replay, approvals and uncertain outcomes.

Every effect gets a sequence number. Before it starts, its intent is journaled durably; when it
ends, its result. On resume the journal of the previous attempt is replayed: an effect with a
journaled result returns that result without executing; the first one without continues live. An
intent with no result is an unknown outcome: read effects and idempotent local effects run again;
anything else waits for a person (`dal resolve`). An effect whose policy needs approval waits for
`dal approve` / `dal deny`; its proposed command is journaled (marked `pending`) so that a resume
checks the approved command is still the one the script asks for.

Test-only crash hook: `DAL_TEST_CRASH_AT=BOUNDARY:SEQ[,BOUNDARY:SEQ...]` kills this process with SIGKILL
at that boundary of effect SEQ, to test recovery from a crash at an exact point. Boundaries:
`before-intent`, `after-intent` (intent journaled, nothing executed), `during` (the effect's programs
are running: SIGKILL after `DAL_TEST_CRASH_DELAY` seconds, default 0.3), `after-exec` (executed, result
not journaled), `after-result`. It is read once per run; nothing sets it outside the test suite.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dal.effects import Decision, EffectContext, EffectResult

from dal import effects as fx  # names resolved on first use: no shell parser until the first run()
from dal.core.errors import BudgetExhausted, DivergenceError, Interrupted
from dal.core.shellword import sh_quote
from dal.eval.runtime import Runtime, WaitSignal
from dal.receipts.build import effect_item
from dal.receipts.nextstep import LOST_LOCK
from dal.receipts.store import Continued, LockLost, StoreError, StoreGone
from dal.runner.journal import Prior, rerunnable
from dal.syntax.ast import Span

EFFECT_ITEMS_CAP = 200
STOP_GRACE_ENV = "DAL_STOP_GRACE"
DEFAULT_STOP_GRACE = 5.0


def stop_grace() -> float:
    """Seconds a running command may go on after Ctrl-C or SIGTERM before DAL stops it."""
    try:
        return max(0.0, float(os.environ.get(STOP_GRACE_ENV, DEFAULT_STOP_GRACE)))
    except ValueError:
        return DEFAULT_STOP_GRACE
CRASH_ENV = "DAL_TEST_CRASH_AT"
CRASH_BOUNDARIES = ("before-intent", "after-intent", "during", "after-exec", "after-result")


def result_from_json(command: str, data: dict[str, Any], decision: Decision) -> EffectResult:
    return fx.EffectResult(
        command=command,
        status=data.get("status", "completed"),
        code=data.get("code"),
        stdout=data.get("stdout", ""),
        stderr=data.get("stderr", ""),
        decision=decision,
        duration_ms=float(data.get("duration_ms", 0.0)),
        stdout_truncated=bool(data.get("stdout_truncated", False)),
        stderr_truncated=bool(data.get("stderr_truncated", False)),
        timeout_s=data.get("timeout_s"),
        limit=data.get("limit"),
        wall=data.get("wall"),
    )


def result_to_json(r: EffectResult) -> dict[str, Any]:
    d = r.to_json()
    d.update(stdout=r.stdout, stderr=r.stderr, timeout_s=r.timeout_s)
    return d


def pins_a_retry(p: Prior) -> bool:
    """Whether a retry must replay journal entry `p` rather than run it again: an effect that must not run
    twice (non-idempotent local, external, unclassified) whether its outcome is known or not, and any
    effect a person decided about. A proposal that never started and a command the policy denied (it never
    ran) are not."""
    if p.kind != "effect" or p.pending or p.detail.get("forgotten"):
        return False
    decided = "decision" in p.detail or bool(p.detail.get("approved")) or "approval" in p.detail
    if p.detail.get("denied") and not decided:
        return False
    return decided or not rerunnable(p.effect_class, p.idempotent)


def replay_barrier(entries: dict[int, Prior]) -> int:
    """The last effect of an operation's journal that a retry replays (pins_a_retry), 0 when none.

    A retry runs reads and idempotent writes again only after it, and replays everything up to it. Before
    it, running them again would not be the same: an idempotent write (`> f`, `cp`, `rm -f`) run again
    after the append that followed it undoes the append, which is replayed, not redone; and a read run
    again sees what the operation itself did after it (a "check, then act" guard finds its own send and
    takes the other path), so the script no longer matches the effects that happened."""
    return max((p.seq for p in entries.values() if p.seq > 0 and pins_a_retry(p)), default=0)


def _crash_plan() -> set[tuple[str, int]]:
    """Parse DAL_TEST_CRASH_AT (test-only)."""
    raw = os.environ.get(CRASH_ENV, "")
    plan: set[tuple[str, int]] = set()
    for part in raw.split(","):
        name, _, num = part.strip().partition(":")
        if name in CRASH_BOUNDARIES and num.strip().isdigit():
            plan.add((name, int(num)))
    return plan


class SimulatedCrash(BaseException):  # noqa: N818 - a crash, not an error
    """`dal test`'s in-process crash (`crash_after` / `crash_before`): raised right after effect `seq`'s
    result (`after-result`) or intent (`after-intent`) is journaled. Not an Exception, so nothing in the
    script or the engine catches it: no receipt is written and the run stays `running` in the store, as
    after kill -9; `runner.execute` still releases the key lock on the way out."""

    def __init__(self, run_id: str, seq: int, boundary: str) -> None:
        super().__init__(f"simulated crash at {boundary} of effect {seq}")
        self.run_id = run_id
        self.seq = seq
        self.boundary = boundary


def _evolve(decision: Decision, **changes: Any) -> Decision:
    """`attrs.evolve` of a Decision (an attrs class of the effects layer, loaded once an effect ran)."""
    import attrs

    return attrs.evolve(decision, **changes)


def _die_now() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _who(row: dict[str, Any] | None) -> str:
    row = row or {}
    text = f"{row.get('who') or 'an operator'}"
    if row.get("at"):
        text += f" at {row['at']}"
    if row.get("note"):
        text += f" ({row['note']})"
    return text


APPROVALS = ("approved", "denied")
RESOLUTIONS = ("resolved:done", "resolved:failed", "resolved:retry")


class JournalUnavailable(Interrupted):
    """The run store could not take a journal entry (locked past its busy timeout, disk full, read-only,
    gone): the run stops there, as `interrupted` with error kind `store`, and the next attempt continues
    from the journal. Nothing is executed after a journal write failed."""

    kind = "store"

    def __init__(self, message: str, span: Span | None = None, *, seq: int = 0, **kw: Any) -> None:
        super().__init__(message, span, signal_name="store", **kw)
        self.seq = seq


class EffectHandler:
    """The callable behind `run()` for one run.

    `mode` says how the journal in `replay` is used: `resume` (after waiting, interrupted or died)
    replays every journaled result; `retry` (after failed or exhausted) replays what must not run twice
    and runs reads and idempotent local effects again, since the failure may have been theirs."""

    def __init__(
        self,
        rt: Runtime,
        ctx: EffectContext,
        *,
        journal: Any = None,  # Store-like: journal_intent / journal_result (/ journal_hold), or None
        run_id: str = "",
        replay: dict[int, Prior] | None = None,
        decisions: dict[int, list[dict[str, Any]]] | None = None,  # seq -> unused decisions, oldest first
        max_effects: int | None = None,
        fake: Any = None,  # dal test: (command, decision) -> EffectResult | None, used in place of executing
        simulate_crash: tuple[str, int] | None = None,  # dal test: (boundary, seq) raises SimulatedCrash
    ) -> None:
        self.rt = rt
        if ctx.cancel is None:
            # Ctrl-C or SIGTERM lets the command under way finish for a grace period, so that its result
            # is journaled; past it the command is stopped and its outcome is unknown.
            grace = stop_grace()
            ctx = ctx.evolve(
                cancel=lambda: rt.interrupt_reason is not None and time.monotonic() - rt.interrupted_at >= grace,
            )
        self.fake = fake
        self.simulate_crash = simulate_crash
        self.ctx = ctx
        self.journal = journal
        self.run_id = run_id
        self.replay = replay or {}
        self.decisions = decisions or {}
        self.mode = "resume"
        self.consumed: dict[int, int] = {}  # seq -> highest decision id the journal shows was acted on
        self.decided_in: list[str] = []  # the runs of the operation whose decisions apply
        self._used: dict[int, int] = {}  # seq -> the decision this run acted on
        self._gated: set[int] = set()  # effects whose intent a gate journaled with the decision it acts on
        self._barrier: int | None = None  # replay_barrier() of the journal, once a retry needs it
        # an effect that ran but whose result the store did not take: seq, result, class, idempotent
        self.unjournaled: dict[str, Any] | None = None
        # The run this one continues when it lost its key lock and may still be running (the runner's
        # operation.RunState.lost_run): an effect it left without a result may still be under way there.
        self.lost_run: dict[str, Any] | None = None
        self.max_effects = max_effects
        self.seq = 0
        self.value_seq = 0
        self.count = 0
        self.replayed = 0
        self.items: list[dict[str, Any]] = []
        self.omitted = 0
        self.writes: dict[str, None] = {}
        self.external_performed = False
        self.external_uncertain = False
        self.wait: dict[str, Any] | None = None
        self._crash = _crash_plan()

    # --- test-only crash hook --------------------------------------------------------------------

    def _crash_at(self, boundary: str, seq: int) -> None:
        if self.simulate_crash == (boundary, seq):
            raise SimulatedCrash(self.run_id, seq, boundary)
        if (boundary, seq) not in self._crash:
            return
        if boundary == "during":
            delay = float(os.environ.get("DAL_TEST_CRASH_DELAY", "0.3"))
            t = threading.Timer(delay, _die_now)
            t.daemon = True
            t.start()
            return
        _die_now()

    # --- the journal ---------------------------------------------------------------------------

    def _write(self, what: str, span: Span | None, seq: int, fn: Any, *args: Any, ran: str = "", **kw: Any) -> Any:
        """One journal write; a store that refuses it stops the run (JournalUnavailable). `ran`: what the
        effect did when it is its result that could not be journaled."""
        try:
            return fn(*args, **kw)
        except StoreError as e:
            if ran:
                message = f"effect {seq} ({what}) ran ({ran}), but the run store could not journal its result: {e}"
            else:
                message = f"the run stopped at effect {seq} ({what}), which did not run: {e}" if seq > 0 else \
                    f"the run stopped at {what}: {e}"
            gone = isinstance(e, StoreGone)
            raise JournalUnavailable(
                message, span, seq=seq, filename=self.rt.filename, source=self.rt.source,
                help="the journal is gone with the store: the effects this receipt lists ran, and a new "
                     "invocation would run them again; check them before you start the operation over" if gone
                else f"nothing to resume here: the operation goes on in run {e.by}" if isinstance(e, Continued)
                else "what was journaled before is intact; once no other invocation of the operation runs, resume "
                     "the run: it continues from the journal" if isinstance(e, LockLost)
                else "what was journaled before is intact; once the store can be written, resume the run: "
                     "it continues from the journal",
            ) from None

    def _after(self, seq: int) -> int:
        """Decisions about effect `seq` with an id at or below this were used already."""
        return max(self.consumed.get(seq, 0), self._used.get(seq, 0))

    def _decision_for(self, seq: int, kinds: tuple[str, ...]) -> dict[str, Any] | None:
        after = self._after(seq)
        rows = [r for r in self.decisions.get(seq, ()) if r.get("decision") in kinds and r.get("id", 0) > after]
        return rows[-1] if rows else None

    def _gate(self, seq: int, command: str, effect_class: str | None, hold: dict[str, Any],
              kinds: tuple[str, ...], span: Span,
              act: Any = None, hold_result: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Effect `seq` waits for a person. Read the newest decision about it now, at the gate, and journal
        what follows from it in the same store transaction: `act(row)` gives the entry that acts on the
        decision ((detail, result or None), or None for nothing), and with no decision the hold (`hold`)
        is journaled. A decision recorded at this very moment is either acted on here or applies to the
        next attempt, never lost between the two; and one that replaced another since this run loaded the
        journal (a deny after an approval) is the one that counts. Returns the decision, or None."""
        if self.journal is None:
            row = self._decision_for(seq, kinds)  # no store: the decisions this run was handed
            if row is not None and act is not None:
                act(row)
            return row
        what = f"`{command}`"
        hold_fn = getattr(self.journal, "journal_hold", None)
        if hold_fn is None:
            row = self._decision_for(seq, kinds)
            entry = act(row) if row is not None and act is not None else None
            if row is None or entry is not None:
                detail, result = (hold, hold_result) if row is None else entry
                self._write(what, span, seq, self.journal.journal_intent, self.run_id, seq, command, effect_class,
                            detail=detail)
                if result is not None:
                    self._write(what, span, seq, self.journal.journal_result, self.run_id, seq, result)
            return row
        return self._write(what, span, seq, hold_fn, self.run_id, seq, command, effect_class, detail=hold,
                           decided_in=[*self.decided_in, self.run_id], kinds=kinds, after=self._after(seq),
                           act=act, **({"result": hold_result} if hold_result is not None else {}))

    # --- values the world decides (now, env) ---------------------------------------------------

    def observe(self, what: str, produce: Any) -> Any:
        """Journal `now()` / `env(...)` so that a resumed run sees the same values."""
        self.value_seq += 1
        key = -self.value_seq  # values live beside effects in the journal, with negative numbers
        prior = self.replay.get(key)
        # A retry reads env() again: a configuration the operator fixed after the failure must reach the
        # operation, and the environment is not something the operation's own effects changed (a value
        # that now changes a command the journal holds is a divergence, as any). now() stays replayed.
        again = self.mode == "retry" and what.startswith("env(")
        if prior is not None and prior.command == what and prior.result is not None and not again:
            return prior.result.get("value")  # the operation's journal has it: no copy in this run's
        value = produce()
        if self.journal is not None:
            self._write(what, None, key, self.journal.journal_intent, self.run_id, key, what, "read",
                        detail={"kind": "value"})
            self._write(what, None, key, self.journal.journal_result, self.run_id, key,
                        {"status": "completed", "value": value})
        return value

    # --- run() ---------------------------------------------------------------------------------

    @property
    def barrier(self) -> int:
        """The last effect this retry replays (replay_barrier), read from the journal it was handed."""
        if self._barrier is None:
            self._barrier = replay_barrier(self.replay)
        return self._barrier

    def _rerun_on_retry(self, prior: Prior) -> bool:
        """A retry runs a journaled read or idempotent local effect again (no person decided about it), when
        nothing the retry replays comes after it (see replay_barrier)."""
        return (self.mode == "retry" and prior.kind == "effect" and rerunnable(prior.effect_class, prior.idempotent)
                and not prior.detail.get("approved") and "decision" not in prior.detail
                and prior.seq > self.barrier)

    def forgettable(self, prior: Prior) -> bool:
        """A retry may drop this entry of a path it no longer takes: it would run it again anyway, or it is
        a command the policy denied (it never ran) that no person decided about."""
        return prior.result is not None and (self._rerun_on_retry(prior) or (
            self.mode == "retry" and bool(prior.detail.get("denied")) and "decision" not in prior.detail))

    def _forget_from(self, seq: int, span: Span) -> bool:
        """A retry asks for another command at `seq` than the journal holds (a read that ran again saw
        something else). When every entry from `seq` on is a read, an idempotent write or a denied command
        that no person decided about, forgetting them repeats nothing that must not run twice: they leave
        this operation's journal (each marked `forgotten` in this run's), and the script goes on live.
        Anything else there is a divergence."""
        if self.mode != "retry":
            return False
        tail = sorted((p for s, p in self.replay.items() if s >= seq), key=lambda p: p.seq)
        if not all(self.forgettable(p) for p in tail):
            return False
        for p in tail:
            del self.replay[p.seq]
            # A decision about a forgotten effect must never apply to what the script now asks at its number.
            used = max([self.consumed.get(p.seq, 0)] + [r.get("id", 0) for r in self.decisions.pop(p.seq, [])])
            detail: dict[str, Any] = {"forgotten": True}
            if used:
                detail["decision"] = self.consumed[p.seq] = used
            if self.journal is not None:
                self._write(f"`{p.command}`", span, p.seq, self.journal.journal_intent, self.run_id, p.seq,
                            p.command, p.effect_class, detail=detail)
        return True

    _recheck: Callable[[], Decision] | None = None  # the current effect's check, repeated (__call__)

    def __call__(self, command: str, span: Span, argv: tuple[str, ...] | None = None, *,
                 stdin: str | None = None, write_to: str | None = None, append: bool = False) -> EffectResult:
        # `argv`: run([...])'s words, checked as they are; `command` is then their shell quoting, the text
        # the journal and the receipt hold (and a resume compares). `stdin` and `write_to` go with them
        # (run([...], {"input": ...}), write_file), and `command` then spells them out, the input whole.
        rt = self.rt
        seq = self.seq + 1
        if self.max_effects is not None and seq > self.max_effects:
            raise BudgetExhausted(
                f"effect budget exhausted: {self.max_effects} run() calls allowed (--max-effects)",
                span, budget="effects", filename=rt.filename, source=rt.source,
            )
        self.seq = seq
        decision = (fx.check_command(command, self.ctx.policy) if argv is None else
                    fx.check_argv(argv, self.ctx.policy, stdin=stdin, write_to=write_to, append=append))
        decision = fx.walled_only(decision, self.ctx)  # no wall here: only the default toolset, before any approval
        # The same check again, for the executor to repeat under the roots' locks when no wall runs.
        self._recheck = ((lambda: fx.check_command(command, self.ctx.policy)) if argv is None else
                         (lambda: fx.check_argv(argv, self.ctx.policy, stdin=stdin, write_to=write_to,
                                                append=append)))
        prior = self.replay.get(seq)
        replayed = False
        result: EffectResult | None = None
        if prior is not None and prior.command != command and self._forget_from(seq, span):
            prior = None  # a retry took another path through effects that may simply run again
        if prior is not None:
            if prior.command != command:
                was = prior.detail.get("line")
                raise DivergenceError(
                    f"the script no longer matches the journal at effect {seq}: the journal holds "
                    f"`{prior.command}`" + (f" (from line {was})" if was else "")
                    + f", the script now asks for `{command}` at line {span.line}",
                    span, filename=rt.filename, source=rt.source,
                    help="the script or its inputs changed since the interrupted attempt; inspect the "
                    "journal (dal receipt show); if the change is intended, start a new attempt of the operation "
                    "(`dal run --key KEY --new-attempt`), which runs every effect again",
                )
            if prior.result is not None:
                if not self._rerun_on_retry(prior):
                    result = self._replay(seq, command, prior, decision, span)
                    replayed = result is not None
            elif not prior.pending:
                result = self._unknown_outcome(seq, command, prior, decision, span)
                replayed = result is not None
        if result is None:
            result = self._live(seq, command, decision, span)
        # A replayed result is not copied into this run's journal: the operation's journal is every run's
        # of the chain (dal.runner.journal), and a copy per replayed effect on every wake-up of a waiting
        # operation would only grow the store. What a person decided is journaled by the gate that read it.
        if replayed:
            self.replayed += 1
        self._account(seq, result, span, replayed)
        return result

    def _replay(self, seq: int, command: str, prior: Prior, decision: Decision, span: Span) -> EffectResult | None:
        """The journaled result of effect `seq`, handed to the script again. A failed or timed-out effect
        that this attempt replays rather than runs again is a gate: a person may have said to run it again
        (`dal resolve --as retry`), and that decision is read now (None: run it again)."""
        if prior.result.get("status") not in ("failed", "timeout"):
            return result_from_json(command, prior.result, decision)
        copy = {k: v for k, v in prior.detail.items() if k not in ("pending", "uncertain", "decision")}
        copy.update(replayed=True, line=span.line, idempotent=decision.idempotent)
        row = self._gate(seq, command, prior.effect_class, copy, ("resolved:retry",), span,
                         act=self._run_again(seq, decision, span), hold_result=prior.result)
        return result_from_json(command, prior.result, decision) if row is None else None

    def _run_again(self, seq: int, decision: Decision, span: Span) -> Any:
        """The gate's action on `resolve --as retry`: the intent of running the effect again, journaled with
        the decision; or, when its policy asks for approval, a new proposal (running it again is a second
        send, and the first approval was for the first one)."""

        def act(row: dict[str, Any]) -> tuple[dict[str, Any], Any] | None:
            self._used[seq] = row["id"]
            if not decision.allowed:
                return None  # the policy now denies it: _live journals the denial
            if decision.approval_required:
                return {"pending": "approval", "line": span.line, "idempotent": decision.idempotent,
                        "decision": row["id"]}, None
            self._crash_at("before-intent", seq)
            self._gated.add(seq)
            return self._intent_detail(seq, decision, span), None

        return act

    def _intent_detail(self, seq: int, decision: Decision, span: Span) -> dict[str, Any]:
        """What the intent of running effect `seq` records (see Store.journal_intent)."""
        detail = {"idempotent": decision.idempotent, "line": span.line,
                  "approved": bool(decision.approval_required), "policy": decision.reason,
                  "writes": list(decision.writes), "programs": list(decision.programs)}
        if seq in self._used:
            detail["decision"] = self._used[seq]  # the approval (or `resolve --as retry`) this run acts on
        return detail

    def _unknown_outcome(
        self, seq: int, command: str, prior: Prior, decision: Decision, span: Span
    ) -> EffectResult | None:
        """An intent with no result: re-run it if that is safe or a person said so, hand the script what a
        person said happened, or else hold it for a person. The decision is read at this gate, and what it
        leads to journaled in the same transaction (see _gate)."""
        if rerunnable(prior.effect_class, prior.idempotent):
            return None  # safe to run again: no person needs to say what happened
        said: dict[str, EffectResult] = {}
        run_again = self._run_again(seq, decision, span)

        def act(row: dict[str, Any]) -> tuple[dict[str, Any], Any] | None:
            self._used[seq] = row["id"]
            verdict = row.get("decision", "")
            if verdict == "resolved:retry":
                return run_again(row)
            if verdict == "resolved:done":
                said["result"] = fx.EffectResult(
                    command=command, status="completed", code=0, stdout="", stderr="",
                    decision=_evolve(decision, reason=f"outcome unknown; resolved as done by {_who(row)}"),
                )
            else:
                said["result"] = fx.EffectResult(
                    command=command, status="failed", code=None, stdout="",
                    stderr=f"resolved as failed by {_who(row)}",
                    decision=_evolve(decision, reason=f"outcome unknown; resolved as failed by {_who(row)}"),
                )
            detail = {k: v for k, v in prior.detail.items() if k not in ("pending", "uncertain")}
            detail.update(replayed=True, line=span.line, idempotent=decision.idempotent, decision=row["id"])
            return detail, result_to_json(said["result"])

        lost = self._lost_at(prior)
        hold = {"uncertain": True, "idempotent": prior.idempotent, "line": span.line}
        if lost is not None:
            hold["lost_lock"] = lost  # carried by every later hold; `dal resolve` reads it (decisions.py)
        row = self._gate(seq, command, prior.effect_class, hold, RESOLUTIONS, span, act=act)
        if row is not None:
            return said.get("result")  # None: resolved:retry, run it again (the person's call)
        why = (
            "an external effect" if prior.effect_class == "external"
            else "not idempotent" if prior.effect_class == "local" else "unclassified"
        )
        self.wait = {
            "reason": "uncertain",
            "seq": seq,
            "command": command,
            "effect_class": prior.effect_class,
        }
        if prior.effect_class == "external":
            self.external_uncertain = True
        if lost is not None:
            # That run never let go of its lock and nothing proves it stopped.
            self.wait["lost_lock"] = lost
            by = f"run {lost.get('run_id')} on host {lost.get('host')} (process {lost.get('pid')})"
            self._hold_item(seq, command, "uncertain", prior.effect_class, decision, span,
                            f"started by {by}, {LOST_LOCK} and may still be executing it; {why}, so it is not "
                            "run again until a person says what happened")
            raise WaitSignal(
                f"effect {seq} (`{command}`) may or may not have happened: it was being executed by {by} when "
                "that run lost its key lock (its database session ended), and it may still be executing it. "
                f"Make sure host {lost.get('host')} is down or has restarted, or process {lost.get('pid')} there "
                f"has ended, or that run has recorded its result (`dal receipt show {sh_quote(lost.get('run_id'))}`), "
                f"before deciding ({why}, so DAL does not run it again)",
                span,
                self.wait,
            )
        self._hold_item(seq, command, "uncertain", prior.effect_class, decision, span,
                        f"started by an earlier attempt that stopped before recording its result; {why}, "
                        "so it is not run again until a person says what happened")
        raise WaitSignal(
            f"effect {seq} (`{command}`) may or may not have happened: it was started by an earlier attempt "
            f"that stopped before recording its result ({why}, so DAL does not run it again)",
            span,
            self.wait,
        )

    def _lost_at(self, prior: Prior) -> dict[str, Any] | None:
        """Who may still be executing the effect `prior` left without a result: the run this one continues,
        when it lost its key lock and wrote that intent itself; or whoever an earlier hold of it named."""
        lost = self.lost_run
        if lost is not None and prior.origin == lost.get("run_id"):
            return {k: lost.get(k) for k in ("run_id", "host", "pid")}
        carried = prior.detail.get("lost_lock")
        return carried if isinstance(carried, dict) else None

    def _live(self, seq: int, command: str, decision: Decision, span: Span) -> EffectResult:
        started = time.perf_counter()
        what = f"`{command}`"
        if not decision.allowed:
            result = fx.EffectResult(command=command, status="denied", code=None, stdout="", stderr="",
                                  decision=decision)
            if self.journal is not None:
                self._write(what, span, seq, self.journal.journal_intent, self.run_id, seq, command,
                            decision.effect_class, detail={"denied": True, "line": span.line})
                self._write(what, span, seq, self.journal.journal_result, self.run_id, seq, result_to_json(result))
            return result
        if decision.approval_required and seq not in self._gated:
            said: dict[str, Any] = {}

            def act(row: dict[str, Any]) -> tuple[dict[str, Any], Any] | None:
                self._used[seq] = row["id"]
                if row.get("decision") == "denied":
                    denied = _evolve(decision, allowed=False, reason=f"approval denied by {_who(row)}")
                    said["result"] = fx.EffectResult(command=command, status="denied", code=None, stdout="",
                                                     stderr="", decision=denied)
                    return ({"approval": "denied", "line": span.line, "decision": row["id"]},
                            result_to_json(said["result"]))
                said["decision"] = approved = _evolve(decision, reason=f"{decision.reason}; approved by {_who(row)}")
                self._crash_at("before-intent", seq)
                self._gated.add(seq)
                return self._intent_detail(seq, approved, span), None

            # The proposal, so that a resume checks the approved command is the one asked for.
            hold = {"pending": "approval", "line": span.line, "idempotent": decision.idempotent}
            if seq in self._used:
                hold["decision"] = self._used[seq]  # the `resolve --as retry` that asks for it again
            row = self._gate(seq, command, decision.effect_class, hold, APPROVALS, span, act=act)
            if row is None:
                self.wait = {"reason": "pending_approval", "seq": seq, "command": command,
                             "effect_class": decision.effect_class}
                self._hold_item(seq, command, "pending_approval", decision.effect_class, decision, span,
                                f"{decision.reason}; waiting for `dal approve` or `dal deny`")
                raise WaitSignal(f"effect {seq} needs approval: `{command}`", span, self.wait)
            if "result" in said:
                return said["result"]
            decision = said["decision"]
        intended: list[bool] = []

        def intent() -> None:
            # The effect's intent, journaled once, before any of its programs may start: inside bubblewrap at
            # the wall's release point (every stage's sandbox set up, none started: a kill -9 while the wall
            # comes up leaves no intent of an effect that never ran), else just before it starts.
            if intended:
                return
            intended.append(True)
            if seq not in self._gated:
                self._crash_at("before-intent", seq)
                if self.journal is not None:
                    extra: dict[str, Any] = {}
                    if getattr(self.journal, "takes_durable", False):
                        # Only an intent whose loss could make the effect run twice must reach the disk before
                        # the effect starts; every commit survives kill -9 anyway (see docs/durability.md).
                        extra["durable"] = not rerunnable(decision.effect_class, decision.idempotent)
                    self._write(what, span, seq, self.journal.journal_intent, self.run_id, seq, command,
                                decision.effect_class, detail=self._intent_detail(seq, decision, span), **extra)
            self._crash_at("after-intent", seq)
            self._crash_at("during", seq)

        result = None
        if self.fake is not None:
            intent()
            result = self.fake(command, decision)
        if result is None:
            try:
                result = fx.execute_checked(command, decision, self.ctx, _started=started, on_start=intent,
                                            recheck=self._recheck)
            except fx.EffectCancelled:
                if not intended:  # stopped before any of its programs started: nothing of it ran
                    reason = self.rt.interrupt_reason or "SIGINT"
                    self.rt.interrupt_reason = None
                    raise Interrupted(
                        f"interrupted by {reason} before `{command}` started: it did not run",
                        span, filename=self.rt.filename, source=self.rt.source, signal_name=reason,
                    ) from None
                # Ctrl-C or SIGTERM while the command ran: it was stopped part-way, so its outcome is
                # unknown. The intent stays without a result, exactly as after a crash: a resume re-runs it
                # only when that is safe, and holds it for a person otherwise.
                reason = self.rt.interrupt_reason or "SIGINT"
                self.rt.interrupt_reason = None
                self._hold_item(seq, command, "uncertain", decision.effect_class, decision, span,
                                f"stopped by {reason} while it ran")
                for w in decision.writes:
                    self.writes.setdefault(w, None)
                if decision.effect_class == "external":
                    self.external_uncertain = True
                raise Interrupted(
                    f"interrupted by {reason} while `{command}` ran: the command was stopped",
                    span, filename=self.rt.filename, source=self.rt.source, signal_name=reason,
                ) from None
        intent()  # none of it started (denied at start, its wall did not come up): journaled with its result
        self._crash_at("after-exec", seq)
        if self.journal is not None:
            try:
                self._write(what, span, seq, self.journal.journal_result, self.run_id, seq, result_to_json(result),
                            ran=result.summary)
            except JournalUnavailable:
                # It ran: the receipt says what it did, and the runner tries once more to journal it.
                self.unjournaled = {"seq": seq, "result": result_to_json(result), "class": decision.effect_class,
                                    "idempotent": decision.idempotent}
                self._account(seq, result, span, False)
                raise
        self._crash_at("after-result", seq)
        return result

    def _hold_item(self, seq: int, command: str, status: str, effect_class: str | None, decision: Decision,
                   span: Span, reason: str) -> None:
        """The receipt's entry for an effect held for a person (it did not execute in this run). It counts
        as a run() call made, like any other."""
        self.count += 1
        if len(self.items) >= EFFECT_ITEMS_CAP:
            self.items.pop()
            self.omitted += 1
        self.items.append(effect_item(
            seq=seq,
            command=command,
            status=status,
            effect_class=effect_class,
            code=None,
            summary="waiting for approval" if status == "pending_approval" else "outcome unknown",
            reason=reason,
            reads=list(decision.reads),
            writes=list(decision.writes),
            programs=list(decision.programs),
            duration_ms=0.0,
            line=span.line,
            column=span.column,
            loop_iteration=self.rt.loops[-1].iterations if self.rt.loops else None,
            replayed=False,
        ))

    def _account(self, seq: int, result: EffectResult, span: Span, replayed: bool) -> None:
        self.count += 1
        d = result.decision
        executed = result.status in ("completed", "failed", "timeout")
        if executed:
            for w in d.writes:
                self.writes.setdefault(w, None)
            if d.effect_class == "external":
                if result.status == "timeout":
                    self.external_uncertain = True
                else:
                    self.external_performed = True
        rt = self.rt
        iteration = rt.loops[-1].iterations if rt.loops else None
        if len(self.items) < EFFECT_ITEMS_CAP:
            self.items.append(effect_item(
                seq=seq,
                command=result.command,
                status=result.status,
                effect_class=d.effect_class,
                code=result.code,
                summary=result.summary,
                reason=d.reason,
                reads=list(d.reads),
                writes=list(d.writes),
                programs=list(d.programs),
                wall=result.wall,
                duration_ms=round(result.duration_ms, 3),
                line=span.line,
                column=span.column,
                loop_iteration=iteration,
                replayed=replayed,
            ))
        else:
            self.omitted += 1
        if rt.loops:
            rt.add_evidence({
                "kind": "effect",
                "operation": result.command,
                "outcome": result.summary,
                "seq": seq,
                "command": result.command,
                "status": result.status,
                "code": result.code,
            })
