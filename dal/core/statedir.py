"""Where DAL keeps its own state (docs/policy.md, "DAL's own state is not readable"): the key that signs the
held records (held.key), the REPL's history, the walls' registry when /tmp's is not the user's alone.

`$XDG_STATE_HOME/dal`, else `~/.local/state/dal`; for a user whose HOME cannot hold it (a service user whose
home is /nonexistent), `/tmp/dal-state-EUID`, used only while it is a real folder of the user's alone (mode
0700). No script reads or changes any of it: with the key, a script
could sign a record that makes the operator's next start write and remove files of its choosing.
"""

from __future__ import annotations

import functools
import os

__all__ = ["clear", "fallback_dir", "state_dir", "state_dirs"]


def state_dir() -> str | None:
    """The folder DAL writes its state into now: `$XDG_STATE_HOME/dal` (an absolute value), else
    `$HOME/.local/state/dal`; None when neither gives an absolute path."""
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = xdg if xdg.startswith("/") else os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(os.path.normpath(base), "dal") if base.startswith("/") else None


def fallback_dir() -> str:
    """Where the key goes when state_dir() cannot hold it; the caller checks the folder is the user's alone."""
    return f"/tmp/dal-state-{os.geteuid()}"


def state_dirs() -> tuple[str, ...]:
    """Every folder DAL's state may be in, as named and as resolved (both spellings: a run without
    XDG_STATE_HOME uses HOME's): what every command is kept from. Cached for the environment it was read
    in; clear() when a path on the way may have changed (the check does, before each command)."""
    return _dirs(os.environ.get("XDG_STATE_HOME", ""), os.environ.get("HOME", ""))


@functools.lru_cache(maxsize=4)
def _dirs(xdg: str, home: str) -> tuple[str, ...]:
    named = [os.path.join(os.path.expanduser("~"), ".local", "state", "dal"), fallback_dir()]
    if xdg.startswith("/"):
        named.append(os.path.join(xdg, "dal"))
    out: dict[str, None] = {}
    for path in named:
        if path.startswith("/"):
            out[os.path.normpath(path)] = None
            out[os.path.realpath(path)] = None
    return tuple(out)


def clear() -> None:
    """Forget the resolved folders (a symlink on the way to them may have changed since)."""
    _dirs.cache_clear()
