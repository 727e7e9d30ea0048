"""`dal test` reads test scripts and the workflows they invoke once, by descriptor, below the project: a
test script (as untrusted as any) cannot invoke a file outside it, and a name swapped for a symlink to a
file outside, while `dal test` reads it again and again, never shows that file's content. Next to a canary."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dal.testing.harness import TestResult, TestSession, run_test_file
from tests.swaprace import CANARY, make_canary, race, swapping

WORKFLOW = 'print("workflow ran")\n'
INVOKE = 'let r = invoke("wf.dal")\nassert_eq(r.status, "completed")\nprint(r.output)\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    p = tmp_path / "proj"
    (p / "tests").mkdir(parents=True)
    (p / "dal.toml").write_text("")
    monkeypatch.chdir(p)
    return p


def _met(out: list[object], field: str, refusal: str) -> bool:
    """Both states met: a test that passed, and one refused with `refusal` in its `field`."""
    return any(getattr(o, "passed", False) for o in out) and any(refusal in str(getattr(o, field, "")) for o in out)


def _shown(result: object) -> str:
    r = result
    return f"{getattr(r, 'message', '')}\n{getattr(r, 'error', '')}\n{getattr(r, 'output', '')}"


def test_a_test_cannot_invoke_a_file_outside_its_project(project: Path, tmp_path: Path) -> None:
    canary = make_canary(tmp_path / "outside")
    (project / "tests" / "out.dal").symlink_to(canary)
    rel = os.path.relpath(canary, project / "tests")
    for target in (str(canary), rel, "out.dal"):
        test = project / "tests" / "t.test.dal"
        test.write_text(f'let r = invoke("{target}")\nprint(r.error)\nfail("read it")\n')
        result = run_test_file(test)
        assert not result.passed and CANARY not in _shown(result), target
        assert "not read" in str(result.error), (target, result.error)


def test_an_invoked_workflow_swapped_for_a_symlink_out_never_shows_the_outside_file(
        project: Path, tmp_path: Path) -> None:
    canary = make_canary(tmp_path / "outside")
    test = project / "tests" / "t.test.dal"
    test.write_text(INVOKE.replace("wf.dal", "../wf.dal"))
    with swapping(project / "wf.dal", WORKFLOW, canary):
        outcomes = race(lambda: run_test_file(test), 30, pause=0.002,
                        until=lambda out: _met(out, "error", "leads outside"))
    assert not [o for o in outcomes if CANARY in _shown(o)]
    passed = [o for o in outcomes if getattr(o, "passed", False)]
    refused = [o for o in outcomes if "leads outside" in str(getattr(o, "error", ""))]
    assert passed and refused, "the race did not run: both states must have been met"
    assert all("workflow ran" in o.output for o in passed)  # type: ignore[attr-defined]


def test_read_workflow_under_a_fast_swap_never_returns_the_outside_file(project: Path, tmp_path: Path) -> None:
    canary = make_canary(tmp_path / "outside")
    session = TestSession(project / "tests" / "t.test.dal", tmp_path / "tws")
    with swapping(project / "wf.dal", WORKFLOW, canary):
        outcomes = race(lambda: session.read_workflow(project / "tests" / ".." / "wf.dal"), 1000,
                        until=lambda out: any(isinstance(o, str) for o in out))
    assert {o for o in outcomes if isinstance(o, str)} == {WORKFLOW}
    assert CANARY not in repr(outcomes)


def test_a_test_script_swapped_for_a_symlink_out_never_shows_the_outside_file(project: Path, tmp_path: Path) -> None:
    canary = make_canary(tmp_path / "outside")
    test = project / "tests" / "s.test.dal"
    with swapping(test, 'assert_eq(1, 1)\n', canary):
        outcomes = race(lambda: run_test_file(Path("tests/s.test.dal")), 300, pause=0.001,
                        until=lambda out: _met(out, "message", "outside"))
    assert not [o for o in outcomes if CANARY in _shown(o)]
    assert all(isinstance(o, TestResult) for o in outcomes), [o for o in outcomes if not isinstance(o, TestResult)][:3]
    results = [o for o in outcomes if isinstance(o, TestResult)]
    assert [r for r in results if r.passed] and [r for r in results if "outside" in (r.message or "")]


def test_a_test_cannot_invoke_a_script_in_dals_own_state(project: Path) -> None:
    kept = project / ".dal" / "scripts"
    kept.mkdir(parents=True)
    (kept / "sha256-abc.dal").write_text(f"print({CANARY})\n")
    test = project / "tests" / "t.test.dal"
    test.write_text('let r = invoke("../.dal/scripts/sha256-abc.dal")\nprint(r.error)\n')
    result = run_test_file(test)
    assert not result.passed and "DAL's own state" in str(result.error) and CANARY not in _shown(result)


def test_an_invoked_policy_file_swapped_for_a_symlink_out_is_never_the_policy_a_workflow_runs_under(
        project: Path, tmp_path: Path) -> None:
    # The file outside is narrower than the ceiling (it gates echo behind approval), so only where it was
    # read from tells: a workflow that ran under it would wait for a person.
    (tmp_path / "outside").mkdir()
    canary = tmp_path / "outside" / "p.toml"
    canary.write_text('[run]\nrequire_approval = ["echo"]\n')
    (project / "wf.dal").write_text('print(run("echo hi"))\n')
    test = project / "tests" / "t.test.dal"
    test.write_text('let r = invoke("../wf.dal", {"policy": "p.toml"})\nassert_eq(r.status, "completed")\n')
    with swapping(project / "tests" / "p.toml", "[run]\n", canary):
        outcomes = race(lambda: run_test_file(test), 30, pause=0.002,
                        until=lambda out: _met(out, "error", "not read") or _met(out, "error", "changed while"))
    results = [o for o in outcomes if isinstance(o, TestResult)]
    assert len(results) == len(outcomes)
    assert not [r for r in results if "waiting" in _shown(r) or "approval" in _shown(r)], [
        _shown(r) for r in results if "waiting" in _shown(r) or "approval" in _shown(r)][:2]
    assert [r for r in results if r.passed]
    odd = [f"{r.error!s} / {r.message}" for r in results
           if not r.passed and "not read" not in str(r.error) and "changed while" not in str(r.error)]
    assert not odd, odd[:3]
