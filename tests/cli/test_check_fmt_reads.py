"""`dal check` and `dal fmt` read a script below the current folder or its workspace once, by descriptor: a
name a script's program swapped for a symlink to a file outside never has that file's lines printed (check)
or copied into the workspace (fmt --write). In process, next to a canary that is itself a valid script."""

from __future__ import annotations

from pathlib import Path

import pytest

from dal.cli.main import main
from tests.swaprace import CANARY, race, swapping

SECRET = f"print({CANARY})\n"  # parses, and does not resolve: check quotes it, fmt formats it


def _dal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    try:
        main(list(argv))
    except SystemExit:
        pass
    got = capsys.readouterr()
    return got.out + got.err


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "dal.toml").write_text("")
    monkeypatch.chdir(w)
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.dal").write_text(SECRET)
    return w


def test_check_of_a_script_swapped_for_a_symlink_out_never_prints_the_outside_file(
        ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with swapping(ws / "s.dal", "let x = 1\nprint(x)\nprint(y)\n", ws.parent / "outside" / "secret.dal"):
        outcomes = race(lambda: _dal(capsys, "check", "--json", "s.dal"), 200, until=lambda out: any(
            "print(y)" in str(o) for o in out) and any("leads outside" in str(o) for o in out))
    assert not [o for o in outcomes if CANARY in str(o)]
    assert [o for o in outcomes if "print(y)" in str(o)] and [o for o in outcomes if "leads outside" in str(o)]


def test_fmt_write_of_a_symlink_out_copies_nothing_into_the_workspace(
        ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (ws / "s.dal").symlink_to(ws.parent / "outside" / "secret.dal")
    out = _dal(capsys, "fmt", "--write", "s.dal")
    assert "leads outside" in out and CANARY not in out
    assert (ws / "s.dal").is_symlink()
    assert not [p for p in ws.rglob("*") if p.is_file() and not p.is_symlink() and CANARY in p.read_text()]
    (ws / "sub").mkdir()
    (ws / "sub" / "link.dal").symlink_to(ws.parent / "outside" / "secret.dal")
    assert CANARY not in _dal(capsys, "check", "sub")  # a folder's scripts, found by name, read the same way


def test_check_from_a_subfolder_of_a_script_above_it_never_prints_the_outside_file_nor_hangs(
        ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    (ws / "sub").mkdir()
    monkeypatch.chdir(ws / "sub")
    (ws / "up.dal").symlink_to(ws.parent / "outside" / "secret.dal")
    out = _dal(capsys, "check", "../up.dal")
    assert "leads outside" in out and CANARY not in out
    assert CANARY not in _dal(capsys, "fmt", "../up.dal")
    os.mkfifo(ws / "fifo.dal")  # no writer ever opens it: open() as named would block for good
    assert "not a regular file" in _dal(capsys, "check", "../fifo.dal")
