"""The wall as data: what one pipeline's programs may see, read and write, and what holds them.

A plan is built from the policy, the programs a pipeline runs and the command's limits (sandbox.Wall, or
plan_of() without touching the tree), before anything is spawned. It says what is enforced, so that
`dal policy check --wall` prints it, tests read it without running a program, and each wall kind renders it
its own way: bubblewrap's command line (bwrap.py), Landlock's rules. Paths are absolute and resolved.
"""

from __future__ import annotations

from typing import Any

import attrs

from dal.effects.policy import TRUSTED_PATH
from dal.effects.wall.limits import CommandLimits, format_bytes

__all__ = ["WallPlan", "scrubbed_env"]


def scrubbed_env(home: str) -> dict[str, str]:
    """The whole environment a program sees: nothing inherited, so no LD_*/DYLD_*, tokens or PATH tricks.

    HOME (and the XDG folders below it) is a folder of the command's own, empty when it starts and never in
    the write roots: inside the wall a folder of the wall's private /tmp (WallPlan.home), without it a fresh
    private folder DAL makes and removes (executor._CommandRun.bare_home). Were it the workspace, every
    dotfile a script wrote there (.curlrc, .wgetrc, .netrc, .npmrc, .gitconfig, .ssh/, .local/ for Python's
    user site) would configure the programs the policy allows: curl would upload what the `.curlrc` said,
    past an approval that showed only the command line."""
    return {
        "PATH": TRUSTED_PATH,
        "HOME": home,
        "XDG_CONFIG_HOME": home + "/.config",
        "XDG_DATA_HOME": home + "/.local/share",
        "XDG_STATE_HOME": home + "/.local/state",
        "XDG_CACHE_HOME": home + "/.cache",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
    }


@attrs.frozen
class WallPlan:
    """One pipeline's wall. Order matters where paths nest: each list is outermost first, and a later list
    covers an earlier one (protected over write, hidden over both)."""

    kind: str  # the wall kind that holds it: "bubblewrap" (kind.py names the others)
    workspace: str  # the programs' working folder
    network: bool  # False: a network namespace of its own, only loopback
    read_all: bool  # "/" is a read root: the whole host is shown read-only, and `system` is empty
    system: tuple[tuple[str, str], ...]  # (path, source): the system's program folders and a few /etc files
    links: tuple[tuple[str, str], ...]  # (path, target): symbolic links among them, as the host has them
    identity: bool  # /etc/passwd and /etc/group are DAL's own (the user, root, nobody), not the host's
    home: str  # HOME inside: a folder of the private /tmp, empty at each start
    tmp_size: int  # bytes of the private /tmp and /dev/shm
    read: tuple[str, ...]  # read roots, read-only
    write: tuple[str, ...]  # write roots, writable
    make: tuple[str, ...]  # folders DAL makes before the wall starts (a write root not there yet, its own state)
    protected: tuple[str, ...]  # read-only carve-outs inside the write roots
    placeholders: tuple[tuple[str, str], ...]  # (path, "folder" | "file"): missing protected entries held by
    # an empty stand-in DAL makes read-only and removes when the pipeline ends
    hidden: tuple[tuple[str, str], ...]  # (path, "folder" | "file"): covered by an empty read-only folder or
    # /dev/null (the run store, receipts, DAL's own state)
    programs: tuple[str, ...]  # program files outside the system folders, shown read-only at their place
    seccomp: tuple[str, ...]  # the seccomp filters installed (seccomp.py): "setuid" (no set-user-ID files),
    # "unix-sockets" (no socket(AF_UNIX) while the network is off)
    env: tuple[tuple[str, str], ...]  # the programs' whole environment
    limits: CommandLimits | None = None  # rlimits and cgroup of the command (limits.py)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field in attrs.fields(WallPlan):
            value = getattr(self, field.name)
            if field.name == "limits":
                value = None if value is None else {k: getattr(value, k) for k in CommandLimits.__slots__}
            elif field.name == "env":
                value = dict(value)
            elif isinstance(value, tuple):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            out[field.name] = value
        return out

    def describe(self) -> list[str]:
        """The plan as a person reads it, one line a fact, most important first."""
        if self.kind == "landlock":  # the same plan, held by other means (landlock_wall.py)
            from dal.effects.wall.landlock_wall import describe

            return describe(self)
        def paths(items: tuple[str, ...]) -> str:
            return ", ".join(items) or "(none)"

        def pairs(items: tuple[tuple[str, str], ...]) -> str:
            return ", ".join(f"{p} ({k})" for p, k in items) or "(none)"

        etc = [p[len("/etc/"):] for p, _ in (*self.system, *self.links) if p.startswith("/etc/")]
        shown = "everything, read-only" if self.read_all else \
            ", ".join(p for p, _ in self.system if not p.startswith("/etc/")) + "; /etc: " + ", ".join(etc)
        lines = [
            f"wall:         {self.kind}",
            f"network:      {'allowed' if self.network else 'off (loopback only)'}",
            f"reads:        {paths(self.read)}",
            f"writes:       {paths(self.write)}",
            f"read-only:    {paths(self.protected)}",
            f"placeholders: {pairs(self.placeholders)}",
            f"hidden:       {pairs(self.hidden)}",
            f"made first:   {paths(self.make)}",
            f"system:       {shown}",
            f"programs:     {paths(self.programs) if self.programs else '(all in the system folders)'}",
            "identity:     " + ("DAL's own /etc/passwd and /etc/group" if self.identity
                                 else "the host's /etc/passwd and /etc/group (a root shows them)"),
            f"/tmp:         private, {format_bytes(self.tmp_size)}; HOME {self.home}",
            f"seccomp:      {', '.join(self.seccomp) or '(none: no filter for this machine)'}",
            f"working dir:  {self.workspace}",
        ]
        if self.limits is not None:
            lim = self.limits
            lines.append(f"limits:       {lim.processes} processes, files up to {format_bytes(lim.file_size)}, "
                         f"memory {format_bytes(lim.memory)}, {lim.cpu_seconds} CPU seconds a process")
        return lines
