"""No wall, no program (dal/effects/wall/kind.py): without a wall only the default toolset runs; git, an
interpreter or anything allowed by name is denied saying what to install, and runs once a wall is there.
The wall's availability is injected (kind.PROBES); nothing is uninstalled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dal.cli.main import main
from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.wall import kind

MISSING = "bubblewrap (bwrap) is not installed"


@pytest.fixture
def no_wall(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(kind.PROBES, "bubblewrap", lambda: (False, MISSING))
    monkeypatch.setitem(kind.PROBES, "landlock", lambda: (False, ""))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = (tmp_path / "ws").resolve()
    w.mkdir()
    (w / "notes.txt").write_text("alpha\n")
    return w


def test_the_kind_in_force_is_the_first_wall_that_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(kind.PROBES, "bubblewrap", lambda: (True, "bubblewrap at /usr/bin/bwrap"))
    assert kind.select(euid=1000) == kind.WallKind("bubblewrap", "bubblewrap at /usr/bin/bwrap")
    monkeypatch.setitem(kind.PROBES, "bubblewrap", lambda: (False, MISSING))
    monkeypatch.setitem(kind.PROBES, "landlock", lambda: (True, "Landlock ABI 7"))
    assert kind.select(euid=1000).name == "landlock"
    monkeypatch.setitem(kind.PROBES, "landlock", lambda: (False, "no Landlock"))
    user = kind.select(euid=1000)
    assert user.name == "none" and user.unwalled and user.refused is None
    assert user.walled_only(["ls", "wc"]) is None
    assert "git, python3 run only inside a wall" in (user.walled_only(["ls", "git", "python3", "git"]) or "")
    root = kind.select(euid=0)
    assert root.refused is not None and kind.UNSANDBOXED_FLAG in root.refused
    assert kind.select(euid=0, unsandboxed_as_root=True).walled_only(["curl"]) is not None
    required = kind.select(euid=1000, require_sandbox=True)
    assert required.refused == f"sandbox required but unavailable: {MISSING}; no Landlock"
    off = kind.select(use_sandbox=False)  # the caller's own hook (tests, embedding): not a missing wall
    assert off.caller_off and off.walled_only(["git"]) is None


@pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")
def test_a_command_denied_for_lack_of_a_wall_runs_once_a_wall_is_there(ws: Path, no_wall: None,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = EffectContext(policy=Policy.load(ws, None, allow_run=["git"], _skip_file=True), unsandboxed_as_root=True,
                        timeout=20)
    denied = run_effect("git init -q repo", ctx)
    assert denied.status == "denied" and not (ws / "repo").exists()
    assert "git runs only inside a wall" in denied.decision.reason and "apt-get install bubblewrap" in \
        denied.decision.reason and MISSING in denied.decision.reason
    unwalled = run_effect("cat notes.txt", ctx)  # the default toolset runs without a wall
    assert unwalled.ok and unwalled.stdout == "alpha\n"
    monkeypatch.setitem(kind.PROBES, "bubblewrap", kind.bubblewrap_status)  # bubblewrap is there again
    ran = run_effect("git init -q repo", ctx)
    assert ran.ok, ran.stderr
    assert (ws / "repo" / ".git" / "HEAD").is_file()


def test_policy_check_names_the_wall_and_denies_as_the_run_would(ws: Path, no_wall: None,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ws)
    assert main(["policy", "check", "--unsandboxed-as-root", "--allow-run=git", "ls && git status"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("deny: git runs only inside a wall") and "  wall:       none (" in out
    assert main(["policy", "check", "--unsandboxed-as-root", "--json", "cat notes.txt"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["decision"] == "allow" and got["wall"]["kind"] == "none" and got["wall"]["refused"] is None
    monkeypatch.setattr(kind.os, "geteuid", lambda: 0)  # root, without the flag: the run refuses everything
    assert main(["policy", "check", "cat notes.txt"]) == 1
    assert capsys.readouterr().out.startswith("deny: running as root without a working sandbox")
    assert main(["policy", "check", "--require-sandbox", "cat notes.txt"]) == 1
    assert capsys.readouterr().out.startswith("deny: sandbox required but unavailable")


def test_each_effect_of_the_receipt_names_the_wall_that_held_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import dal

    script = 'run("echo hi")\nrun("cat ../elsewhere.txt")\n'
    walled = dal.run(script, workspace=tmp_path).to_dict()["effects"]["items"]
    have = "bubblewrap" if sandbox_status()[0] else "landlock" if kind.landlock_status()[0] else "none"
    assert walled[0]["status"] == "completed" and walled[0]["wall"] == have
    assert walled[1]["status"] == "denied" and walled[1]["wall"] is None  # it never ran: no wall held it
    monkeypatch.setitem(kind.PROBES, "bubblewrap", lambda: (False, MISSING))
    monkeypatch.setitem(kind.PROBES, "landlock", lambda: (False, ""))
    bare = dal.run(script, workspace=tmp_path, unsandboxed_as_root=True).to_dict()["effects"]["items"]
    assert bare[0]["status"] == "completed" and bare[0]["wall"] == "none"
