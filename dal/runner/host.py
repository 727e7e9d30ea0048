"""The host a run gives its script (dal/eval/host.py's interface): effects through an EffectHandler, loop
exits to a LoopRecorder, env() under the policy, output to the run's writer.

`dal run`, the REPL and `dal test` use it; the runner passes `on_operation` for what `operation("K")`
means to a stored run (dal/runner/runner.py). The effect handler needs the runtime it serves, and the
runtime needs its host when it is built, so the handler is attached once with `attach()` right after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dal.core.errors import DalRuntimeError
from dal.eval.host import PROCEED, NullHost, OperationVerdict
from dal.syntax.ast import Span

if TYPE_CHECKING:
    from dal.runner.effects import EffectHandler


class RunHost(NullHost):
    """The host of one runtime; see the module docstring. Output, loop exits and the clock as NullHost."""

    __slots__ = ("_getenv", "_on_denied", "_on_operation", "effects")

    def __init__(
        self,
        *,
        write: Callable[[str], Any] | None = None,
        recorder: Any = None,  # a LoopRecorder (or anything with its loop_exit), or None
        getenv: Callable[[str], str | None] | None = None,
        on_operation: Callable[[str, Span], OperationVerdict] | None = None,
        on_denied: Callable[[Any, Span], Any] | None = None,
    ) -> None:
        super().__init__(write, recorder)
        self._getenv = getenv
        self._on_operation = on_operation
        # Told at once of each denied run() (its result and place): the script goes on with a `denied`
        # result, so a person watching would otherwise learn of it only from the receipt.
        self._on_denied = on_denied
        self.effects: EffectHandler | None = None

    def attach(self, handler: EffectHandler) -> None:
        """The effect handler `run()` goes to (once, after the runtime it serves is built)."""
        if self.effects is not None:
            raise RuntimeError("the host has an effect handler already")
        self.effects = handler

    def run_effect(self, command: str, span: Span, argv: tuple[str, ...] | None = None, *,
                   stdin: str | None = None, write_to: str | None = None, append: bool = False) -> Any:
        if self.effects is None:
            return super().run_effect(command, span, argv)
        result = self.effects(command, span, argv, stdin=stdin, write_to=write_to, append=append)
        if self._on_denied is not None and result.status == "denied":
            if write_to is not None or stdin is not None:  # named as the script called it, not its shell text
                import json

                said = (f"write_file({json.dumps(write_to, ensure_ascii=False)}, ...)" if write_to is not None
                        else f"run({json.dumps(list(argv or ()), ensure_ascii=False)}, {{\"input\": ...}})")
                self._on_denied(result, span, said)
            else:
                self._on_denied(result, span)
        return result

    def observe(self, what: str, produce: Callable[[], Any]) -> Any:
        return produce() if self.effects is None else self.effects.observe(what, produce)

    def getenv(self, name: str) -> str | None:
        return None if self._getenv is None else self._getenv(name)

    def set_operation(self, key: str, span: Span) -> OperationVerdict:
        if self.effects is not None and self.effects.seq:
            raise DalRuntimeError(
                "operation(...) must come before the first run(): effects already ran under another identity"
            )
        return PROCEED if self._on_operation is None else self._on_operation(key, span)
