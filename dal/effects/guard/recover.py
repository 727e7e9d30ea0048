"""What a DAL process killed while a command ran left behind, dealt with when a run starts (docs/policy.md,
"Killed with DAL"): the processes of its walls and commands (reaper.sweep), and the checks after a pipeline
it never made (held.finish_dead)."""

from __future__ import annotations

from dal.effects.policy import Policy

__all__ = ["RecoverRefused", "recover"]


class RecoverRefused(Exception):
    """What a killed DAL left cannot be checked: the run must not start (fail closed)."""


def recover(policy: Policy) -> list[str]:
    """Before a run's first effect in `policy`'s workspace: kill what dead DAL processes left running (at most
    once a minute per process), then finish the checks of the pipelines they were running here. Returns
    what those checks found and undid, for the run's stderr and receipt (policy.notices); RecoverRefused
    when a record of them cannot be read."""
    import os

    from dal.effects.wall import reaper

    reaper.sweep_now_and_then()
    # This workspace's records, and those of every enclosing one: a run killed in /ws may have left
    # /ws/sub/dal.toml, and the next start is `cd sub && dal run` (workspace /ws/sub) -- it must not run
    # under that file before the outer run's checks are finished.
    found = []
    at = policy.workspace
    while True:
        if _ours(os.path.join(at, ".dal"), 0) and _ours(os.path.join(at, ".dal", "held"), 0o022):
            found.append(at)
        up = os.path.dirname(at)
        if up == at:
            break
        at = up
    if not found:
        return []  # no pipeline of a program outside the default toolset ever ran here: nothing to import
    from dal.effects.guard import held

    try:
        notices = []
        for ws in found:
            notices += held.finish_dead(policy if ws == policy.workspace else _policy_of(ws))
        return notices
    except held.HeldUnreadable as e:
        raise RecoverRefused(f"a DAL process killed while a command ran in this workspace left a record of what "
                             f"that command's checks hold that cannot be read or acted on ({e}); nothing runs "
                             "here until the operator has checked the repository and protected files and removed "
                             "it") from None


def _ours(folder: str, others: int) -> bool:
    """A real folder (no symlink) of this user's, without the mode bits `others`: only there are records looked
    at (another local user's /tmp/.dal/held is neither read nor obeyed). Each record's MAC is
    checked as well (held.py)."""
    import os
    import stat

    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & others


def _policy_of(workspace: str) -> Policy:
    """The policy of an enclosing workspace whose records are finished (its file, or the default policy)."""
    from pathlib import Path

    from dal.effects.policy import PolicyError

    try:
        return Policy.load(Path(workspace))
    except PolicyError:
        return Policy.default(Path(workspace))
