"""A wall plan (plan.py) as bubblewrap's command line: one routine, in bubblewrap's order (a later mount
covers an earlier one), so that what the plan says is what is mounted."""

from __future__ import annotations

from collections.abc import Callable

from dal.effects.wall.plan import WallPlan

__all__ = ["view", "command", "namespaces", "private", "system_ops"]

# bind_fd(path) -> an O_PATH descriptor of `path` walked without following symlinks (sandbox._open_nofollow),
# kept open by the caller until bubblewrap has started; None binds by path (bubblewrap older than 0.8).
BindFd = Callable[[str], int] | None


def namespaces(cwd: str, network: bool) -> list[str]:
    argv = ["--unshare-user", "--disable-userns", "--cap-drop", "ALL", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts"]
    if not network:
        argv.append("--unshare-net")
    # reaper.WALL_OWNER names the DAL process to bubblewrap only (/proc/PID/environ), never to the program
    return [*argv, "--die-with-parent", "--new-session", "--unsetenv", "DAL_WALL_OWNER", "--chdir", cwd]


def private(tmp_size: int) -> list[str]:
    size = str(tmp_size)
    return ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            "--size", size, "--tmpfs", "/tmp"]


def system_ops(system: tuple[tuple[str, str], ...], links: tuple[tuple[str, str], ...]) -> list[str]:
    """The system folders, then an /etc of DAL's own with the few files of the host's it shows."""
    argv: list[str] = []
    for etc in (False, True):
        if etc:
            argv += ["--perms", "0755", "--dir", "/etc"]
        for path, source in system:
            if path.startswith("/etc/") == etc:
                argv += ["--ro-bind", source, path]
        for path, target in links:
            if path.startswith("/etc/") == etc:
                argv += ["--symlink", target, path]
    return argv


def _bind(path: str, writable: bool, bind_fd: BindFd) -> list[str]:
    if bind_fd is None:
        return ["--bind" if writable else "--ro-bind", path, path]
    return ["--bind-fd" if writable else "--ro-bind-fd", str(bind_fd(path)), path]


def _within(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root + "/")


def view(plan: WallPlan, bind_fd: BindFd = None) -> tuple[list[str], list[str]]:
    """The mounts and namespaces of `plan`, in two parts: before and after the identity files (command())."""
    head = _bind("/", False, bind_fd) if plan.read_all else system_ops(plan.system, plan.links)
    tail = private(plan.tmp_size)
    tail += ["--perms", "0700", "--dir", plan.home]
    for root in plan.read:
        tail += _bind(root, False, bind_fd)
    for root in plan.write:
        tail += _bind(root, True, bind_fd)
    # Each folder between a write root and a protected path is bound onto itself, so that no process can
    # rename it (a mount point cannot be renamed) and move the protected entry out from under its bind.
    pinned: set[str] = set()
    for path in plan.protected:
        root = max((r for r in plan.write if _within(path, r)), key=len)
        ancestors = []
        parent = path.rsplit("/", 1)[0] or "/"
        while parent != root and _within(parent, root):
            ancestors.append(parent)
            parent = parent.rsplit("/", 1)[0] or "/"
        for a in reversed(ancestors):
            if a not in pinned:
                pinned.add(a)
                tail += _bind(a, True, bind_fd)
        tail += _bind(path, False, bind_fd)
    for path, kind in plan.hidden:
        tail += ["--tmpfs", path, "--remount-ro", path] if kind == "folder" else ["--ro-bind", "/dev/null", path]
    for exe in plan.programs:
        tail += ["--ro-bind", exe, exe]
    tail += ["--remount-ro", "/"]  # the wall's own root: nothing is written there
    tail += namespaces(plan.workspace, plan.network)
    return head, tail


def command(bwrap: str, plan: WallPlan, view_argv: tuple[list[str], list[str]], argv: list[str], *,
            identity_fds: tuple[int, int] | None, info_fd: int | None = None, block_fd: int | None = None,
            seccomp_fd: int | None = None) -> list[str]:
    """The whole command line: bubblewrap, the view, DAL's passwd and group read from `identity_fds` (when
    the plan shows its own), the seccomp filter from `seccomp_fd`, the start-up handshake, then the program."""
    head, tail = view_argv
    identity: list[str] = []
    if plan.identity and identity_fds is not None:
        passwd_fd, group_fd = identity_fds
        identity = ["--perms", "0644", "--ro-bind-data", str(passwd_fd), "/etc/passwd",
                    "--perms", "0644", "--ro-bind-data", str(group_fd), "/etc/group"]
    extra = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    if info_fd is not None:
        extra += ["--info-fd", str(info_fd)]
    if block_fd is not None:
        extra += ["--block-fd", str(block_fd)]
    return [bwrap, *head, *identity, *tail, *extra, "--", *argv]
