"""The runtime state of one execution: the step counter, budgets, call depth and open loops.

Steps are charged by adding to `rt.steps` and comparing with `rt.limit`, in code that one emitter writes
(dal/eval/charges.py: `rt.steps += n; if rt.steps > rt.limit: rt.over_limit(span)`, or, for charges the
compiler merges, `n = rt.steps + k; if n > rt.limit: <charge statement by statement>; rt.steps = n`). `limit` is the
smaller of the step budget and the next moment to look at the clock and at interrupt requests, so a
single comparison in the hot path guards every budget.

Budgets that time decides bind whatever one step costs: while a script runs, a watchdog thread wakes
every few milliseconds and, when the deadline has passed or the process holds more memory than the
memory budget allows, sets `limit` to -1 (as an interrupt does), so the script stops at its next step.
The sizes in `Limits` bound what one step can build, and so how long a step can take.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from dal.core.defaults import MAX_DEPTH, MAX_STEPS
from dal.core.errors import BudgetExhausted, DalRuntimeError, Interrupted
from dal.core.records import Record
from dal.eval.host import Host, NullHost
from dal.eval.values import DEFAULT_MAX_MEMORY, Limits, Meter, size_text
from dal.syntax.ast import Span

CHECK_EVERY = 20_000  # steps between clock / interrupt checks


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


class StopSignal(Exception):
    """The host refused `operation(key)` for a reason outside the script (its key is busy): the script
    stops cleanly and the host reports why."""

    def __init__(self, reason: str, span: Span) -> None:
        super().__init__(reason)
        self.reason = reason
        self.span = span


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


EVIDENCE_CAP = 50


def _resident_bytes(fd: int) -> int:
    """The process's resident memory, from /proc/self/statm (open as `fd`)."""
    return int(os.pread(fd, 100, 0).split()[1]) * _PAGE


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
WATCH_MEMORY_EVERY = 0.02  # seconds between two looks at the memory


