"""`dal.run(source, filename=NAME)` keeps the text as WORKSPACE/.dal/scripts/NAME: NAME is a plain file name,
so a host that passes on a name it was given cannot have DAL write or read a file elsewhere (the workspace,
where scripts change names, or outside it). Next to a canary."""

from __future__ import annotations

from pathlib import Path

import pytest

import dal
from tests.swaprace import CANARY, make_canary


@pytest.mark.parametrize("name", ["../../s.dal", "sub/s.dal", "..", "", "ABS"])
def test_a_filename_with_folders_is_refused_and_writes_nothing(tmp_path: Path, name: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    canary = make_canary(tmp_path / "outside")
    name = str(canary) if name == "ABS" else name
    with pytest.raises(dal.DalUsageError, match="plain file name"):
        dal.run('print("x")\n', filename=name, workspace=ws)
    assert canary.read_text() == CANARY + "\n"
    assert not (ws / "s.dal").exists() and not list(ws.rglob("s.dal"))


def test_a_plain_filename_is_kept_and_a_symlink_there_is_replaced_not_followed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    kept = ws / ".dal" / "scripts"
    kept.mkdir(parents=True)
    canary = make_canary(tmp_path / "outside")
    (kept / "mine.dal").symlink_to(canary)
    r = dal.run('print("kept")\n', filename="mine.dal", workspace=ws)
    assert r.status == "completed" and r.output == "kept\n"
    assert not (kept / "mine.dal").is_symlink() and (kept / "mine.dal").read_text() == 'print("kept")\n'
    assert canary.read_text() == CANARY + "\n"
