"""Parse, resolve, compile and run a script: the engine behind `dal run`, `dal check` and the REPL.

Scripts run in a worker thread with a large stack and a high recursion limit, so that deep DAL
recursion and deeply nested source end in a clean DAL error rather than a crash of the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dal.core.errors import BudgetExhausted, DalError, DalRuntimeError, DalSyntaxError, InternalError, Interrupted
from dal.core.gcpause import gc_paused
from dal.core.records import ValueRecord
from dal.core.stack import in_big_stack
from dal.eval.builtins import BUILTINS, arities
from dal.eval.compiler import Compiler
from dal.eval.runtime import FailSignal, FinishSignal, Runtime, SkipSignal, StopSignal, WaitSignal
from dal.eval.values import Builtin, size_text
from dal.resolve.resolver import ModuleState, Resolution, resolve
from dal.syntax import ast
from dal.syntax.parser import parse


class Checked(ValueRecord):
    """A script that parsed and resolved: ready to compile."""

    __slots__ = ("program", "resolution", "warnings", "filename", "source")

    def __init__(
        self, program: ast.Program, resolution: Resolution, warnings: list[DalError], filename: str, source: str
    ) -> None:
        self.program = program
        self.resolution = resolution
        self.warnings = warnings
        self.filename = filename
        self.source = source


def check_source(
    source: str,
    filename: str,
    *,
    state: ModuleState | None = None,
    repl: bool = False,
    program: ast.Program | None = None,
    builtins: dict[str, Builtin] | None = None,
    warnings: list[DalError] | None = None,
) -> tuple[Checked | None, list[DalError]]:
    """Parse and resolve. Returns (checked, errors); `checked` is None when there are errors.

    `builtins`: the table names resolve against (default: the global one; `dal test` adds its own).
    `warnings`: when given, the resolver's warnings are added to it even if there are errors too."""
    return in_big_stack(lambda: _check(source, filename, state, repl, program, builtins, warnings))


def _check(
    source: str, filename: str, state: ModuleState | None, repl: bool, program: ast.Program | None,
    builtins: dict[str, Builtin] | None = None,
    warnings: list[DalError] | None = None,
) -> tuple[Checked | None, list[DalError]]:
    if program is None:
        try:
            program = parse(source, filename)
        except DalError as e:
            return None, [e]
    table = arities() if builtins is None else {n: (b.min_args, b.max_args) for n, b in builtins.items()}
    res = resolve(program, filename=filename, source=source, builtins=table, state=state, repl=repl)
    if warnings is not None:
        warnings.extend(res.warnings)
    if res.errors:
        res.errors.sort(key=lambda e: (e.span.line, e.span.column))
        return None, res.errors
    return Checked(program, res, res.warnings, filename, source), []


class Outcome(ValueRecord):
    """How an execution ended. `status`: completed, failed, exhausted, interrupted, waiting, skipped (the
    host's verdict on the operation key) or stopped (the host refused the key: `result` says why)."""

    __slots__ = ("status", "error", "result", "ended_by", "wait")

    def __init__(
        self,
        status: str,
        error: DalError | None = None,
        result: Any = None,
        ended_by: str = "end",  # end | finish | fail | error | budget | interrupt | wait | skip | stop
        wait: WaitSignal | None = None,
    ) -> None:
        self.status = status
        self.error = error
        self.result = result
        self.ended_by = ended_by
        self.wait = wait


