"""How effects run: the policy and the limits (a light module: importing it loads no shell parser)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from dal.effects.policy import Policy


@attrs.frozen
class EffectContext:
    """How to run effects: the policy and the limits.

    `use_sandbox` wraps programs in bubblewrap when it works; `require_sandbox` turns its absence into a
    denied result (status "denied", reason naming why bubblewrap is unavailable) instead of running unwalled.
    """

    policy: Policy
    timeout: float = 30.0
    max_output: int = 1 << 20
    require_sandbox: bool = False
    use_sandbox: bool = True
    # Polled while a command runs: when it returns True (Ctrl-C, SIGTERM) the command's process group is
    # killed and execute_checked raises EffectCancelled, leaving the effect's outcome unknown.
    cancel: Callable[[], bool] | None = attrs.field(default=None, eq=False)
