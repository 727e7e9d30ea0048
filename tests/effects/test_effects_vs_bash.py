"""Differential test of the executor: lists, pipes and redirections behave exactly as in bash.

The same generated command runs under bash and under DAL's executor, each in its own copy of a small
directory; stdout, stderr, the exit status and every file afterwards must match.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dal.effects import EffectContext, Policy, check_command, run_effect

BASH = shutil.which("bash", path="/usr/bin:/bin")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash not installed")

programs = st.sampled_from(
    ["echo one", "echo 'two words'", "printf '%s-' a b", "cat in.txt", "cat", "true", "false", "ls missing",
     "sort in.txt", "wc -l", "head -n 1", "echo err >&2", "cat f1", "ls in.txt missing",
     "echo a~b x:~ --p=~ 1a=~", "cat in.txt~"]
)  # fmt: skip
redirect = st.sampled_from(["> f1", ">> f1", "2> f2", "2>> f2", "&> f1", "2>&1", "< in.txt", "> /dev/null",
                            "2>/dev/null", ">&2", "> f1~"])  # fmt: skip
simple = st.builds(lambda p, r: " ".join([p, *r]), programs, st.lists(redirect, max_size=2))
command = st.builds(
    lambda first, rest: first + "".join(f" {op} {c}" for op, c in rest),
    simple,
    st.lists(st.tuples(st.sampled_from(["&&", "||", ";", "|"]), simple), max_size=3),
)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _scratch() -> Path:
    d = Path(tempfile.mkdtemp(prefix="dal-vs-bash-"))
    (d / "in.txt").write_text("zeta\nalpha\n")
    return d


@settings(max_examples=80, deadline=None)
@given(command)
def test_executor_matches_bash(cmd: str) -> None:
    ours_dir, bash_dir = _scratch(), _scratch()
    try:
        policy = Policy.load(ours_dir)
        assert check_command(cmd, policy).allowed, cmd
        ours = run_effect(cmd, EffectContext(policy=policy, timeout=10, use_sandbox=False))
        theirs = subprocess.run(
            [BASH, "--norc", "--noprofile", "-c", cmd], cwd=bash_dir, capture_output=True, timeout=10,
            stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(bash_dir)},
        )  # fmt: skip
        racy = "|" in cmd and ("f1" in cmd or "f2" in cmd)  # `sort > f1 | cat f1 > f1`: a race in bash too
        if not racy:
            assert ours.code == theirs.returncode, cmd
        if "|" not in cmd:
            assert ours.stdout == theirs.stdout.decode(), cmd
            assert ours.stderr == theirs.stderr.decode(), cmd
            assert _files(ours_dir) == _files(bash_dir), cmd
        elif "f1" not in cmd and "f2" not in cmd:
            # The parts of a pipeline run at once: their stderr writes interleave in any order, and
            # a file written by one part and read by another is a race in bash too.
            assert ours.stdout == theirs.stdout.decode(), cmd
            assert sorted(ours.stderr) == sorted(theirs.stderr.decode()), cmd  # writes interleave mid-line
    finally:
        shutil.rmtree(ours_dir, ignore_errors=True)
        shutil.rmtree(bash_dir, ignore_errors=True)
