"""The wall alone over the hostile corpus (issue 27): every case of tests/effects/test_hostile_corpus.py, its
commands run through DAL's executor with the check bypassed (wall_alone_launcher.py), inside bubblewrap
(test_landlock_corpus.py does the same under Landlock). test_hostile_corpus.py tests the wall only where the
check lets a command through; here the wall is the only barrier, so what it must hold is what a program can do
outside it:

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
(docs/policy.md, "What holds what"), and bubblewrap holds nested policy files and repositories only around
other programs. For those cases the wall alone must still keep everything outside the roots as it was and
unread -- but for a hard link to an outside file that already sits in the workspace (the operator's tree,
HARD_LINKED): it is the same file, which no wall can tell from a workspace file; the check denies it by its
link count.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
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
from dal.receipts.store import Store

LAUNCHER = Path(__file__).with_name("wall_alone_launcher.py")
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


def _launch(jobs: list[dict], secret: str, jobs_file: Path) -> None:
    jobs_file.write_text(json.dumps(jobs))
    env = {**os.environ, SECRET_VAR: secret, "DAL_WALL": "bubblewrap"}
    r = subprocess.run([sys.executable, str(LAUNCHER), str(jobs_file)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr


def _problems(root: Path, ws: Path, case: Case, before: tuple[dict, dict], outputs: list[list[str]],
              secret: str) -> list[str]:
    """What the wall alone let `case` do (the module's docstring says what it must hold)."""
    before_outside, before_protected = before
    text = "\n".join(f"{status}: {output}" for status, output in outputs)
    after = _files(root, skip=ws)
    problems = [f"outside the workspace: {k} changed, appeared or went" for k in sorted(before_outside.keys()
                | after.keys()) if before_outside.get(k) != after.get(k)]
    problems += [f"marker {m} exists" for m in MARKERS if m not in INSIDE and os.path.lexists(root / m)]
    problems += _leaks(root, None, secret, f"TOPSECRET-{root.name}")
    # the check is bypassed: a denial could only be the wall's absence, and then nothing was tested
    problems += [f"denied: {output}" for status, output in outputs if status == "denied"]
    problems += [f"{what} in the output" for what, mark in (("the DAL process's secret", secret),
                 ("outside/secret.txt", f"TOPSECRET-{root.name}"), ("/etc/passwd", "root:x:0:0:")) if mark in text]
    if not beyond_toolset(case):  # inside the workspace the check holds the default toolset (above)
        return problems
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
    return problems


ALL = [c for c in CASES if c.commands and c.id not in HARD_LINKED]
HALVES = 4  # one launcher for each quarter: small enough parts for -n 2 to keep both cores busy to the end


def test_the_corpus_is_all_there() -> None:
    assert len(ALL) > 90 and len(ALL) == len({c.id for c in ALL})


@pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")
@pytest.mark.parametrize("half", range(HALVES))
def test_the_wall_alone_holds_every_case(half: int) -> None:
    """Every case of this half, each in a tree of its own with its canaries, all run by one DAL process (a
    process each would cost more than the cases), each checked afterwards."""
    cases = [c for c in ALL[half::HALVES] if all(find_program(name) is not None for name in c.allow)]
    secret = "s3cr3t-" + os.urandom(8).hex()
    base = Path(tempfile.mkdtemp(prefix="dal-wall-alone-", dir="/var/tmp"))  # not /tmp: the wall's is private
    try:
        jobs, trees = [], []
        for i, case in enumerate(cases):
            root = base / str(i)
            root.mkdir()
            ws = _build(root, case)
            Store(ws / ".dal" / "dal.db").close()  # the store a run would have made
            trees.append((root, ws, (_files(root, skip=ws), _protected(ws, case.keep))))
            jobs.append({"workspace": str(ws), "commands": list(case.commands), "allow": list(case.allow),
                         "out": str(base / f"{i}.json")})
        _launch(jobs, secret, base / "jobs.json")
        failed = []
        for case, (root, ws, before), job in zip(cases, trees, jobs, strict=True):
            outputs = json.loads(Path(job["out"]).read_text())["outputs"]
            problems = _problems(root, ws, case, before, outputs, secret)
            if problems:
                failed.append(f"{case.id}: {problems}\n" + "\n".join(f"  {s}: {o}" for s, o in outputs))
        assert not failed, "\n".join(failed)
    finally:
        shutil.rmtree(base, ignore_errors=True)
