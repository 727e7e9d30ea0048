"""Without a wall, the check keeps the default toolset from DAL's run store: `ls .dal`, `stat .dal/dal.db` and
`du -s .dal` are denied, and `grep -r` runs with `--exclude-dir=.dal`. A walk of the workspace from above it
still lists the store's names, sizes and times: `ls -laR .`, `du -a .` and `find . -printf '%p %s'` print
`.dal/dal.db`, its journal files and `receipts/run_...` (executed as an ordinary user with DAL_WALL=none).
Behind bubblewrap the store is an empty folder. Open: the rebuilt argv should leave `.dal` out of these walks
(`ls --ignore=.dal`, which -a does not override, `du --exclude=.dal`, find's `-path ./.dal -prune`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dal.effects import EffectContext, Policy, run_effect


@pytest.mark.xfail(strict=True, reason="open: walks of the workspace list the run store's names without a wall "
                   "(NEWS 'ATTACK: store listing')")
@pytest.mark.parametrize("command", ["ls -laR .", "du -a .", "find . -printf '%p %s\\n'"])
def test_a_walk_of_the_workspace_does_not_list_the_store(tmp_path: Path, command: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    (ws / ".dal" / "receipts").mkdir(parents=True)
    (ws / ".dal" / "dal.db").write_bytes(b"SQLite format 3\0")
    (ws / ".dal" / "receipts" / "run_20261202T000000Z_abcdef.json").write_text("{}")
    (ws / "notes.txt").write_text("mine\n")
    monkeypatch.setenv("DAL_WALL", "none")
    r = run_effect(command, EffectContext(policy=Policy.load(ws, _skip_file=True), unsandboxed_as_root=True))
    assert r.status == "completed" and "notes.txt" in r.stdout, r
    assert "dal.db" not in r.stdout and "run_2026" not in r.stdout, r.stdout
