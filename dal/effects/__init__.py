"""Shell effects for `run()`: a deny-by-default policy, DAL's own executor, and bubblewrap as a second wall.

The packages, in the order a command goes through them: plan (the command parsed into DAL's own plan),
policy (what the operator allows), classify (the check: programs, classes, paths), wall (what the operating
system enforces), guard (what DAL observes around a pipeline and puts back), exec (running the plan); git
holds git's own file formats, read by several of them.

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
    from dal.effects.classify.check import Decision, check_argv, check_command
    from dal.effects.context import EffectContext
    from dal.effects.exec.executor import EffectCancelled
    from dal.effects.exec.running import execute_checked, run_effect
    from dal.effects.policy import EFFECT_CLASSES, TRUSTED_PATH, Policy, PolicyError
    from dal.effects.result import EffectResult
    from dal.effects.wall.kind import wall_kind, walled_only
    from dal.effects.wall.sandbox import sandbox_status

# Imported on first use: a script that never calls run() never loads the shell parser (tree-sitter),
# the executor or the sandbox probe, which keeps `dal run` quick to start.
_WHERE = {
    "Decision": "classify.check",
    "check_argv": "classify.check",
    "check_command": "classify.check",
    "EffectContext": "context",
    "EffectCancelled": "exec.executor",
    "EFFECT_CLASSES": "policy",
    "TRUSTED_PATH": "policy",
    "Policy": "policy",
    "PolicyError": "policy",
    "EffectResult": "result",
    "execute_checked": "exec.running",
    "wall_kind": "wall.kind",
    "walled_only": "wall.kind",
    "run_effect": "exec.running",
    "sandbox_status": "wall.sandbox",
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
    "wall_kind",
    "walled_only",
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
