"""The runtime state of one execution: the step counter, budgets, call depth and open loops.

Steps are charged by adding to `rt.steps` and comparing with `rt.limit` (the compiler writes it as
`rt.steps += n; if rt.steps > rt.limit: rt.over_limit(span)`, or, for charges it merges, as
`n = rt.steps + k; if n > rt.limit: <charge statement by statement>; rt.steps = n`). `limit` is the
smaller of the step budget and the next moment to look at the clock and at interrupt requests, so a
single comparison in the hot path guards every budget.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from dal.errors import BudgetExhausted, DalRuntimeError, Interrupted
from dal.records import Record
from dal.syntax.ast import Span

CHECK_EVERY = 20_000  # steps between clock / interrupt checks
DEFAULT_MAX_STEPS = 1_000_000
DEFAULT_MAX_DEPTH = 1000


class FinishSignal(Exception):
    """`finish(value)`: end the run as completed with the script's own result."""

    def __init__(self, value: Any, span: Span) -> None:
        super().__init__("finish")
        self.value = value
        self.span = span


class FailSignal(Exception):
    """`fail(value)`: end the run as failed; a map may set `blocker` and `retry`."""

    def __init__(self, value: Any, span: Span) -> None:
        super().__init__("fail")
        self.value = value
        self.span = span


class WaitSignal(Exception):
    """An effect is held for a person (approval or uncertain outcome): the run stops as waiting."""

    def __init__(self, reason: str, span: Span, detail: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.span = span
        self.detail = detail or {}


class SkipSignal(Exception):
    """The operation key names a completed run: stop before any effect, record a skipped run."""

    def __init__(self, of_run: str) -> None:
        super().__init__(of_run)
        self.of_run = of_run


class LoopSite(Record):
    """A `while` or `for` in the source, compiled once."""

    __slots__ = ("kind", "span", "header", "conjuncts", "reads", "filename")

    def __init__(
        self,
        kind: str,
        span: Span,
        header: str,  # the loop's header text, e.g. `while a < b`
        conjuncts: tuple[str, ...],  # source text of each top-level `and` clause (while only)
        reads: tuple[str, ...],  # names the condition reads, snapshotted at exit
        filename: str,
    ) -> None:
        self.kind = kind
        self.span = span
        self.header = header
        self.conjuncts = conjuncts
        self.reads = reads
        self.filename = filename


class LoopFrame(Record):
    """An open loop: counts and evidence gathered while it runs."""

    __slots__ = ("site", "started_steps", "started_at", "iterations", "evidence", "evidence_omitted")

    def __init__(
        self,
        site: LoopSite,
        started_steps: int,
        started_at: float,
        iterations: int = 0,
        evidence: list[dict[str, Any]] | None = None,
        evidence_omitted: int = 0,
    ) -> None:
        self.site = site
        self.started_steps = started_steps
        self.started_at = started_at
        self.iterations = iterations
        self.evidence = [] if evidence is None else evidence
        self.evidence_omitted = evidence_omitted


class Recorder(Protocol):
    """Receives loop exits; the receipts layer implements it."""

    def loop_exit(
        self,
        frame: LoopFrame,
        reason: str,
        clause: str | None,
        steps: int,
        ended_at: float,
        snapshot: Callable[[], dict[str, Any]],
    ) -> None: ...


EVIDENCE_CAP = 50


class Runtime:
    __slots__ = (
        "steps", "limit", "max_steps", "deadline", "timeout", "depth", "max_depth", "loops",
        "recorder", "write", "interrupt_reason", "filename", "source", "effects", "state", "now",
        "_lock", "on_effect", "context", "observe", "interrupted_at", "getenv",
    )

    def __init__(
        self,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        timeout: float | None = None,
        write: Callable[[str], Any] | None = None,
        recorder: Recorder | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        self.steps = 0
        self.max_steps = max_steps
        self.timeout = timeout
        self.deadline = (time.monotonic() + timeout) if timeout else None
        self.limit = min(max_steps, CHECK_EVERY)
        self.depth = 0
        self.max_depth = max_depth
        self.loops: list[LoopFrame] = []
        self.recorder = recorder
        self.write = write or sys.stdout.write
        self.interrupt_reason: str | None = None
        self.interrupted_at = 0.0
        self.filename = "<string>"
        self.source = ""
        self.effects: Any = None  # the effect handler (run()), set by the runner
        self.state: dict[str, Any] = {}  # run-level facts: operation key, effect count...
        self.now = time.time
        self._lock = threading.Lock()
        self.on_effect: Any = None
        self.context: Any = None
        # How builtins read values the outside world decides (`now`, `env`); the runner journals them.
        self.observe: Callable[[str, Callable[[], Any]], Any] = lambda what, produce: produce()
        # What `env(NAME)` may see: the host sets it from the policy (Policy.getenv); a runtime without a
        # policy sees no variable at all (docs/policy.md, "env()").
        self.getenv: Callable[[str], str | None] = lambda name: None

    def start_clock(self) -> None:
        self.deadline = (time.monotonic() + self.timeout) if self.timeout else None

    # --- the slow path of step charging ---------------------------------------------------

    def over_limit(self, span: Span) -> None:
        """Called when `steps` passed `limit`: a budget, the clock or an interrupt request."""
        if self.interrupt_reason is not None:
            reason, self.interrupt_reason = self.interrupt_reason, None
            self.limit = min(self.max_steps, self.steps + CHECK_EVERY)
            raise Interrupted(
                f"interrupted by {reason}", span, filename=self.filename, source=self.source, signal_name=reason
            )
        if self.steps > self.max_steps:
            raise BudgetExhausted(
                f"step budget exhausted: {self.max_steps:,} steps used (--max-steps)",
                span,
                budget="steps",
                filename=self.filename,
                source=self.source,
                help="raise --max-steps if the work is legitimate, or bound the loop",
            )
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise BudgetExhausted(
                f"time budget exhausted: the run took longer than {self.timeout:g}s (--timeout)",
                span,
                budget="time",
                filename=self.filename,
                source=self.source,
            )
        self.limit = min(self.max_steps, self.steps + CHECK_EVERY)

    def interrupt(self, reason: str = "SIGINT") -> None:
        """Ask the running script to stop at its next step (thread-safe)."""
        self.interrupted_at = time.monotonic()
        self.interrupt_reason = reason
        self.limit = -1

    def too_deep(self, span: Span) -> DalRuntimeError:
        return DalRuntimeError(
            f"maximum call depth ({self.max_depth}) exceeded: is the recursion unbounded?",
            span,
            filename=self.filename,
            source=self.source,
        )

    # --- loops and evidence ---------------------------------------------------------------

    def add_evidence(self, entry: dict[str, Any]) -> None:
        """Add an effect or `record` entry to every open loop (outer loops see inner work)."""
        for lf in self.loops:
            if len(lf.evidence) < EVIDENCE_CAP:
                e = dict(entry)
                e["iteration"] = lf.iterations
                lf.evidence.append(e)
            else:
                lf.evidence_omitted += 1
