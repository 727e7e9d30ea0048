"""The `.gitignore` DAL keeps in every `.dal` folder it makes or opens: `*`, so that git never sees the run
store, the receipts or the held records there (else `git add -A` writes the store's bytes, an env()
secret among them, into `.git/objects`, where `git cat-file --batch-all-objects` reads them back).

git reads the ignore file closest to a path last, so no `.gitignore` elsewhere in the work tree can bring
`.dal`'s entries back; only `git add --force` (or a pathspec git is told to add ignored files by) does,
and the check denies that for anything but named files (docs/policy.md, "git and the run store").
"""

from __future__ import annotations

import os
import stat

__all__ = ["IGNORE_ALL", "ignore_folder", "is_ignored_folder"]

IGNORE_ALL = b"*\n"


def ignore_folder(folder: str | os.PathLike[str]) -> None:
    """Write FOLDER/.gitignore holding `*` when there is none (an existing one is left as it is: the
    check then treats the folder as one git may see). Best effort: a folder DAL cannot write keeps none."""
    path = os.path.join(os.fspath(folder), ".gitignore")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except OSError:
        return
    try:
        os.write(fd, IGNORE_ALL)
    finally:
        os.close(fd)


def is_ignored_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether FOLDER/.gitignore is a regular file holding exactly `*`: git sees nothing in the folder."""
    path = os.path.join(os.fspath(folder), ".gitignore")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, 16) == IGNORE_ALL
    finally:
        os.close(fd)
