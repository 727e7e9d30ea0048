"""What a DAL process killed while a command ran left behind, dealt with when a run starts (docs/policy.md,
"Killed with DAL"): the processes of its walls and commands (reaper.sweep)."""

from __future__ import annotations

from dal.effects.policy import Policy

__all__ = ["recover"]


def recover(policy: Policy) -> list[str]:
    """Before a run's first effect in `policy`'s workspace: kill what dead DAL processes left running (at most
    once a minute per process). Returns notices for the run (none yet for processes: they are not this
    run's)."""
    from dal.effects import reaper

    reaper.sweep_now_and_then()
    return []
