"""Property tests: commands generated from a grammar of shell constructs.

Every command the gate allows is executed (without the bubblewrap wall, so the gate alone is tested) in a
scratch workspace next to a canary directory; nothing outside the workspace may change.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from effects_workspace import build_workspace, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dal.effects import Decision, EffectContext, Policy, check_command, execute_checked, run_effect, sandbox_status
from dal.effects.classify.check import find_program
from dal.effects.exec import executor
from dal.effects.plan.shell import ShellDenied, parse_command

PROGRAMS = ["cat", "ls", "touch", "mkdir", "cp", "mv", "rm", "echo", "printf", "grep", "sort", "tee", "find",
            "head", "wc", "uniq", "test", "diff", "stat", "sh", "env", "xargs"]  # fmt: skip
# Paths inside, outside directly, through `..`, and through each kind of symlink. OUT is replaced by the
# absolute path of the canary directory. No system paths: a gate bug must not be able to hurt the host.
PATHS = ["notes.txt", "docs", "docs/a.md", "dest", "dest/docs", "new.txt", "new dir", ".", "sub", "sub/up",
         "sub/up/notes.txt",
         "link_in", "link_in/a.md", "link_out", "link_out/canary.txt", "link_out/new", "dangling",
         "file_link_out", "..", "../outside", "../outside/canary.txt", "docs/../../outside/x", "OUT",
         "OUT/canary.txt", "OUT/new", "/dev/null", "hard_canary", "hard_tree", "hard_tree/docs/a.md"]  # fmt: skip
OPTIONS = ["-r", "-R", "-f", "-p", "-n", "-l", "-a", "-L", "-t", "-o", "-e", "--", "-name", "-exec", "-delete",
           "--target-directory=OUT", "--target=OUT", "--output=OUT/x", "-fprint", "--no-preserve-root",
           "1"]  # fmt: skip
CONSTRUCTS = ["$(touch OUT/sub)", "`touch OUT/tick`", "$HOME", "${X}", "*", "~", "{a,b}", "$'\\x41'", "<(ls)"]


def quote(word: str) -> st.SearchStrategy[str]:
    escaped = "".join("\\" + c if c in " '\"\\" else c for c in word)
    double = word.replace("\\", "\\\\").replace('"', '\\"')
    return st.sampled_from([word if word and " " not in word else escaped, f"'{word}'", f'"{double}"', escaped])


word = st.one_of(
    st.sampled_from(PATHS).flatmap(quote),
    st.sampled_from(OPTIONS),
    st.sampled_from(CONSTRUCTS),
    st.text(alphabet="abcxyz-_.=/", min_size=1, max_size=6),
)
redirect = st.tuples(st.sampled_from([">", ">>", "2>", "&>", "<", "2>&1", ">&2"]), st.sampled_from(PATHS)).map(
    lambda t: t[0] if t[0] in ("2>&1", ">&2") else f"{t[0]} '{t[1]}'"
)
simple = st.builds(
    lambda prog, args, reds: " ".join([prog, *args, *reds]),
    st.sampled_from(PROGRAMS),
    st.lists(word, max_size=4),
    st.lists(redirect, max_size=2),
)
command = st.builds(
    lambda first, rest: first + "".join(f" {op} {cmd}" for op, cmd in rest),
    simple,
    st.lists(st.tuples(st.sampled_from(["&&", "||", ";", "|"]), simple), max_size=3),
)


def _dev_null_intact(cmd: str) -> None:
    """/dev/null is in PATHS and, without the wall, as root, is the host's own: a gate that let `rm -f
    /dev/null` through once broke every process on the machine. Put it back, and fail naming the command."""
    import stat

    try:
        st = os.lstat("/dev/null")
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3):
            return
        os.unlink("/dev/null")
    except FileNotFoundError:
        pass
    os.mknod("/dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.chmod("/dev/null", 0o666)
    raise AssertionError(f"an allowed command removed or replaced /dev/null (put back): {cmd}")


def _fill(cmd: str, outside: Path) -> str:
    return cmd.replace("OUT", str(outside))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command)
def test_allowed_commands_never_touch_anything_outside_the_workspace(cmd: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="dal-prop-"))
    try:
        ws, outside = build_workspace(root)
        cmd = _fill(cmd, outside)
        before = snapshot(root)
        policy = Policy.load(ws)
        decision = check_command(cmd, policy)
        if not decision.allowed:
            result = run_effect(cmd, EffectContext(policy=policy, use_sandbox=False))
            assert result.status == "denied"
            assert snapshot(root) == before  # a denied command never executes
            return
        run_effect(cmd, EffectContext(policy=policy, timeout=5, use_sandbox=False))
        _dev_null_intact(cmd)
        after = snapshot(root)
        outside_keys = {k for k in before.keys() | after.keys() if not k.startswith("ws")}
        assert {k: before.get(k) for k in outside_keys} == {k: after.get(k) for k in outside_keys}, cmd
    finally:
        shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | command)
def test_check_never_raises_on_any_string(text: str) -> None:
    policy = _POLICY
    decision = check_command(text, policy)
    assert isinstance(decision.allowed, bool) and decision.reason


@settings(max_examples=300, deadline=None)
@given(command)
def test_parse_is_a_plan_or_a_named_denial(cmd: str) -> None:
    try:
        plan = parse_command(cmd)
    except ShellDenied as e:
        assert str(e)
        return
    assert all(c.argv and c.argv[0] for c in plan.simple_commands())
    assert len(plan.ops) == len(plan.items) - 1


_POLICY = Policy.load(Path(tempfile.gettempdir()))


HAVE_BWRAP = sandbox_status()[0]
writer = st.builds(
    lambda prog, target: f"{prog} {target}",
    st.sampled_from(["touch", "mkdir -p", "rm -rf", "cp notes.txt", "mv notes.txt", "tee", "cp -r docs"]),
    st.sampled_from(["OUT/canary.txt", "OUT/new", "OUT", "link_out/new", "dangling", "file_link_out", "../outside/x"]),
)


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(writer, min_size=1, max_size=3).map(" ; ".join))
def test_the_wall_alone_keeps_writes_inside(cmd: str) -> None:
    """With both checks bypassed (test-only), programs inside bubblewrap still cannot write outside."""
    root = Path(tempfile.mkdtemp(prefix="dal-wall-prop-", dir="/var/tmp"))
    try:
        ws, outside = build_workspace(root)
        cmd = _fill(cmd, outside)
        before = snapshot(outside)
        policy = Policy.load(ws)
        plan = parse_command(cmd)
        names = {c.argv[0] for c in plan.simple_commands()}
        bypass = Decision(True, "bypassed in a test", "local", plan=plan,
                          executables=tuple((n, find_program(n)) for n in names))  # fmt: skip
        with mock.patch.object(executor, "recheck", lambda c, p: None):
            execute_checked(cmd, bypass, EffectContext(policy=policy, timeout=5, use_sandbox=True))
        assert snapshot(outside) == before, cmd
    finally:
        shutil.rmtree(root, ignore_errors=True)
