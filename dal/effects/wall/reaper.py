"""What a DAL process that died (kill -9) left running, found and killed when the next one starts (docs/policy.md,
"Killed with DAL").

bubblewrap arms its own --die-with-parent only once it has cloned its sandbox's init, and that init arms its
own only after DAL has let it go (--block-fd): a DAL killed in between left an init waiting for ever, on
bubblewrap's internal eventfd or on the block pipe (executor._spawn_walled keeps that pipe open in bubblewrap
so that the init never starts its program without its limits), holding the pipes of the stages behind it and
the files of its binds. Where DAL can make cgroups, every process of a command is in the command's cgroup
from before its exec, and limits.sweep_orphans kills what a dead DAL's cgroups still hold. Without one, every
bubblewrap DAL starts carries its owner in its environment (WALL_OWNER, removed with --unsetenv before the
program starts, so no program sees it), and DAL keeps a file per process in a folder of its user's while it
may have walls running; a file whose process is gone means: kill every bubblewrap carrying that owner (its
init is its sandbox's PID 1: the program dies with it), then remove the file.
"""

from __future__ import annotations

import os
import signal
import time

from dal.effects.wall import owners

__all__ = ["WALL_OWNER", "owner_tag", "register", "sweep", "sweep_now_and_then"]

WALL_OWNER = "DAL_WALL_OWNER"
_BWRAP_COMM = b"(bwrap)"
owner_tag = owners.tag
register = owners.register

_SWEEP_EVERY = 60.0  # seconds: a long-lived worker sweeps again now and then, a run start at most this often
_last_sweep: list[float] = []


def sweep_now_and_then() -> int:
    """sweep(), unless this process did within the last minute (each run of a worker starts here)."""
    now = time.monotonic()
    if _last_sweep and now - _last_sweep[0] < _SWEEP_EVERY:
        return 0
    _last_sweep[:] = [now]
    return sweep()


def sweep() -> int:
    """Kill what DAL processes that are gone left running: their commands' cgroups (limits.sweep_orphans, found
    by their names, whether or not their owner could register) and, without cgroups, every bubblewrap a gone
    registered owner's tag names; how many such registered owners it found. Only owners provably gone are
    acted on (owners.verdict): a DAL in another pid namespace or on another host is left alone."""
    from dal.effects.wall import limits

    limits.sweep_orphans()
    dead = owners.dead()
    if not dead:
        return 0
    _kill_tagged({f"{WALL_OWNER}={name}".encode() for name in dead})
    for name in dead:
        owners.forget(name)
    return len(dead)


def _kill_tagged(tags: set[bytes]) -> None:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                if _BWRAP_COMM not in f.read(64):
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
        except OSError:
            continue
        if env & tags:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
