"""Shell effects for `run()`: a deny-by-default policy, DAL's own executor, and bubblewrap as a second wall.

    policy = Policy.load(workspace)
    decision = check_command("ls -l docs", policy)     # static gate, never raises
    result = run_effect("ls -l docs", EffectContext(policy=policy))

A denied command never executes. A command needing approval is not executed by `run_effect` either: it
returns status "pending_approval", and `execute_checked` runs it once approved.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dal.effects.check import Decision, check_argv, check_command
    from dal.effects.context import EffectContext
    from dal.effects.executor import EffectCancelled
    from dal.effects.policy import EFFECT_CLASSES, TRUSTED_PATH, Policy, PolicyError
    from dal.effects.result import EffectResult
    from dal.effects.running import execute_checked, run_effect
    from dal.effects.sandbox import sandbox_status

# Imported on first use: a script that never calls run() never loads the shell parser (tree-sitter),
# the executor or the sandbox probe, which keeps `dal run` quick to start.
_WHERE = {
    "Decision": "check",
    "check_argv": "check",
    "check_command": "check",
    "EffectContext": "context",
    "EffectCancelled": "executor",
    "EFFECT_CLASSES": "policy",
    "TRUSTED_PATH": "policy",
    "Policy": "policy",
    "PolicyError": "policy",
    "EffectResult": "result",
    "execute_checked": "running",
    "run_effect": "running",
    "sandbox_status": "sandbox",
}

__all__ = [
    "Decision",
    "EFFECT_CLASSES",
    "EffectCancelled",
    "EffectContext",
    "EffectResult",
    "Policy",
    "PolicyError",
    "TRUSTED_PATH",
    "check_argv",
    "check_command",
    "execute_checked",
    "run_effect",
    "sandbox_status",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'dal.effects' has no attribute {name!r}")
    value = getattr(import_module(f"dal.effects.{module}"), name)
    globals()[name] = value
    return value
