"""A `-` that a program takes for a file. GNU tee, `sort -o -`, `mkdir -` and wget's
`--save-cookies -` write a file named `-` (POSIX tee "shall not treat it as standard output"), but the models
dropped every `-` as standard input or output. With `-` a symlink to a file outside the roots (a repository can
track one), `tee - < payload` overwrote that file without the wall. Executed next to a canary, wall on and off."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from effects_workspace import CANARY, serve_folder

from dal.effects import EffectContext, Policy, run_effect, sandbox_status

HAVE_BWRAP = sandbox_status()[0]
WALLS = [pytest.param(True, id="wall", marks=pytest.mark.skipif(not HAVE_BWRAP, reason="no bubblewrap")),
         pytest.param(False, id="nowall")]


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "out").mkdir(parents=True)
    (ws / "payload.txt").write_text("the script's text\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "canary.txt").write_text(CANARY)
    (ws / "-").symlink_to(tmp_path / "outside" / "canary.txt")
    return ws


def _ctx(policy: Policy, wall: bool) -> EffectContext:
    return EffectContext(policy=policy, use_sandbox=wall, unsandboxed_as_root=not wall)


@pytest.mark.parametrize("wall", WALLS)
def test_a_dash_written_as_a_file_is_checked_where_it_leads(ws: Path, wall: bool) -> None:
    ctx = _ctx(Policy.load(ws), wall)
    for cmd in ("tee - < payload.txt", "sort -o - payload.txt", "sort --output=- payload.txt",
                "tee out/x - < payload.txt"):
        r = run_effect(cmd, ctx)
        assert r.status == "denied" and "outside the allowed roots: -" in r.decision.reason, (cmd, r)
    assert (ws.parent / "outside" / "canary.txt").read_text() == CANARY
    # A `-` the program reads is standard input, whatever a file of that name is.
    r = run_effect("cat - < payload.txt && sort - < payload.txt", ctx)
    assert r.ok and r.stdout == "the script's text\n" * 2, r


def test_a_dash_file_is_a_write_outside_narrower_write_roots(ws: Path) -> None:
    os.unlink(ws / "-")
    ctx = _ctx(Policy.load(ws, allow_write=["out"]), HAVE_BWRAP)
    r = run_effect("tee - < payload.txt", ctx)
    assert r.status == "denied" and "writes outside the allowed roots: -" in r.decision.reason, r
    assert not os.path.lexists(ws / "-")
    r = run_effect("tee out/copy < payload.txt", ctx)
    assert r.ok and (ws / "out" / "copy").read_text() == "the script's text\n", r


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "a.txt").write_text("served\n")
    with serve_folder(site) as url:
        yield url


@pytest.mark.skipif(shutil.which("wget") is None, reason="wget not installed")
@pytest.mark.parametrize("wall", WALLS)
def test_wget_cookie_jar_named_dash_is_a_file(ws: Path, server: str, wall: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """wget has no option model (issue 27): inside the wall the symlink `-` leads nowhere it can write, and
    where no wall can start wget does not run."""
    if not wall:
        monkeypatch.setenv("DAL_WALL", "none")
    ctx = EffectContext(policy=Policy.load(ws, allow_run=["wget"], allow_net=True), unsandboxed_as_root=True)
    for cmd in (f"wget -q --keep-session-cookies --save-cookies - -O /dev/null {server}/a.txt",
                f"wget -q --rejected-log=- -O /dev/null {server}/a.txt"):
        r = run_effect(cmd, ctx)
        assert (r.status == "denied") != wall, (cmd, r)
    assert (ws.parent / "outside" / "canary.txt").read_text() == CANARY
    # -O - and -o - are standard output.
    r = run_effect(f"wget -q -o - -O - {server}/a.txt", ctx)
    assert not wall or (r.ok and r.stdout == "served\n"), r
