"""dal.core.fsutil.realpath: a name swapped between a file and a symlink while DAL resolves it is resolved
(to one or the other), never an OSError (Python 3.11's realpath raises EINVAL when a symlink it met is a
file by the time it reads it) that would surface as an internal error of DAL."""

from __future__ import annotations

from pathlib import Path

from dal.core.fsutil import realpath
from tests.swaprace import make_canary, race, swapping


def test_a_name_swapped_under_realpath_is_resolved_not_an_error(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    canary = make_canary(tmp_path / "outside")
    name = ws / "p.toml"
    with swapping(name, "x\n", canary):
        outcomes = race(lambda: realpath(name), 20000, until=lambda out: len(set(out)) >= 2)
    assert set(outcomes) == {str(name), str(canary)}
