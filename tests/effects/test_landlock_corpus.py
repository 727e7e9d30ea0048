"""The executed hostile corpus (test_hostile_corpus.py) under the Landlock wall (DAL_WALL=landlock), next to
the same canaries, through the real runner; the everyday commands still run there. And the wall alone: every case's
commands with the check bypassed, as test_wall_alone.py runs them behind bubblewrap."""

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
from test_effects_corpus import ALLOW
from test_hostile_corpus import (
    AGENT,
    CASES,
    GIT,
    SECRET_VAR,
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
from test_wall_alone import ALL, HALVES, LAUNCHER, _problems

from dal.effects import EffectContext, run_effect
from dal.effects.classify.check import find_program
from dal.effects.exec.running import wall_in_force
from dal.effects.wall import landlock_wall
from dal.receipts.store import Store

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


@pytest.mark.parametrize("half", range(HALVES))
def test_the_landlock_wall_alone_holds_every_case(half: int) -> None:
    """test_wall_alone.py's test, under the Landlock wall: every case's commands with the check bypassed, each
    in a tree of its own with its canaries, all run by one DAL process per half."""
    cases = [c for c in ALL[half::HALVES] if all(find_program(name) is not None for name in c.allow)]
    token = "s3cr3t-" + os.urandom(8).hex()
    base = Path(tempfile.mkdtemp(prefix="dal-landlock-alone-", dir="/var/tmp"))
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
        (base / "jobs.json").write_text(json.dumps(jobs))
        r = subprocess.run([sys.executable, str(LAUNCHER), str(base / "jobs.json")], capture_output=True, text=True,
                           env={**os.environ, SECRET_VAR: token, "DAL_WALL": "landlock"}, timeout=600)
        assert r.returncode == 0, r.stderr
        failed = []
        for case, (root, ws, before), job in zip(cases, trees, jobs, strict=True):
            outputs = json.loads(Path(job["out"]).read_text())["outputs"]
            problems = _problems(root, ws, case, before, outputs, token)
            if problems:
                failed.append(f"{case.id}: {problems}\n" + "\n".join(f"  {s}: {o}" for s, o in outputs))
        assert not failed, "\n".join(failed)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("wget")), reason="curl and wget needed")
def test_the_fetchers_attacks_are_held_under_landlock(tmp_path: Path) -> None:
    """test_fetchers.py's attacks that the old option models denied (issue 27's shifted arguments among
    them), run under the Landlock wall next to the same canaries."""
    from test_fetchers import HELD, _policy, _state
    from test_fetchers import ws as make_ws

    ws = make_ws.__wrapped__(tmp_path)  # type: ignore[attr-defined]
    ctx = EffectContext(policy=_policy(ws), require_sandbox=True)
    assert wall_in_force(ctx)["wall"] == "landlock"
    before = _state(ws)
    for command in HELD:
        r = run_effect(command.replace("{WS}", str(ws)), ctx)
        assert r.status != "denied" or "no wall" not in r.summary, (command, r.summary)
        assert "CANARY" not in r.stdout + r.stderr and "STORE-SECRET" not in r.stdout + r.stderr, (command, r)
        assert "root:x:0:0:root:/root" not in r.stdout, command
        assert _state(ws) == before, command
