"""`run()` inside a run: budget, policy, journal, replay, approvals and uncertain outcomes.

Every effect gets a sequence number. Before it starts, its intent is journaled durably; when it
ends, its result. On resume the journal of the previous attempt is replayed: an effect with a
journaled result returns that result without executing; the first one without continues live. An
intent with no result is an unknown outcome: read effects and idempotent local effects run again;
anything else waits for a person (`dal resolve`). An effect whose policy needs approval waits for
`dal approve` / `dal deny`.
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from dal.effects import EffectContext, EffectResult, check_command, execute_checked
from dal.effects.check import Decision
from dal.errors import BudgetExhausted, DivergenceError
from dal.eval.runtime import Runtime, WaitSignal
from dal.syntax.ast import Span

EFFECT_ITEMS_CAP = 200


@attrs.define
class Prior:
    """One journaled effect of an earlier attempt of the same operation."""

    seq: int
    command: str
    effect_class: str | None
    idempotent: bool
    result: dict[str, Any] | None  # None: intent without result
    kind: str = "effect"  # effect | value (now(), env())


def result_from_json(command: str, data: dict[str, Any], decision: Decision) -> EffectResult:
    return EffectResult(
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
    )


def result_to_json(r: EffectResult) -> dict[str, Any]:
    d = r.to_json()
    d.update(stdout=r.stdout, stderr=r.stderr, timeout_s=r.timeout_s)
    return d


class EffectHandler:
    """The callable behind `run()` for one run."""

    def __init__(
        self,
        rt: Runtime,
        ctx: EffectContext,
        *,
        journal: Any = None,  # Store-like: journal_intent / journal_result, or None (no journal)
        run_id: str = "",
        replay: dict[int, Prior] | None = None,
        decisions: dict[int, dict[str, Any]] | None = None,  # seq -> approval/resolution row
        max_effects: int | None = None,
    ) -> None:
        self.rt = rt
        self.ctx = ctx
        self.journal = journal
        self.run_id = run_id
        self.replay = replay or {}
        self.decisions = decisions or {}
        self.max_effects = max_effects
        self.seq = 0
        self.value_seq = 0
        self.count = 0
        self.items: list[dict[str, Any]] = []
        self.omitted = 0
        self.writes: dict[str, None] = {}
        self.external_performed = False
        self.external_uncertain = False
        self.wait: dict[str, Any] | None = None

    # --- values the world decides (now, env) ---------------------------------------------------

    def observe(self, what: str, produce: Any) -> Any:
        """Journal `now()` / `env(...)` so that a resumed run sees the same values."""
        self.value_seq += 1
        key = -self.value_seq  # values live beside effects in the journal, with negative numbers
        prior = self.replay.get(key)
        if prior is not None and prior.command == what and prior.result is not None:
            value = prior.result.get("value")
        else:
            value = produce()
        if self.journal is not None:
            self.journal.journal_intent(self.run_id, key, what, "read", detail={"kind": "value"})
            self.journal.journal_result(self.run_id, key, {"status": "completed", "value": value})
        return value

    # --- run() ---------------------------------------------------------------------------------

    def __call__(self, command: str, span: Span) -> EffectResult:
        rt = self.rt
        seq = self.seq + 1
        if self.max_effects is not None and seq > self.max_effects:
            raise BudgetExhausted(
                f"effect budget exhausted: {self.max_effects} run() calls allowed (--max-effects)",
                span, budget="effects", filename=rt.filename, source=rt.source,
            )
        self.seq = seq
        rt.state["effects_started"] = True
        decision = check_command(command, self.ctx.policy)
        prior = self.replay.get(seq)
        replayed = False
        result: EffectResult | None = None
        if prior is not None:
            if prior.command != command:
                raise DivergenceError(
                    f"the script no longer matches the journal at effect {seq}: the journal holds "
                    f"`{prior.command}`, the script now asks for `{command}`",
                    span, filename=rt.filename, source=rt.source,
                    help="the script or its inputs changed since the interrupted attempt; inspect the "
                    "journal (dal receipt show) and start a new operation key if the change is intended",
                )
            if prior.result is not None:
                result = result_from_json(command, prior.result, decision)
                replayed = True
            else:
                result = self._unknown_outcome(seq, command, prior, decision, span)
                replayed = result is not None
        if result is None:
            result = self._live(seq, command, decision, span)
        elif self.journal is not None:
            self.journal.journal_intent(self.run_id, seq, command, decision.effect_class,
                                        detail={"replayed": True, "line": span.line})
            self.journal.journal_result(self.run_id, seq, result_to_json(result))
        self._account(seq, result, span, replayed)
        return result

    def _decision_for(self, seq: int) -> dict[str, Any] | None:
        return self.decisions.get(seq)

    def _unknown_outcome(
        self, seq: int, command: str, prior: Prior, decision: Decision, span: Span
    ) -> EffectResult | None:
        """An intent with no result: re-run it if that is safe, else hold it for a person."""
        row = self._decision_for(seq)
        verdict = (row or {}).get("decision", "")
        who = (row or {}).get("who") or "an operator"
        if verdict == "resolved:done":
            return EffectResult(command=command, status="completed", code=0, stdout="", stderr="", decision=decision)
        if verdict == "resolved:failed":
            return EffectResult(command=command, status="failed", code=None, stdout="",
                                stderr=f"resolved as failed by {who}", decision=decision)
        if verdict == "resolved:retry":
            return None
        if prior.effect_class == "read" or (prior.effect_class == "local" and prior.idempotent):
            return None  # safe to run again
        if prior.effect_class is None and verdict.startswith("approved"):
            return None
        self.wait = {
            "reason": "uncertain",
            "seq": seq,
            "command": command,
            "effect_class": prior.effect_class,
        }
        if prior.effect_class == "external":
            self.external_uncertain = True
        if self.journal is not None:
            self.journal.journal_intent(self.run_id, seq, command, prior.effect_class,
                                        detail={"uncertain": True, "idempotent": prior.idempotent})
        raise WaitSignal(
            f"effect {seq} (`{command}`) may or may not have happened: it was started by an earlier attempt "
            "that stopped before recording its result",
            span,
            self.wait,
        )

    def _live(self, seq: int, command: str, decision: Decision, span: Span) -> EffectResult:
        started = time.perf_counter()
        if not decision.allowed:
            result = EffectResult(command=command, status="denied", code=None, stdout="", stderr="",
                                  decision=decision)
            if self.journal is not None:
                self.journal.journal_intent(self.run_id, seq, command, decision.effect_class,
                                            detail={"denied": True, "line": span.line})
                self.journal.journal_result(self.run_id, seq, result_to_json(result))
            return result
        if decision.approval_required:
            row = self._decision_for(seq)
            verdict = (row or {}).get("decision")
            if verdict == "denied":
                who = row.get("who") or "an operator"  # type: ignore[union-attr]
                note = row.get("note")  # type: ignore[union-attr]
                denied = attrs.evolve(
                    decision, allowed=False,
                    reason=f"approval denied by {who}" + (f": {note}" if note else ""),
                )
                result = EffectResult(command=command, status="denied", code=None, stdout="", stderr="",
                                      decision=denied)
                if self.journal is not None:
                    self.journal.journal_intent(self.run_id, seq, command, decision.effect_class,
                                                detail={"approval": "denied"})
                    self.journal.journal_result(self.run_id, seq, result_to_json(result))
                return result
            if verdict != "approved":
                self.wait = {"reason": "pending_approval", "seq": seq, "command": command,
                             "effect_class": decision.effect_class}
                raise WaitSignal(f"effect {seq} needs approval: `{command}`", span, self.wait)
        if self.journal is not None:
            self.journal.journal_intent(
                self.run_id, seq, command, decision.effect_class,
                detail={"idempotent": decision.idempotent, "line": span.line,
                        "approved": bool(decision.approval_required)},
            )
        result = execute_checked(command, decision, self.ctx, _started=started)
        if self.journal is not None:
            self.journal.journal_result(self.run_id, seq, result_to_json(result))
        return result

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
            self.items.append({
                "seq": seq,
                "command": result.command,
                "status": result.status,
                "class": d.effect_class,
                "code": result.code,
                "summary": result.summary,
                "reason": d.reason,
                "reads": list(d.reads),
                "writes": list(d.writes),
                "duration_ms": round(result.duration_ms, 3),
                "line": span.line,
                "column": span.column,
                "loop_iteration": iteration,
                "replayed": replayed,
            })
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
