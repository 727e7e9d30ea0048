"""An interactive session: state kept between inputs, the resolver run per input.

The REPL drives this; so can any host that feeds DAL one chunk at a time. An input that is a single
expression yields its value (`is_expression`); statements yield nothing. Every error is raised as a
`DalError` and leaves the session's state as it was before the failing statement.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs

from dal.core.defaults import MAX_STEPS
from dal.core.errors import DalError, DalRuntimeError
from dal.eval.builtins import BUILTINS
from dal.eval.host import NullHost
from dal.eval.interpreter import Engine, check_source
from dal.eval.runtime import Runtime
from dal.eval.values import dal_repr
from dal.resolve.resolver import ModuleState
from dal.syntax import ast
from dal.syntax.parser import parse_expression

_RESULT = "_"  # the last expression's value, as in Python's REPL


@attrs.define
class ExecOutcome:
    value: Any
    is_expression: bool


class Session:
    def __init__(
        self,
        filename: str = "<repl>",
        max_steps: int = MAX_STEPS,
        workspace: Path | None = None,
        policy: Any = None,
        write: Any = None,
        hosting: Any = None,
    ) -> None:
        self.filename = filename
        self.max_steps = max_steps
        self.workspace = workspace or Path.cwd()
        self.policy = policy
        self._write = write
        # Builds each runtime with its host (`hosting.runtime(max_steps, write)`, as SessionWiring does);
        # None: plain evaluation, no run().
        self.hosting = hosting
        self.reset()

    def reset(self) -> None:
        write = self._write or (lambda s: sys.stdout.write(s))
        if self.hosting is None:
            self.rt = Runtime(max_steps=self.max_steps, host=NullHost(write))
        else:
            self.rt = self.hosting.runtime(self.max_steps, write)
        self.engine = Engine(self.rt)
        self.state = ModuleState()
        self.total_steps = 0
        self._inputs = 0

    def host_with(self, hosting: Any) -> None:
        """Build this session's runtimes with `hosting` from now on (before the first input: it resets)."""
        self.hosting = hosting
        self.reset()

    @property
    def steps_used(self) -> int:
        """Steps used by the whole session so far."""
        return self.total_steps + self.rt.steps

    @property
    def last_steps(self) -> int:
        """Steps used by the latest input (each input has the whole budget to itself)."""
        return self.rt.steps

    def interrupt(self) -> None:
        self.rt.interrupt("SIGINT")

    def names(self) -> list[str]:
        return sorted(n for n in self.state.globals if n != _RESULT)

    def is_complete(self, source: str) -> bool:
        """False while a block, list, call or string is still open (the parser decides)."""
        from dal.repl.completeness import is_complete

        return is_complete(source)

    def execute(self, source: str) -> ExecOutcome:
        self._inputs += 1
        filename = self.filename if self.filename != "<repl>" else f"<repl:{self._inputs}>"
        program = None
        try:
            expr = parse_expression(source, filename)
            program = ast.Program((ast.Let(_RESULT, expr, span=expr.span),), span=expr.span)
        except DalError:
            pass  # not a lone expression: statements
        checked, errors = check_source(source, filename, state=_Scratch(self.state), repl=True, program=program)
        if errors:
            raise errors[0]
        checked, errors = check_source(source, filename, state=self.state, repl=True, program=program)
        if errors:  # pragma: no cover - the scratch pass found none
            raise errors[0]
        assert checked is not None
        # The step budget applies to each input: a runaway loop stopped by its budget (or by Ctrl-C)
        # leaves the session usable, as a fresh `dal run` would be.
        from dal.eval.runtime import CHECK_EVERY

        rt = self.rt
        rt.interrupt_reason = None  # a Ctrl-C that landed after the previous input ended is spent
        self.total_steps += rt.steps
        rt.steps = 0
        rt.limit = min(rt.max_steps, CHECK_EVERY)
        outcome = self.engine.execute(checked)
        if outcome.error is not None:
            raise outcome.error
        if outcome.status == "failed":
            raise DalRuntimeError(f"fail() was called with {dal_repr(outcome.result)}")
        if outcome.ended_by == "finish":
            return ExecOutcome(outcome.result, True)
        if program is not None:
            return ExecOutcome(self.engine.globals.get(_RESULT), True)
        return ExecOutcome(None, False)


class _Scratch(ModuleState):
    """A throwaway copy of the module state, so a rejected input declares nothing."""

    def __init__(self, real: ModuleState) -> None:
        import copy

        super().__init__(globals=dict(real.globals), module=copy.copy(real.module) if real.module else None)


__all__ = ["BUILTINS", "ExecOutcome", "Session"]