class Engine:
    """Compiles and runs checked scripts against one runtime and one set of globals."""

    def __init__(self, rt: Runtime, builtins: dict[str, Builtin] | None = None) -> None:
        self.rt = rt
        self.builtins = BUILTINS if builtins is None else builtins
        self.globals: dict[str, Any] = {}
        self.module_frame: list[Any] = [(), None]

    def compile(self, checked: Checked) -> Callable[[], Any]:
        comp = Compiler(
            self.rt,
            checked.resolution,
            filename=checked.filename,
            source=checked.source,
            builtins=self.builtins,
            globals_=self.globals,
        )
        with gc_paused():
            code = comp.program(checked.program)
        module = checked.resolution.module
        assert module is not None
        frame = self.module_frame
        if len(frame) < module.nslots:
            frame.extend([None] * (module.nslots - len(frame)))
        return lambda: code(frame)

    def execute(self, checked: Checked) -> Outcome:
        """Run a checked script to its end, however it ends. Never raises for a script's own failure."""
        rt = self.rt
        rt.filename, rt.source = checked.filename, checked.source

        def late_interrupt(span: ast.Span) -> None:
            """An interrupt asked for during the last step (which no later step saw) still stops the run:
            Ctrl-C is never answered with `completed`."""
            if rt.interrupt_reason is not None:
                rt.over_limit(span)

        def go() -> Outcome:
            try:
                code = self.compile(checked)
            except RecursionError:  # not for parsed source: the parser refuses what would get here
                return Outcome(
                    "failed",
                    DalSyntaxError("the script is nested too deeply to compile", checked.program.span,
                                   filename=checked.filename, source=checked.source),
                    ended_by="error",
                )
            rt.start_clock()
            try:
                return run(code)
            finally:
                rt.stop_clock()

        def run(code: Callable[[], Any]) -> Outcome:
            try:
                code()
                end = checked.program.body[-1].span if checked.program.body else checked.program.span
                late_interrupt(end)
                return Outcome("completed")
            except FinishSignal as s:
                try:
                    late_interrupt(s.span)
                except Interrupted as e:
                    return Outcome("interrupted", _with_source(e, checked), ended_by="interrupt")
                return Outcome("completed", result=s.value, ended_by="finish")
            except FailSignal as s:
                return Outcome("failed", result=s.value, ended_by="fail")
            except WaitSignal as s:
                return Outcome("waiting", ended_by="wait", wait=s)
            except SkipSignal as s:
                return Outcome("skipped", result=s.of_run, ended_by="skip")
            except StopSignal as s:
                return Outcome("stopped", result=s.reason, ended_by="stop")
            except BudgetExhausted as e:
                return Outcome("exhausted", _with_source(e, checked), ended_by="budget")
            except Interrupted as e:
                return Outcome("interrupted", _with_source(e, checked), ended_by="interrupt")
            except DalError as e:
                return Outcome("failed", _with_source(e, checked), ended_by="error")
            except RecursionError as exc:
                e = DalRuntimeError("the call stack overflowed: is the recursion unbounded?",
                                    _span_of(exc), filename=checked.filename, source=checked.source)
                return Outcome("failed", e, ended_by="error")
            except MemoryError as exc:
                e = BudgetExhausted(
                    "memory budget exhausted: the machine had no memory left for this step "
                    f"(--max-memory {size_text(rt.max_memory)})",
                    _span_of(exc), budget="memory", filename=checked.filename, source=checked.source,
                    help="lower --max-memory below what the machine can give, or keep fewer large values",
                )
                return Outcome("exhausted", e, ended_by="budget")
            except Exception as e:  # a bug in DAL itself, not in the script
                import traceback

                detail = "".join(traceback.format_exception(e)).strip().splitlines()[-1]
                err = InternalError(
                    f"internal error in DAL (please report it): {detail}",
                    _span_of(e), filename=checked.filename, source=checked.source,
                )
                err.__cause__ = e
                return Outcome("failed", err, ended_by="error")

        return in_big_stack(go)


def _span_of(exc: BaseException) -> ast.Span | None:
    """Where in the script a Python exception happened: the span of the innermost compiled statement or
    expression on its traceback (every compiled closure holds its node's span as `span`)."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        span = tb.tb_frame.f_locals.get("span")
        if isinstance(span, ast.Span):
            found = span
        tb = tb.tb_next
    return found


def _with_source(e: DalError, checked: Checked) -> DalError:
    if e.source is None:
        e.source = checked.source
    if e.filename is None:
        e.filename = checked.filename
    return e
