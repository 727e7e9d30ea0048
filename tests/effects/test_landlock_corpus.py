"""The executed hostile corpus (test_hostile_corpus.py) under the Landlock wall (DAL_WALL=landlock), next to
the same canaries: every case through the real runner, and every case's commands with the check bypassed,
so that what holds is the Landlock wall alone."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from test_effects_corpus import ALLOW
from test_hostile_corpus import (
    AGENT,
    CASES,
    GIT,
    Case,
    _broken,
    _build,
    _bypass,
    _files,
    _legit_run,
    _protected,
    _run,
    root,  # noqa: F401  # fixtures
    secret,  # noqa: F401
)

from dal.effects import EffectContext, Policy, execute_checked
from dal.effects.classify.check import find_program
from dal.effects.exec import executor
from dal.effects.plan.shell import parse_command
from dal.effects.policy import DEFAULT_TOOLSET_NAMES
from dal.effects.wall import landlock_wall

pytestmark = pytest.mark.skipif(landlock_wall.missing() is not None, reason=f"{landlock_wall.missing()}")


@pytest.fixture(autouse=True)
def landlock_kind(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DAL_WALL", "landlock")  # the runner's processes inherit it
    yield


def _installed(case: Case) -> list:
    missing = [name for name in case.allow if find_program(name) is None]
    return [pytest.mark.skip(reason=f"{', '.join(missing)} not installed")] if missing else []


# Through the runner: the cases the check lets through (it denies the others before any wall is made; the
# wall alone is tested on every case below).
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_installed(c)) for c in CASES
                                  if "wall" in c.needs or c.later])
def test_hostile_case_holds_under_landlock(case: Case, root: Path, secret: str) -> None:  # noqa: F811
    ws = _build(root, case)
    before_outside = _files(root, skip=ws)
    before_protected = _protected(ws, case.keep)
    ran = _run(root, ws, case, True, secret)
    assert not case.commands or ran.receipt["sandbox"]["wall"] == "landlock", ran.receipt["sandbox"]
    problems = _broken(root, ws, before_outside, before_protected, ran, secret, case.keep)
    assert not problems, f"{case.id}: {problems}\n{ran.stdout}"


def _wall_alone(ws: Path, commands: tuple[str, ...], allow: tuple[str, ...], secret_value: str) -> str:
    """Each command with both checks bypassed, under the Landlock wall: what the wall alone lets through."""
    policy = Policy.load(ws, allow_run=["sh", *allow])
    out = []
    with mock.patch.object(executor, "recheck", lambda c, p: None), \
            mock.patch.dict(os.environ, {"DAL_HOSTILE_SECRET": secret_value}):
        for command in commands:
            command = command.replace("{WS}", str(ws)).replace("{DALPID}", str(os.getpid()))
            try:
                r = execute_checked(command, _bypass(command, policy), EffectContext(policy=policy, timeout=10))
            except ValueError:  # not a command DAL's shell syntax takes: nothing runs
                continue
            out.append(r.stdout + r.stderr)
    return "\n".join(out)


def _beyond_toolset(case: Case) -> bool:
    """Whether a command of the case runs a program outside the default toolset (after its setup's own)."""
    names = set()
    for command in case.commands:
        try:
            names |= {c.argv[0] for c in parse_command(command.replace("{WS}", "/w")).simple_commands()}
        except ValueError:
            pass
    return bool(names - set(DEFAULT_TOOLSET_NAMES))


# A hard link made before DAL ran is the file outside itself, in every wall (docs/policy.md, "What the wall
# does not cover"); the check refuses a file with other links.
SAME_FILE = {"cp-r-through-hard-link"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_installed(c)) for c in CASES
                                  if c.commands and not c.later and c.id not in SAME_FILE])
def test_the_landlock_wall_alone_holds(case: Case, root: Path, secret: str) -> None:  # noqa: F811
    ws = _build(root, case)
    before_outside = _files(root, skip=ws)
    before_protected = _protected(ws, case.keep)
    text = _wall_alone(ws, case.commands, case.allow, secret)
    problems = _broken(root, ws, before_outside, before_protected, None, secret, case.keep)
    for leaked in (secret, "root:x:0:0:"):
        if leaked in text:
            problems.append(f"{leaked!r} in the output")
    if not _beyond_toolset(case):
        # The default toolset alone has the roots whole (docs/policy.md, "The Landlock wall"): the wall holds
        # the outside; protected names below the workspace's top are the check's, as behind bubblewrap.
        problems = [p for p in problems if not p.startswith("a protected file changed")]
    assert not problems, f"{case.id}: {problems}\n{text}"


def test_legitimate_commands_still_run_under_landlock(root: Path) -> None:  # noqa: F811
    from effects_workspace import build_workspace

    ws, _ = build_workspace(root)
    corpus = _legit_run(ws, list(ALLOW), True, ())
    agent: list[tuple[str, str]] = []
    if shutil.which("git"):
        (root / "repo").mkdir()
        agent = _legit_run(_build(root / "repo", Case("agent", ())), AGENT, True, GIT)
    results = corpus + agent
    denied = [(c, s) for c, s in results if s == "denied"]
    assert len(denied) <= 0.05 * len(results), denied
