"""The wall alone over the hostile corpus (issue 27): every case of tests/effects/test_hostile_corpus.py, its
commands run through DAL's executor with the check bypassed (wall_alone_launcher.py), in each wall kind
here. test_hostile_corpus.py tests the wall only where the check lets a command through; here the wall is the
only barrier, so what it must hold is what a program can do outside it:

- nothing outside the workspace changes, appears or goes; no marker appears above or outside it;
- the DAL process's secret, the outside secret and /etc/passwd's content are in no output and no file;
- the files that decide or record what a script may do (the policy files, git's config and hooks, the store)
  are as they were once the wall is closed;
- the person's own git, run later outside any wall, runs nothing the script left for it, and a later `dal run`
  in a folder the case names does not take a planted policy.

A program running another inside the wall (git's pager, `sh` through a hook) is the wall's to contain, not a
breach: markers in the workspace made inside the wall are removed before the person's git runs.

A case whose programs are all of the default toolset is held inside the workspace by the check, by design:
those programs run without a wall too, so the check models each of their reads and writes exactly
(docs/policy.md, "Root, and no wall"), and the walls leave the workspace's protected names to it for them
(bubblewrap holds nested policy files and repositories only around other programs; Landlock gives them the
roots whole). For those cases the wall alone must still keep everything outside the roots as it was and
unread -- but for a hard link to an outside file that already sits in the workspace (the operator's tree):
it is the same file, which no wall can tell from a workspace file; the check denies it by its link count.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hostile_corpus import (
    CASES,
    MARKERS,
    SECRET_VAR,
    Case,
    _build,
    _files,
    _later_run,
    _leaks,
    _operator_git,
    _protected,
)

from dal.effects import sandbox_status
from dal.effects.classify.check import find_program
from dal.effects.plan.shell import ShellDenied, parse_command
from dal.effects.policy import DEFAULT_TOOLSET_NAMES
from dal.effects.wall import landlock_wall
from dal.receipts.store import Store

LAUNCHER = Path(__file__).with_name("wall_alone_launcher.py")
KINDS = {"bubblewrap": sandbox_status()[0], "landlock": landlock_wall.missing() is None}
INSIDE = ("ws/pwned", "ws/sub/pwned")  # what a program may make inside the wall, in a write root
HARD_LINKED = {"grep-r-through-hard-link", "cp-r-through-hard-link"}  # an outside file already in the tree


def beyond_toolset(case: Case) -> bool:
    """Whether a command of `case` runs a program beyond the default toolset (the wall is its barrier)."""
    for command in case.commands:
        try:
            plan = parse_command(command.replace("{WS}", "/ws").replace("{DALPID}", "1"))
        except ShellDenied:
            continue
        if any(c.argv[0] not in DEFAULT_TOOLSET_NAMES for c in plan.simple_commands()):
            return True
    return False


@pytest.fixture()
def root() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="dal-wall-alone-", dir="/var/tmp"))  # not /tmp: the wall's is private
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run(root: Path, ws: Path, case: Case, kind: str, secret: str) -> list[list[str]]:
    job, out = root / "job.json", root / "ran.json"
    job.write_text(json.dumps({"workspace": str(ws), "commands": list(case.commands), "allow": list(case.allow),
                               "out": str(out)}))
    env = {**os.environ, SECRET_VAR: secret, "DAL_WALL": kind}
    r = subprocess.run([sys.executable, str(LAUNCHER), str(job)], env=env, capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr
    outputs = json.loads(out.read_text())["outputs"]
    job.unlink()
    out.unlink()
    return outputs


def _params() -> list:
    out = []
    for case in CASES:
        if not case.commands:
            continue  # a DAL builtin's case (env()): no program runs
        missing = [name for name in case.allow if find_program(name) is None]
        for kind, have in KINDS.items():
            marks = []
            if missing:
                marks.append(pytest.mark.skip(reason=f"{', '.join(missing)} not installed"))
            if not have:
                marks.append(pytest.mark.skip(reason=f"no {kind} wall here"))
            if case.id in HARD_LINKED:
                marks.append(pytest.mark.xfail(strict=True, reason="a hard link already in the tree is the outside "
                                               "file itself: the check holds it, by its link count"))
            out.append(pytest.param(case, kind, id=f"{case.id}-{kind}", marks=marks))
    return out


@pytest.mark.parametrize(("case", "kind"), _params())
def test_the_wall_alone_holds(case: Case, kind: str, root: Path) -> None:
    secret = "s3cr3t-" + os.urandom(8).hex()
    ws = _build(root, case)
    Store(ws / ".dal" / "dal.db").close()  # the store a run would have made
    before_outside = _files(root, skip=ws)
    before_protected = _protected(ws, case.keep)
    outputs = _run(root, ws, case, kind, secret)
    text = "\n".join(f"{status}: {output}" for status, output in outputs)
    problems = []
    after = _files(root, skip=ws)
    problems += [f"outside the workspace: {k} changed, appeared or went" for k in sorted(before_outside.keys()
                 | after.keys()) if before_outside.get(k) != after.get(k)]
    problems += [f"marker {m} exists" for m in MARKERS if m not in INSIDE and os.path.lexists(root / m)]
    problems += _leaks(root, None, secret, f"TOPSECRET-{root.name}")
    problems += [f"{what} in the output" for what, mark in (("the DAL process's secret", secret),
                 ("outside/secret.txt", f"TOPSECRET-{root.name}"), ("/etc/passwd", "root:x:0:0:")) if mark in text]
    if not beyond_toolset(case):  # inside the workspace the check holds the default toolset (above)
        assert not problems, f"{case.id} ({kind}): {problems}\n{text}"
        return
    if _protected(ws, case.keep) != before_protected:
        problems.append("a protected file changed")
    if not (ws / ".dal" / "dal.db").exists():
        problems.append("the run store is gone")
    for m in INSIDE:
        if os.path.lexists(root / m):
            os.unlink(root / m)
    problems += _operator_git(root, ws)
    if case.later:
        later = _later_run(ws, case, True)
        if later:
            problems.append(f"the later `dal run` in {case.later}/ ran sh: {later}")
    assert not problems, f"{case.id} ({kind}): {problems}\n{text}"
