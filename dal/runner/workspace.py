"""Which folder is the workspace: found the way git and cargo find theirs (docs/policy.md, "Workspace
discovery").

`--workspace DIR` wins. Otherwise the nearest folder, from the current directory up, that holds a
`dal.toml` file or a `.dal/` folder; when none does, the current directory. `DAL_CEILING_DIRECTORIES`
(colon-separated absolute paths, as git's GIT_CEILING_DIRECTORIES) stops the walk: a ceiling and the
folders above it are not looked at (a walk that starts in a ceiling looks at it, and no higher).

An enclosing folder that every user may write to (`/tmp`, `/var/tmp`, `/dev/shm`) is passed over: anyone
could have put a marker there (a stray `/tmp/.dal` would otherwise make all of `/tmp` the workspace of
every run below it, writable by the script). A `dal.toml` passed over that way is named on stderr. The
current directory's own marker is always used, as `dal` always did.

A module at the bottom of the stages: every front end (the CLI, the API, the REPL, `dal test`) finds its
workspace through `find_workspace`, so they cannot disagree.
"""

from __future__ import annotations

import os
from pathlib import Path

from dal.core.records import FrozenRecord
from dal.core.shellword import sh_quote

__all__ = ["CEILING_ENV", "Found", "find_workspace"]

CEILING_ENV = "DAL_CEILING_DIRECTORIES"
MARKERS = ("dal.toml", ".dal")


class Found(FrozenRecord):
    """A workspace and how it was chosen.

    `how`: "--workspace", "dal.toml" or ".dal" (the marker found in `path`), or "current directory" (no
    marker anywhere up to the root or a ceiling). `outer`: for a workspace found by a marker, the nearest
    enclosing folder that is a workspace too (a nested workspace), else None."""

    __slots__ = ("path", "how", "outer", "passed_over")

    def __init__(self, path: Path, how: str, outer: Path | None = None, passed_over: Path | None = None) -> None:
        init = object.__setattr__
        init(self, "path", path)
        init(self, "how", how)
        init(self, "outer", outer)
        init(self, "passed_over", passed_over)  # a dal.toml in a folder every user may write to, not used

    def note(self) -> str | None:
        """One line for stderr when the choice deserves a word, else None."""
        notes = []
        if self.passed_over is not None:
            notes.append(f"{self.passed_over} is not used: its folder is writable by every user, so anyone could "
                         f"have put it there (--workspace {sh_quote(self.passed_over.parent)} to use it)")
        if self.outer is not None and not (self.path / ".dal").is_dir():
            # Once per workspace, not on every command: until its first run makes its own .dal/ (a monorepo
            # with a dal.toml per project is normal; the closing line and the receipt name the workspace).
            notes.append(f"workspace {self.path} ({self.how}) is inside workspace {self.outer}: the nearest one "
                         f"is used (--workspace {sh_quote(self.outer)} for the outer one)")
        return "; ".join(notes) or None


def _marker(folder: str) -> str | None:
    if os.path.isfile(os.path.join(folder, "dal.toml")):
        return "dal.toml"
    if os.path.isdir(os.path.join(folder, ".dal")):
        return ".dal"
    return None


def _shared(folder: str) -> bool:
    """Whether every user may create files in `folder` (mode o+w, as /tmp)."""
    try:
        return bool(os.stat(folder).st_mode & 0o002)
    except OSError:
        return True


def _ceilings() -> set[str]:
    raw = os.environ.get(CEILING_ENV, "")
    return {os.path.realpath(p) for p in raw.split(os.pathsep) if p and os.path.isabs(p)}


def _up(folder: str, ceilings: set[str]) -> str | None:
    parent = os.path.dirname(folder)
    if parent == folder or parent in ceilings or folder in ceilings:
        return None
    return parent


def find_workspace(
    explicit: str | os.PathLike[str] | None = None, start: str | os.PathLike[str] | None = None
) -> Found:
    """The workspace for a command run in `start` (default: the current directory) with `--workspace
    explicit` (None: discover). The path is absolute and resolved; whether it is a directory is for the
    caller to check (the error names the flag)."""
    if explicit is not None:
        return Found(Path(os.path.realpath(os.fspath(explicit))), "--workspace")
    here = os.path.realpath(os.fspath(start) if start is not None else os.getcwd())
    ceilings = _ceilings()
    passed_over: Path | None = None

    def marker(folder: str) -> str | None:
        nonlocal passed_over
        how = _marker(folder)
        if how is not None and folder != here and _shared(folder):
            if how == "dal.toml" and passed_over is None:
                passed_over = Path(folder, "dal.toml")
            return None
        return how

    folder: str | None = here
    while folder is not None:
        how = marker(folder)
        if how is not None:
            outer = _up(folder, ceilings)
            while outer is not None and marker(outer) is None:
                outer = _up(outer, ceilings)
            return Found(Path(folder), how, Path(outer) if outer is not None else None, passed_over)
        folder = _up(folder, ceilings)
    return Found(Path(here), "current directory", None, passed_over)
