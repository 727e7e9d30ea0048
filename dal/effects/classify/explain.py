"""What holds a command: which of its programs the check models exactly, which it only classes, and what the
wall enforces ("wall bubblewrap: reads R, writes W, network off"), for `dal policy check` and denials.

The check models the default toolset: each path it reads and writes is checked, and what runs is the argv
it rebuilt. git it classes by a coarse table and checks the repository, remotes and patches it uses; other
programs it classes and explains (curl, wget: tables.py; any program allowed by name: nothing). Beyond the
default toolset only the wall holds what they do.
"""

from __future__ import annotations

import os
import shlex

from dal.effects.plan.shell import CommandList, Redirect
from dal.effects.policy import DEFAULT_TOOLSET_NAMES, Policy

__all__ = ["modelled", "enforced", "runs"]

# Beyond the default toolset, programs the check still reads in part (git: its repository, remotes and
# patches, gitmodel.py); they run only inside a wall all the same.
_MODELLED_WALLED = frozenset({"git"})


def modelled(programs: tuple[str, ...] | list[str]) -> str:
    """One line: the programs the check models exactly, and those only the wall holds."""
    exact = [p for p in programs if p in DEFAULT_TOOLSET_NAMES]
    checked = [p for p in programs if p in _MODELLED_WALLED]
    walled = [p for p in programs if p not in DEFAULT_TOOLSET_NAMES and p not in _MODELLED_WALLED]
    parts = []
    if exact:
        parts.append(f"{', '.join(exact)} exactly (every path checked, and run as the check read it)")
    if checked:
        parts.append(f"{', '.join(checked)} by its table (its repository, remotes and patches checked; the wall "
                     "holds what it reads and writes)")
    if walled:
        parts.append(f"{', '.join(walled)} classed only (what {'it does' if len(walled) == 1 else 'they do'} "
                     "only the wall holds)")
    return "; ".join(parts) or "(no program)"


def enforced(policy: Policy, wall: str, refused: str | None = None) -> str:
    """One line: the wall in force and what it lets programs do, or that the check alone holds."""
    if refused:
        return "no wall, and nothing runs (see wall)"
    if wall == "none":
        return "no wall: the check alone, and only the default toolset runs"
    return (f"wall {wall}: reads {_roots(policy.read_roots, policy)}, writes {_roots(policy.write_roots, policy)}, "
            f"network {'on' if policy.allow_net else 'off'}")


def _roots(roots: tuple[str, ...], policy: Policy) -> str:
    shown = []
    for r in roots:
        rel = os.path.relpath(r, policy.workspace)
        shown.append("the workspace" if rel == "." else rel if not rel.startswith("..") else r)
    return ", ".join(shown) or "nothing"


def runs(plan: CommandList) -> str:
    """The command as the executor runs it: each program's argv as the check rebuilt it (`grep -rn TODO .`
    runs `grep -r -n --exclude-dir=.dal -- TODO .`), with its redirections, in the script's order."""
    items = [" | ".join(" ".join([shlex.join(c.argv), *map(_redirect, c.redirects)]) for c in p.commands)
             for p in plan.items]
    out = items[0] if items else ""
    for op, item in zip(plan.ops, items[1:], strict=False):
        out += f" {op} " if op != ";" else "; "
        out += item
    return out


def _redirect(r: Redirect) -> str:
    if r.op == ">&":
        return f"{r.fd}>&{r.dup_fd}"
    fd = "&" if r.fd == -1 else "" if r.fd == (0 if r.op == "<" else 1) else str(r.fd)
    return f"{fd}{r.op}{shlex.quote(r.target or '')}"
