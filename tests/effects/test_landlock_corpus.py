"""The executed hostile corpus (test_hostile_corpus.py) under the Landlock wall (DAL_WALL=landlock), next to
the same canaries, through the real runner; the everyday commands still run there. (The wall alone, with the
check bypassed, is test_wall_alone.py's, for every wall kind.)"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_effects_corpus import ALLOW
from test_hostile_corpus import (
    AGENT,
    CASES,
    GIT,
    Case,
    _broken,
    _build,
    _files,
    _legit_run,
    _protected,
    _run,
    root,  # noqa: F401  # fixtures
    secret,  # noqa: F401
)

from dal.effects.classify.check import find_program
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
