"""Which wall holds a command's programs here, and what may run without one (docs/policy.md, "The wall").

The kind in force is the first that works: bubblewrap, then Landlock (landlock_wall.py), else none; the
operator may name one with DAL_WALL=bubblewrap|landlock|none (none: as where no wall can be had; any other
value refuses every command). Without a wall only the default toolset runs -- the programs whose every read and
write the check models exactly (policy.DEFAULT_TOOLSET_NAMES); anything else (git, curl, wget, interpreters,
a program allowed by name) is denied, saying what to install or enable. As root without a wall nothing runs
unless the operator passes --unsandboxed-as-root, and then only the default toolset.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import attrs

from dal.effects.policy import DEFAULT_TOOLSET_NAMES

if TYPE_CHECKING:
    from dal.effects.classify.check import Decision
    from dal.effects.context import EffectContext

__all__ = ["WallKind", "select", "wall_kind", "walled_only", "beyond_toolset", "landlock_status",
           "bubblewrap_status", "UNSANDBOXED_FLAG", "INSTALL_HINT", "WALL_ENV", "WALL_KINDS"]

UNSANDBOXED_FLAG = "--unsandboxed-as-root"
WALL_ENV = "DAL_WALL"
WALL_KINDS = ("", "bubblewrap", "landlock", "none")
INSTALL_HINT = ("install bubblewrap (Debian, Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install "
                "bubblewrap`) and let it make user namespaces (`sysctl kernel.unprivileged_userns_clone=1`; Ubuntu "
                "24.04 and later: `sysctl kernel.apparmor_restrict_unprivileged_userns=0`; in a container, a "
                "seccomp profile that allows clone(CLONE_NEWUSER)); or run DAL on a kernel with Landlock ABI 6 "
                "(Linux 6.12 or later), the wall for hosts without user namespaces")


@attrs.frozen
class WallKind:
    """The wall in force for a run's commands."""

    name: str  # "bubblewrap" | "landlock" | "none"
    reason: str  # why this one (bubblewrap's probe, or why there is none)
    refused: str | None = None  # why no command runs at all (root without a wall, a wall required)
    unwalled: bool = False  # no wall, and programs beyond the default toolset are denied (walled_only())
    caller_off: bool = False  # no wall because the caller turned it off (EffectContext(use_sandbox=False))
    missing: str = ""  # why no wall kind works here (each probe's reason)

    def walled_only(self, programs: Iterable[str]) -> str | None:
        """Why a command running `programs` (argv[0] of each) is denied here, or None when it may run."""
        if not self.unwalled:
            return None
        beyond = beyond_toolset(programs)
        if not beyond:
            return None
        names = ", ".join(beyond)
        return (f"{names} {'runs' if len(beyond) == 1 else 'run'} only inside a wall, and there is none here: "
                f"{self.missing or self.reason}. Without a wall only the default toolset runs (ls, cat, grep, cp, "
                f"...); to run {names}, {INSTALL_HINT}")


def beyond_toolset(programs: Iterable[str]) -> list[str]:
    """The programs, in order and once each, that are not of the exactly modelled default toolset."""
    return list(dict.fromkeys(p for p in programs if p not in DEFAULT_TOOLSET_NAMES))


def bubblewrap_status() -> tuple[bool, str]:
    from dal.effects.wall.sandbox import sandbox_status

    return sandbox_status()


def landlock_status() -> tuple[bool, str]:
    from dal.effects.wall import landlock_wall

    missing = landlock_wall.missing()
    if missing is not None:
        return False, f"no Landlock wall either: {missing}"
    return True, f"Landlock ABI {landlock_wall.landlock.abi()} and seccomp"


# The probes select() asks, in order; tests replace them to say a wall is or is not there.
PROBES: dict[str, Callable[[], tuple[bool, str]]] = {"bubblewrap": bubblewrap_status, "landlock": landlock_status}


def select(*, use_sandbox: bool = True, require_sandbox: bool = False, unsandboxed_as_root: bool = False,
           euid: int | None = None, forced: str | None = None) -> WallKind:
    """The wall for commands run with these options of EffectContext; `forced` is DAL_WALL's value."""
    if not use_sandbox and not require_sandbox:
        return WallKind("none", "the wall was turned off by the caller (EffectContext(use_sandbox=False))",
                        caller_off=True)
    forced = os.environ.get(WALL_ENV, "") if forced is None else forced
    if forced not in WALL_KINDS:
        return WallKind("none", f"{WALL_ENV}={forced!r}", refused=f"{WALL_ENV} names no wall kind "
                        f"({', '.join(k for k in WALL_KINDS if k)}), so none runs")
    if forced == "none":
        return _none(f"no wall: {WALL_ENV}=none", f"the operator turned the wall off ({WALL_ENV}=none)",
                     require_sandbox, unsandboxed_as_root, euid)
    reasons = [f"{WALL_ENV}={forced}"] if forced else []
    for name in (forced,) if forced else ("bubblewrap", "landlock"):
        available, why = PROBES[name]()
        if available:
            return WallKind(name, why if not reasons or name == forced else f"{'; '.join(reasons)}; {why}")
        if why:
            reasons.append(why)
    why = "; ".join(reasons)
    return _none(why, why, require_sandbox, unsandboxed_as_root, euid)


def _none(why: str, unavailable: str, require_sandbox: bool, unsandboxed_as_root: bool,
          euid: int | None) -> WallKind:
    if require_sandbox:
        return WallKind("none", why, refused=f"sandbox required but unavailable: {unavailable}")
    if (os.geteuid() if euid is None else euid) == 0:
        if not unsandboxed_as_root:
            return WallKind("none", why, refused=f"running as root without a working sandbox ({why}); commands "
                            f"would run with every capability, so none runs unless the operator passes "
                            f"{UNSANDBOXED_FLAG}")
        return WallKind("none", f"{why}; running as root, allowed by {UNSANDBOXED_FLAG}", unwalled=True,
                        missing=unavailable)
    return WallKind("none", why, unwalled=True, missing=unavailable)


def wall_kind(ctx: EffectContext) -> WallKind:
    """The wall that holds the commands run under `ctx`."""
    return select(use_sandbox=ctx.use_sandbox, require_sandbox=ctx.require_sandbox,
                  unsandboxed_as_root=ctx.unsandboxed_as_root)


def walled_only(decision: Decision, ctx: EffectContext) -> Decision:
    """`decision`, denied when it runs a program beyond the default toolset and there is no wall here (the
    wall is probed only for such a command)."""
    if not decision.allowed or decision.plan is None:
        return decision
    programs = beyond_toolset(c.argv[0] for p in decision.plan.items for c in p.commands)
    why = wall_kind(ctx).walled_only(programs) if programs else None
    return decision if why is None else attrs.evolve(decision, allowed=False, reason=why)
