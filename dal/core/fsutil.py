"""Small filesystem helpers shared by the formatter and the receipts writer."""

from __future__ import annotations

import errno
import os
from pathlib import Path

# tempfile.mkstemp's flags. tempfile itself is not imported: it brings shutil, random and the compression
# modules (~4 ms), and every `dal run` writes its receipt files through here.
_TEMP_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def mkstemp(directory: Path, prefix: str, suffix: str) -> tuple[int, str]:
    """What `tempfile.mkstemp(prefix=, suffix=, dir=)` does: create a new file with a random name, mode
    0600, never following or reusing an existing name; return its descriptor and absolute path."""
    for _ in range(100):
        name = os.path.abspath(os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}"))
        try:
            return os.open(name, _TEMP_FLAGS, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no usable temporary file name found in {directory}")


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Write `text` to `path` so that readers (and a kill -9) see the old file or the new one, never half of
    it. `durable`: the file and the rename survive a power loss too (the file and its folder are fsynced);
    without it a power loss may leave the old file, no file, or an empty one."""
    path = Path(path)
    fd, tmp = mkstemp(path.parent, f".{path.name}.", ".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        if durable:
            fsync_dir(path.parent)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` survive a crash (POSIX only; elsewhere os.replace is all there is)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_only_mount(path: str | os.PathLike[str]) -> bool:
    """Whether `path` (or, when it does not exist, its nearest existing folder) is on a file system mounted
    read-only, where no chmod makes it writable: a message says so, and suggests another place."""
    here = Path(path)
    while True:
        try:
            return bool(os.statvfs(here).f_flag & getattr(os, "ST_RDONLY", 1))
        except FileNotFoundError:
            if here.parent == here:
                return False
            here = here.parent
        except (OSError, AttributeError):
            return False


def realpath(path: str | os.PathLike[str]) -> str:
    """os.path.realpath, taken again when a name changed under it: Python 3.11 raises EINVAL when a name it
    found to be a symlink is no longer one as it reads it, which a script's program swapping a name makes
    happen (and which must not become an internal error of DAL)."""
    for _ in range(50):
        try:
            return os.path.realpath(path)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
    return os.path.realpath(path)
