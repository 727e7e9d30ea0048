"""Walk a directory tree the way the programs DAL checks walk it: never following a symlink, bounded."""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["TooMany", "walk"]


class TooMany(Exception):
    """The tree has more entries than the caller is willing to check."""


def walk(top: str, limit: int, skips: tuple[str, ...] = ()) -> Iterator[tuple[str, str, os.stat_result]]:
    """(path, path relative to `top`, lstat) of every entry below the directory `top`, depth first.

    Symlinks are reported, never followed. Directories whose base name is one of `skips` are reported but
    not entered: exact names only, never a pattern, whose reading may differ from the program's. Raises
    TooMany past `limit` entries; an entry that vanishes meanwhile is left out (the program would not find
    it either).
    """
    seen = 0
    stack = [(top, "")]
    while stack:
        directory, rel = stack.pop()
        try:
            it = os.scandir(directory)
        except OSError:
            continue  # unreadable or gone: the program cannot read below it either
        with it:
            for entry in it:
                seen += 1
                if seen > limit:
                    raise TooMany(top)
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                child = os.path.join(rel, entry.name)
                yield entry.path, child, st
                if entry.is_dir(follow_symlinks=False) and entry.name not in skips:
                    stack.append((entry.path, child))
