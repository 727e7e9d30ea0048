"""How effects run: the policy and the limits (a light module: importing it loads no shell parser)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dal.core.defaults import EFFECT_TIMEOUT, MAX_OUTPUT
from dal.core.records import FrozenRecord

if TYPE_CHECKING:
    from dal.effects.policy import Policy



class EffectContext(FrozenRecord):
    """How to run effects: the policy and the limits.

    `use_sandbox` wraps programs in bubblewrap when it works (False: the test hook that runs them without the
    wall); `require_sandbox` turns its absence into a denied result (status "denied", reason naming why
    bubblewrap is unavailable) instead of running unwalled. Running as root, an absent wall is a denial
    anyway unless `unsandboxed_as_root` says the operator accepts it (`--unsandboxed-as-root`).
    `cancel` is polled while a command runs: when it returns True (Ctrl-C, SIGTERM) the command's process
    group is killed and execute_checked raises EffectCancelled, leaving the effect's outcome unknown.
    """

    __slots__ = ("policy", "timeout", "max_output", "require_sandbox", "use_sandbox", "unsandboxed_as_root", "cancel")
    _compared = __slots__[:-1]  # not `cancel`

    def __init__(
        self,
        policy: Policy,
        timeout: float = EFFECT_TIMEOUT,
        max_output: int = MAX_OUTPUT,
        require_sandbox: bool = False,
        use_sandbox: bool = True,
        cancel: Callable[[], bool] | None = None,
        unsandboxed_as_root: bool = False,
    ) -> None:
        init = object.__setattr__
        init(self, "policy", policy)
        init(self, "timeout", timeout)
        init(self, "max_output", max_output)
        init(self, "require_sandbox", require_sandbox)
        init(self, "use_sandbox", use_sandbox)
        init(self, "unsandboxed_as_root", unsandboxed_as_root)
        init(self, "cancel", cancel)
