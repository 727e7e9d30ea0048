"""The check and the wall agree on every path of the decision corpus.

For each command of tests/effects/test_effects_corpus.py, under the default policy and under one with a
read root outside the workspace and narrowed write roots (all of it under /tmp, which the wall replaces):

- every path the check lets a command read is the same file inside the wall (same device and inode);
- every path it lets a command write is writable there (or, when it does not exist yet, its folder is);
- every path a command names that is outside the read roots is not there inside the wall (or is another
  file: the wall's own /etc/passwd, /tmp, /), unless it is part of the system's program folders, which are
  read-only; every path outside the write roots is read-only or another file.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from effects_workspace import build_workspace
from test_effects_corpus import ALLOW, DENY

from dal.effects import Decision, EffectContext, Policy, check_command, execute_checked, sandbox_status
from dal.effects.classify.check import find_program
from dal.effects.plan import paths as P
from dal.effects.plan.shell import ShellDenied, parse_command
from dal.effects.wall.sandbox import ETC_ALWAYS, SYSTEM_DIRS

pytestmark = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")

PROBE = ('for p do if s=$(stat -L -c %d:%i "$p" 2>/dev/null); then w=0; [ -w "$p" ] && w=1; '
         'printf "%s\\t%s\\t%s\\n" "$p" "$s" "$w"; else printf "%s\\t-\\t0\\n" "$p"; fi; done')
SYSTEM = tuple(os.path.realpath(d) for d in SYSTEM_DIRS if os.path.isdir(d)) + tuple(
    os.path.realpath("/etc/" + e) for e in ETC_ALWAYS)


def wall_view(policy: Policy, paths: list[str]) -> dict[str, tuple[str | None, bool]]:
    """Each path as a program inside the wall sees it: (device:inode after symlinks, or None; writable)."""
    view: dict[str, tuple[str | None, bool]] = {}
    paths = sorted(set(paths))
    for i in range(0, len(paths), 200):
        chunk = paths[i:i + 200]
        command = "sh -c " + shlex.quote(PROBE) + " sh " + " ".join(shlex.quote(p) for p in chunk)
        plan = parse_command(command)
        decision = Decision(True, "the wall's view, for a test", "read", plan=plan,
                            executables=(("sh", find_program("sh")),))
        r = execute_checked(command, decision, EffectContext(policy=policy))
        assert r.ok, r.stderr
        for line in r.stdout.splitlines():
            path, ident, writable = line.split("\t")
            view[path] = (None if ident == "-" else ident, writable == "1")
    return view


def host_ident(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def existing(path: str) -> str:
    """`path`, or its nearest ancestor that exists (what a write there would change)."""
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return path


def named_paths(command: str, ws: str) -> list[str]:
    """The paths a command names: operands, option values (`--file=X`, `-t/x`), redirection targets; each
    as the program would open it (joined with the workspace) and resolved."""
    try:
        plan = parse_command(command)
    except ShellDenied:
        return []
    words: list[str] = []
    for cmd in plan.simple_commands():
        for w in cmd.argv[1:]:
            if w.startswith("-"):
                w = w.split("=", 1)[1] if "=" in w else (w[w.index("/"):] if "/" in w else "")
            if w:
                words.append(w)  # a pattern or a number too: it names a path in the workspace all the same
        words += [r.target for r in cmd.redirects if r.target]
    out = []
    for w in words:
        joined = os.path.normpath(os.path.join(ws, w))
        out += [joined, os.path.realpath(joined)]
    return out


def workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws, _ = build_workspace(tmp_path)
    (ws / "dal.toml").write_text("# the policy file in force\n")
    (ws / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / ".dal").mkdir(exist_ok=True)
    shared = tmp_path / "shared"  # a read root outside the workspace, under /tmp too
    shared.mkdir()
    (shared / "data.txt").write_text("shared\n")
    return ws, shared


POLICIES = {
    "default": {},
    "read root outside, writes narrowed": {"allow_read": ["../shared"], "allow_write": ["out", "docs"]},
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_the_check_and_the_wall_agree_on_every_path_of_the_corpus(tmp_path: Path, name: str) -> None:
    ws, shared = workspace(tmp_path)
    policy = Policy.load(ws, **POLICIES[name])  # type: ignore[arg-type]
    wsr = policy.workspace
    allowed_reads: set[str] = {str(shared / "data.txt")} if name != "default" else set()
    allowed_writes: set[str] = set()
    named: set[str] = set()
    commands = ALLOW + [c for c, _ in DENY]
    decisions = {c: check_command(c, policy) for c in commands}
    for command, d in decisions.items():
        if d.allowed:
            allowed_reads |= {os.path.join(wsr, r) for r in d.reads if r != P.NULL_DEVICE}
            allowed_writes |= {os.path.join(wsr, w) for w in d.writes}
        named |= set(named_paths(command, wsr))
    assert len([d for d in decisions.values() if d.allowed]) > 50 and len(named) > 100
    for root in policy.write_roots:
        os.makedirs(root, exist_ok=True)  # the wall makes a missing one (test_wall.py); here the host needs it

    def write_target(path: str) -> str:
        """What must be writable for a write to `path`: the file, else (new, or a symlink itself) its folder."""
        if os.path.islink(path):
            return os.path.dirname(path)
        return path if os.path.exists(path) else existing(path)

    probes = {existing(p) for p in allowed_reads | allowed_writes | named} | allowed_reads
    probes |= {write_target(p) for p in allowed_writes} | set(policy.protected)
    view = wall_view(policy, sorted(probes))

    def same(path: str) -> bool:
        return view[path][0] is not None and view[path][0] == host_ident(path)

    problems = []
    for path in sorted(allowed_reads):
        if host_ident(path) is not None and not same(path):
            problems.append(f"the check allows reading {path}, the wall does not show it")
    for path in sorted(allowed_writes):
        target = write_target(path)
        if not (same(target) and view[target][1]):
            problems.append(f"the check allows writing {path}, the wall does not let {target} be written")
    for path in sorted(named):
        real = os.path.realpath(path)
        at = existing(path)
        if not P.within(real, policy.write_roots) and real != P.NULL_DEVICE and same(at) and view[at][1]:
            problems.append(f"{path} is outside the write roots, but writable in the wall ({at})")
        if (os.path.exists(real) and not P.within(real, policy.read_roots) and same(path)
                and not P.within(real, SYSTEM) and real != P.NULL_DEVICE):
            problems.append(f"{path} is outside the read roots, but the wall shows it")
        if P.within(real, SYSTEM) and same(path) and view[path][1]:
            problems.append(f"{path} is a system file, writable in the wall")
    for path in policy.protected:
        if os.path.exists(path) and P.within(path, policy.write_roots):
            if policy.secrecy(path):  # the run store: covered, never shown (docs/policy.md)
                if same(path) or view[path][1]:
                    problems.append(f"{path} records runs, but the wall shows it or lets it be written")
            elif not same(path) or view[path][1]:
                problems.append(f"{path} is protected, but not read-only in the wall")
    assert not problems, "\n".join(problems)
