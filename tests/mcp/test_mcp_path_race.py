"""`dal mcp`'s `check`, `run` and `submit` with `path`: a script's program swaps the name between a script
and a symlink to a file outside the workspace while the agent calls the tool again and again; the outside
file's content never reaches the agent (issue 27: the first line of any file came back in a diagnostic).
In process (DalTools, as the server calls it), next to a canary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dal.effects import Policy
from dal.mcp.ceiling import Ceiling
from dal.mcp.tools import DalTools, ToolFailure
from tests.swaprace import CANARY, make_canary, race, swapping

SCRIPT = 'print("inside")\n'


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return w.resolve()


def _tools(ws: Path) -> DalTools:
    return DalTools(ws, Ceiling(Policy.load(ws)))


def _both(out: list[object]) -> bool:
    return any(isinstance(o, dict) for o in out) and any(isinstance(o, ToolFailure) for o in out)


def _outcomes_show_no_canary(outcomes: list[object]) -> None:
    texts = [json.dumps(o, default=str) if isinstance(o, dict) else str(o) for o in outcomes]
    assert not [t for t in texts if CANARY in t]
    failures = [o for o in outcomes if isinstance(o, ToolFailure)]
    assert [o for o in outcomes if isinstance(o, dict)] and failures, "the race did not run: both states met"
    assert all("outside" in str(f) or "changed while" in str(f) for f in failures), failures[:3]


def test_check_with_a_path_swapped_for_a_symlink_out_never_shows_the_outside_file(ws: Path, tmp_path: Path) -> None:
    canary = make_canary(tmp_path / "outside")
    tools = _tools(ws)
    with swapping(ws / "s.dal", SCRIPT, canary):
        outcomes = race(lambda: tools.call("check", {"path": "s.dal"}), 1500, until=_both)
    _outcomes_show_no_canary(outcomes)
    assert all(o["ok"] for o in outcomes if isinstance(o, dict))


def test_run_with_a_path_swapped_for_a_symlink_out_never_runs_or_shows_the_outside_file(
        ws: Path, tmp_path: Path) -> None:
    # The runner reads the script again when it starts; that read is below the workspace too.
    canary = make_canary(tmp_path / "outside")
    tools = _tools(ws)
    n = iter(range(10**6))
    with swapping(ws / "s.dal", SCRIPT, canary):
        outcomes = race(lambda: tools.call("run", {"path": "s.dal", "key": f"k{next(n)}"}), 40, pause=0.002,
                        until=_both)
    _outcomes_show_no_canary(outcomes)
    ran = [o for o in outcomes if isinstance(o, dict)]
    assert all(o["status"] == "completed" and o["output"] == "inside\n" for o in ran), ran[:3]
    receipts = list((ws / ".dal").rglob("*"))
    assert not [p for p in receipts if p.is_file() and CANARY.encode() in p.read_bytes()]


def test_submit_with_a_path_swapped_for_a_symlink_out_never_queues_the_outside_file(
        ws: Path, tmp_path: Path) -> None:
    canary = make_canary(tmp_path / "outside")
    tools = _tools(ws)
    n = iter(range(10**6))
    with swapping(ws / "s.dal", SCRIPT, canary):
        outcomes = race(lambda: tools.call("submit", {"path": "s.dal", "key": f"k{next(n)}"}), 100, pause=0.002,
                        until=_both)
    _outcomes_show_no_canary(outcomes)
    kept = list((ws / ".dal" / "scripts").iterdir())
    assert kept and all(p.read_text() == SCRIPT for p in kept)


def test_a_path_that_is_a_fifo_or_a_hard_link_out_is_refused_at_once(ws: Path, tmp_path: Path) -> None:
    import os

    canary = make_canary(tmp_path / "outside")
    os.mkfifo(ws / "f.dal")  # no writer: opening it to read would wait forever
    os.link(canary, ws / "h.dal")
    tools = _tools(ws)
    for name in ("f.dal", "h.dal"):
        with pytest.raises(ToolFailure, match="cannot read") as e:
            tools.call("check", {"path": name})
        assert CANARY not in str(e.value)


def test_a_path_into_dals_own_state_is_refused_also_through_a_symlink(ws: Path) -> None:
    kept = ws / ".dal" / "scripts"
    kept.mkdir(parents=True)
    (kept / "sha256-abc.dal").write_text(f'print("{CANARY}")\n')  # a script another run kept: not the agent's
    (ws / "alias.dal").symlink_to(".dal/scripts/sha256-abc.dal")
    (ws / "state").symlink_to(".dal")
    tools = _tools(ws)
    for name in (".dal/scripts/sha256-abc.dal", "alias.dal", "state/scripts/sha256-abc.dal",
                 "state/../.dal/scripts/sha256-abc.dal"):
        with pytest.raises(ToolFailure, match="DAL's own state") as e:
            tools.call("check", {"path": name})
        assert CANARY not in str(e.value)