class _Watchdog:
    """The thread that enforces a run's deadline and memory budget while its script runs. Memory is the
    growth of the process's resident memory since the script started (Linux; elsewhere only the sizes
    in Limits bound it)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.stop = threading.Event()
        self.fd = -1
        self.base = 0
        if rt.max_memory:
            try:
                self.fd = os.open("/proc/self/statm", os.O_RDONLY)
                self.base = _resident_bytes(self.fd)
            except (OSError, ValueError, IndexError):
                self.close()
        self.thread = threading.Thread(target=self.watch, name="dal-watchdog", daemon=True)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def watch(self) -> None:
        rt = self.rt
        next_memory = time.monotonic() + WATCH_MEMORY_EVERY
        try:
            while True:
                wait = WATCH_MEMORY_EVERY if self.fd >= 0 else 3600.0
                if rt.deadline is not None:
                    wait = min(wait, max(0.0, rt.deadline - time.monotonic()))
                if self.stop.wait(wait):
                    return
                now = time.monotonic()
                if rt.deadline is not None and now >= rt.deadline:
                    rt.trip("time", self)
                    return
                if self.fd >= 0 and now >= next_memory:
                    next_memory = now + WATCH_MEMORY_EVERY
                    if _resident_bytes(self.fd) - self.base > rt.max_memory:
                        rt.trip("memory", self)
                        return
        except (OSError, ValueError, IndexError):
            return  # the memory cannot be read after all: the sizes in Limits still bound it
        finally:
            self.close()


class Runtime:
    __slots__ = (
        "steps", "limit", "max_steps", "deadline", "timeout", "depth", "max_depth", "loops",
        "host", "args", "interrupt_reason", "filename", "source",
        "_lock", "interrupted_at", "max_memory", "limits",
        "tripped", "_watchdog", "_wake", "slept",
    )

    def __init__(
        self,
        *,
        max_steps: int = MAX_STEPS,
        timeout: float | None = None,
        host: Host | None = None,
        args: dict[str, Any] | None = None,
        max_depth: int = MAX_DEPTH,
        max_memory: int = DEFAULT_MAX_MEMORY,
    ) -> None:
        self.steps = 0
        self.max_steps = max_steps
        self.timeout = timeout
        self.deadline = (time.monotonic() + timeout) if timeout else None
        self.limit = min(max_steps, CHECK_EVERY)
        self.max_memory = max_memory
        self.limits = Limits(max_memory)
        self.tripped: str | None = None  # "time" or "memory": the watchdog saw that budget run out
        self._watchdog: _Watchdog | None = None
        self._wake = threading.Event()  # set by an interrupt or the watchdog: ends a `sleep` at once
        self.slept = 0.0  # seconds the script spent in `sleep`
        self.depth = 0
        self.max_depth = max_depth
        self.loops: list[LoopFrame] = []
        # Everything that reaches the world (effects, env, clock, output, loop receipts, the operation
        # key) goes through the host, fixed here for the runtime's life (dal/eval/host.py).
        self.host: Host = host if host is not None else NullHost()
        self.args = args  # the script's arguments (its `param` values) the run was bound to; None: defaults
        self.interrupt_reason: str | None = None
        self.interrupted_at = 0.0
        self.filename = "<string>"
        self.source = ""
        self._lock = threading.Lock()

    def start_clock(self) -> None:
        """The script starts now: the deadline counts from here, and the watchdog watches it and the
        memory until `stop_clock`."""
        self.stop_clock()
        self.deadline = (time.monotonic() + self.timeout) if self.timeout else None
        self.tripped = None
        if self.deadline is not None or self.max_memory:
            dog = _Watchdog(self)
            with self._lock:
                self._watchdog = dog
            dog.thread.start()

    def stop_clock(self) -> None:
        with self._lock:
            dog, self._watchdog = self._watchdog, None
        if dog is not None:
            dog.stop.set()

    def trip(self, budget: str, dog: Any) -> None:
        """The watchdog's word: `budget` ("time" or "memory") ran out; stop at the next step. Only the
        watchdog of the script running now counts (a REPL runs the next input with the same runtime)."""
        with self._lock:
            if self._watchdog is not dog:
                return
            self.tripped = budget
            self.limit = -1
        self._wake.set()

    # --- the slow path of step charging ---------------------------------------------------

    def over_limit(self, span: Span) -> None:
        """Called when `steps` passed `limit`: a budget, the clock, the watchdog or an interrupt request."""
        if self.interrupt_reason is not None:
            reason, self.interrupt_reason = self.interrupt_reason, None
            self._rearm()
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
        if self.tripped == "memory":
            raise BudgetExhausted(
                f"memory budget exhausted: the run holds more than {size_text(self.max_memory)} of memory "
                "(--max-memory)",
                span,
                budget="memory",
                filename=self.filename,
                source=self.source,
                help="raise --max-memory if the work is legitimate, or keep fewer large values",
            )
        if self.tripped == "time" or (self.deadline is not None and time.monotonic() > self.deadline):
            raise BudgetExhausted(
                f"time budget exhausted: the run took longer than {self.timeout:g}s (--timeout)",
                span,
                budget="time",
                filename=self.filename,
                source=self.source,
            )
        self._rearm()

    def _rearm(self) -> None:
        self.limit = min(self.max_steps, self.steps + CHECK_EVERY)
        # An interrupt or the watchdog may have set limit to -1 while it was being recomputed: keep it.
        if self.interrupt_reason is not None or self.tripped is not None:
            self.limit = -1

    def charge(self, steps: int, span: Span) -> None:
        """Charge `steps` for work a builtin did (a Meter's units): as a statement's charge, past the
        limit it raises (a budget, an interrupt) or looks at the clock and lets the work go on."""
        self.steps += steps
        if self.steps > self.limit:
            self.over_limit(span)

    def meter(self, span: Span) -> Meter:
        """The Meter of one builtin call at `span`: charges its work here and polls as it goes."""
        return Meter(lambda: self.poll(span), lambda steps: self.charge(steps, span))

    def poll(self, span: Span) -> None:
        """For one step that works long (a comparison, a text of a large value): stop now if an interrupt
        or the watchdog asked the script to stop."""
        if self.limit < 0:
            self.over_limit(span)

    def interrupt(self, reason: str = "SIGINT") -> None:
        """Ask the running script to stop at its next step (thread-safe)."""
        self.interrupted_at = time.monotonic()
        self.interrupt_reason = reason
        self.limit = -1
        self._wake.set()

    def sleep(self, seconds: float, span: Span) -> None:
        """Wait `seconds` (the `sleep` builtin), ended early by an interrupt or the watchdog, which raise
        here as at a step. A wait that would outlast the time budget is refused before it starts."""
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if seconds > left:
                raise BudgetExhausted(
                    f"time budget exhausted: sleep({seconds:g}) would outlast the run's {self.timeout:g}s "
                    f"(--timeout), which has {max(left, 0.0):.3g}s left",
                    span,
                    budget="time",
                    filename=self.filename,
                    source=self.source,
                    help="sleep less, or raise --timeout",
                )
        self._wake.clear()
        self.poll(span)  # an interrupt asked for before the wait began
        end = time.monotonic() + seconds
        try:
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return
                self._wake.wait(min(left, 3600.0))
                self.poll(span)
        finally:
            self.slept += min(seconds, max(0.0, seconds - (end - time.monotonic())))

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
