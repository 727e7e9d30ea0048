"""Where the REPL keeps its history, and a history file that creates its folder on demand."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from prompt_toolkit.history import FileHistory


def default_history_path(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/dal/history`, falling back to `~/.local/state` (on Windows, `%LOCALAPPDATA%`)."""
    env = os.environ if env is None else env
    if sys.platform == "win32" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / "dal" / "history"
    state = env.get("XDG_STATE_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "dal" / "history"


class LazyFileHistory(FileHistory):
    """A `FileHistory` that creates its folder only when the first entry is stored.

    Merely starting the REPL (or reading history) leaves no trace on disk; a folder that cannot be
    created costs the history, never the session.
    """

    def __init__(self, filename: str | os.PathLike[str]) -> None:
        super().__init__(filename)
        self.path = Path(filename)
        self.failed: OSError | None = None

    def store_string(self, string: str) -> None:
        if self.failed is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            super().store_string(string)
        except OSError as e:
            self.failed = e
