"""DAL's one error type hierarchy.

Errors are data: a kind, a message, a span, the file, the DAL call stack and optional help lines.
`dal.core.diagnostics` is the only module that renders them. A bug inside DAL itself is an
`InternalError`, never confused with a mistake in the user's script.
"""

from __future__ import annotations

from typing import Any

from dal.core.records import ValueRecord
from dal.core.sources import source_line
from dal.core.spans import NO_SPAN, Span


class StackFrame(ValueRecord):
    """One DAL call: the function called and where the call happened."""

    __slots__ = ("function", "filename", "span")

    def __init__(self, function: str, filename: str, span: Span) -> None:
        self.function = function
        self.filename = filename
        self.span = span


class DalError(Exception):
    """Every error a user can cause. `kind` names the class for renderers and receipts."""

    kind = "runtime"

    def __init__(
        self,
        message: str,
        span: Span | None = None,
        *,
        filename: str | None = None,
        source: str | None = None,
        help: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.span = span or NO_SPAN
        self.filename = filename
        self.source = source
        self.help = help
        self.call_stack: list[StackFrame] = []

    def located(self, span: Span, filename: str | None = None) -> DalError:
        """Attach a span if the raiser had none (builtins raise without knowing the call site)."""
        if self.span is NO_SPAN:
            self.span = span
        if self.filename is None:
            self.filename = filename
        return self

    def to_json(self) -> dict[str, Any]:
        s = self.span
        line = source_line(self.source, s.line) or ""
        return {
            "kind": self.kind,
            "message": self.message,
            "file": self.filename or "<unknown>",
            "line": s.line,
            "column": s.column,
            "end_line": s.end_line,
            "end_column": s.end_column,
            "source_line": line,
            "help": self.help,
            "call_stack": [
                {"function": f.function, "file": f.filename, "line": f.span.line, "column": f.span.column}
                for f in self.call_stack
            ],
        }


class DalSyntaxError(DalError):
    kind = "syntax"


class DalNameError(DalError):
    kind = "name"


class DalTypeError(DalError):
    kind = "type"


class DalRuntimeError(DalError):
    kind = "runtime"


class BudgetExhausted(DalError):
    """A step, effect or time budget ran out. `budget` names which one."""

    kind = "budget"

    def __init__(self, message: str, span: Span | None = None, *, budget: str = "steps", **kw: Any) -> None:
        super().__init__(message, span, **kw)
        self.budget = budget


class Interrupted(DalError):
    """Ctrl-C, SIGTERM or a REPL interrupt stopped the script."""

    kind = "interrupted"

    def __init__(self, message: str, span: Span | None = None, *, signal_name: str = "SIGINT", **kw: Any):
        super().__init__(message, span, **kw)
        self.signal_name = signal_name


class InternalError(DalError):
    """A bug in DAL, not in the script."""

    kind = "internal"


class Diagnostic(ValueRecord):
    """A warning or error found by `dal check` (static: no call stack)."""

    __slots__ = ("severity", "error")

    def __init__(self, severity: str, error: DalError) -> None:
        self.severity = severity  # "error" | "warning"
        self.error = error


class DivergenceError(DalError):
    """On resume, the script asked for a different effect than the journal holds at that point."""

    kind = "divergence"
