"""What the evaluator asks of whoever runs it: the host interface, handed to the Runtime when it is built.

A Runtime counts steps and holds budgets; everything that reaches the world goes through its host:
`run()` effects, values the world decides (`now()`, `env()`, `sleep()`, journaled by a runner), the
operation key, loop exits (the recorder), the clock and printed output. The runner (dal/runner/host.py),
the REPL and `dal test` implement it; `NullHost` is plain evaluation (no effects, no environment).

`set_operation` answers with a verdict instead of raising past the evaluator: `PROCEED`, skip (the key
names a completed run), or stop (the key is busy: not the script's failure; the runner reports why). The
`operation()` builtin turns skip and stop into signals the engine ends the script with.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from dal.core.errors import DalRuntimeError
from dal.core.records import FrozenRecord
from dal.syntax.ast import Span

if TYPE_CHECKING:
    from dal.eval.runtime import LoopFrame


class OperationVerdict(FrozenRecord):
    """The host's answer to `operation(key)`: proceed (both None), skip as a duplicate of run `skip_of`,
    or stop the script cleanly (`stop`: why, for the host's own report)."""

    __slots__ = ("skip_of", "stop")

    def __init__(self, skip_of: str | None = None, stop: str | None = None) -> None:
        object.__setattr__(self, "skip_of", skip_of)
        object.__setattr__(self, "stop", stop)


PROCEED = OperationVerdict()


class Host(Protocol):
    """The evaluator's view of the world. Every method may raise a DalError for the script."""

    def run_effect(self, command: str, span: Span, argv: tuple[str, ...] | None = None, *,
                   stdin: str | None = None, write_to: str | None = None, append: bool = False) -> Any:
        """`run(command)`: check and run one shell effect, return its result. `argv`: the words of
        `run([...])` (then `command` is their shell-quoted text, for display); with them, `stdin` is the
        text the program reads and `write_to` the file its output goes to (`write_file`), replaced or,
        with `append`, added to."""
        ...

    def observe(self, what: str, produce: Callable[[], Any]) -> Any:
        """A value the world decides (`now()`, `env(NAME)`, `sleep(s)`): `produce()` it, or give back the
        one an earlier attempt journaled."""
        ...

    def getenv(self, name: str) -> str | None:
        """What `env(name)` may see (the policy decides; None: not set or not allowed)."""
        ...

    def set_operation(self, key: str, span: Span) -> OperationVerdict:
        """`operation(key)`: name the run's operation key."""
        ...

    def loop_exit(
        self,
        frame: LoopFrame,
        reason: str,
        clause: str | None,
        steps: int,
        ended_at: float,
        snapshot: Callable[[], dict[str, Any]],
    ) -> None:
        """A loop exited: record its receipt (the snapshot of the names its condition reads is lazy)."""
        ...

    def now(self) -> float:
        """The wall clock, seconds since the epoch."""
        ...

    def write(self, text: str) -> Any:
        """Printed output."""
        ...


class NullHost:
    """Plain evaluation: output to `write` (default: sys.stdout at the time of writing), loop exits to
    `recorder` if given, no effects, no environment variables, the real clock."""

    __slots__ = ("_write", "_recorder")

    def __init__(self, write: Callable[[str], Any] | None = None, recorder: Any = None) -> None:
        self._write = write
        self._recorder = recorder

    def run_effect(self, command: str, span: Span, argv: tuple[str, ...] | None = None, *,
                   stdin: str | None = None, write_to: str | None = None, append: bool = False) -> Any:
        raise DalRuntimeError("run() is not available here: no effect runner is configured", span)

    def observe(self, what: str, produce: Callable[[], Any]) -> Any:
        return produce()

    def getenv(self, name: str) -> str | None:
        return None

    def set_operation(self, key: str, span: Span) -> OperationVerdict:
        return PROCEED

    def loop_exit(
        self,
        frame: LoopFrame,
        reason: str,
        clause: str | None,
        steps: int,
        ended_at: float,
        snapshot: Callable[[], dict[str, Any]],
    ) -> None:
        if self._recorder is not None:
            self._recorder.loop_exit(frame, reason, clause, steps, ended_at, snapshot)

    def now(self) -> float:
        return time.time()

    def write(self, text: str) -> Any:
        return (self._write or sys.stdout.write)(text)
