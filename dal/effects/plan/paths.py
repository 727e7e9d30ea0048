"""Resolve the paths a command touches against the workspace and decide whether they stay inside the roots.

Resolution follows `..` and every symlink, in any component and as the final one; a dangling symlink
resolves to where a write would create its target. Only the resolved path is compared with the roots.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["resolve_path", "within", "display", "special_denial", "NULL_DEVICE"]

NULL_DEVICE = "/dev/null"
# Never a readable or writable path, whatever the roots say: kernel interfaces and bash's fake sockets.
_FORBIDDEN = ("/proc", "/sys", "/dev")


def resolve_path(path: str, cwd: str, *, follow_final: bool = True) -> str:
    """The absolute real path `path` names from `cwd`.

    `follow_final=False` resolves only the parent, for operations (rm, mv's source) that act on a
    symlink itself rather than on what it points to.
    """
    joined = os.path.join(cwd, path)
    if follow_final or path.endswith("/"):
        return os.path.realpath(joined)
    # The parent is resolved physically (`link/..` is the link target's parent, as the kernel sees it).
    head, tail = os.path.split(joined)
    if tail in ("", ".", ".."):
        return os.path.realpath(joined)
    return os.path.join(os.path.realpath(head), tail)


def within(resolved: str, roots: Iterable[str]) -> bool:
    for root in roots:
        if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
            return True
    return False


def special_denial(raw: str, resolved: str) -> str | None:
    """Why `raw` is refused whatever the roots are, or None. `/dev/null` is the one device allowed."""
    if resolved == NULL_DEVICE:
        return None
    for candidate in (os.path.normpath(raw) if raw.startswith("/") else None, resolved):
        if candidate is None:
            continue
        if candidate.startswith(("/dev/tcp", "/dev/udp")):
            return f"{raw}: network pseudo-device"
        for prefix in _FORBIDDEN:
            if candidate == prefix or candidate.startswith(prefix + "/"):
                return f"{raw}: {prefix} is never accessible"
    return None


def display(resolved: str, workspace: str) -> str:
    """Workspace-relative where inside (`.` for the root itself), absolute elsewhere."""
    if resolved == workspace:
        return "."
    if resolved.startswith(workspace + "/"):
        return resolved[len(workspace) + 1 :]
    return resolved
