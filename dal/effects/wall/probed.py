"""What the bubblewrap probe found, remembered across processes.

Every `dal` process probed bubblewrap once (sandbox.py: `true` run inside a wall with every option a command's
wall uses), 6 ms of CPU of a cold `dal run`'s ~130. A probe that succeeded is remembered in DAL's own state
folder (statedir.py: no script reads or changes it) under a digest of everything its answer depends on: the
bubblewrap binary (path, device, inode, size, times), the probe's command line, the user, the boot, this
process's namespaces and the kernel's switches for user namespaces. A process whose digest matches takes the
answer without spawning; any change to one of them probes again.

Only success is remembered, and only with binds by descriptor: a remembered answer can only ever say
"bubblewrap works", and if it no longer does (an AppArmor profile loaded since, say), each command's own wall
fails to start and the command fails with bubblewrap's message: nothing runs outside the wall on its word.
A failure is probed again by the next process, as before.
"""

from __future__ import annotations

import os
import stat

from dal.core import statedir
from dal.core.digest import sha256

__all__ = ["known_good", "remember_good"]

_NAME = "bwrap-probe"
_SWITCHES = ("/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces",
             "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "/proc/sys/kernel/random/boot_id")
_NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")


def _digest(argv: list[str]) -> str | None:
    """The digest of what the probe's answer depends on; None when bubblewrap cannot be looked at."""
    try:
        st = os.stat(argv[0])
    except OSError:
        return None
    parts = [repr(argv), f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_mode}",
             f"{os.geteuid()}:{os.getegid()}"]
    for path in _SWITCHES:
        try:
            with open(path, "rb") as f:
                parts.append(f.read(200).decode("ascii", "replace"))
        except OSError:
            parts.append("-")
    for ns in _NAMESPACES:
        try:
            parts.append(str(os.stat(f"/proc/self/ns/{ns}").st_ino))
        except OSError:
            parts.append("-")
    return sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _folders() -> list[str]:
    folder = statedir.state_dir()
    return [f for f in (folder, statedir.fallback_dir()) if f is not None]


def known_good(argv: list[str]) -> bool:
    """Whether a probe with this command line succeeded under the same conditions before."""
    digest = _digest(argv)
    if digest is None:
        return False
    for folder in _folders():
        try:
            fd = os.open(os.path.join(folder, _NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if st.st_uid == os.geteuid() and not st.st_mode & 0o022 and os.read(fd, 100).decode(
                    "ascii", "replace").strip() == digest:
                return True
        except OSError:
            pass
        finally:
            os.close(fd)
    return False


def remember_good(argv: list[str]) -> None:
    """Remember that the probe with this command line succeeded; quietly nothing when it cannot be written."""
    digest = _digest(argv)
    if digest is None:
        return
    for folder in _folders():
        try:
            if folder == statedir.fallback_dir():
                try:
                    os.mkdir(folder, 0o700)
                except FileExistsError:
                    pass
                st = os.lstat(folder)  # another user may have made it first: then it is not ours to write in
                if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
                    continue
            else:
                os.makedirs(folder, mode=0o700, exist_ok=True)
            tmp = os.path.join(folder, f".{_NAME}.{os.getpid()}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, digest.encode("ascii") + b"\n")
            finally:
                os.close(fd)
            os.replace(tmp, os.path.join(folder, _NAME))
            return
        except OSError:
            continue
