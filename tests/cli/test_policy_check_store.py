"""`dal policy check` (and `dal mcp`'s check_command) answers as `dal run` would when the runs keep their store
and receipts elsewhere (with `--store st/dal.db --receipts rec`, `dal run` denied `cat st/dal.db`,
`tee rec/x.md`, `rm st/dal.db`, and `dal policy check` said allow to each). Each answer is compared with what
the run did, executed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dal.effects.policy import Policy
from dal.mcp.ceiling import Ceiling
from dal.mcp.tools import DalTools

COMMANDS = ["cat st/dal.db", "tee rec/x.md", "rm st/dal.db", "cat rec/README", "cp -r st copy", "cat notes.txt",
            "tee out.txt"]


def _dal(ws: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=ws, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, input="")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = (tmp_path / "ws").resolve()
    (w / "rec").mkdir(parents=True)
    (w / "st").mkdir()
    (w / "rec" / "README").write_text("receipts\n")
    (w / "notes.txt").write_text("notes\n")
    # the store exists, as it does after the operator's first run there
    r = _dal(w, "run", "--store", "st/dal.db", "--receipts", "rec", "-", "--quiet")
    assert (w / "st" / "dal.db").exists(), r
    return w


def _denied_by_run(ws: Path, command: str, *flags: str, env: dict[str, str] | None = None) -> bool:
    (ws / "s.dal").write_text(f'run("{command}")\n')
    r = _dal(ws, "run", *flags, "s.dal", env=env)
    assert "Traceback" not in r.stderr, r
    return "was denied" in r.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_policy_check_answers_as_the_run_with_store_and_receipts_elsewhere(ws: Path, command: str) -> None:
    flags = ("--store", "st/dal.db", "--receipts", "rec")
    check = _dal(ws, "policy", "check", *flags, command)
    assert check.returncode in (0, 1), check
    denied = _denied_by_run(ws, command, *flags)
    assert (check.returncode == 1) == denied, (check.stdout, denied)
    assert denied == (command not in ("cat notes.txt", "tee out.txt"))


@pytest.mark.parametrize("command", ["cat st/dal.db", "rm st/dal.db", "cat notes.txt"])
def test_policy_check_reads_dal_store_as_the_run_does(ws: Path, command: str) -> None:
    env = {"DAL_STORE": str(ws / "st" / "dal.db")}
    check = _dal(ws, "policy", "check", command, env=env)
    denied = _denied_by_run(ws, command, env=env)
    assert (check.returncode == 1) == denied == (command != "cat notes.txt"), (check.stdout, denied)


@pytest.mark.parametrize("command", ["cat st/dal.db", "rm st/dal.db", "cp -r st copy", "cat notes.txt"])
def test_mcp_check_command_answers_as_its_runs(ws: Path, command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ws)
    tools = DalTools(ws, Ceiling(Policy.load(ws)), store="st/dal.db")
    verdict = tools.call("check_command", {"command": command})
    denied = _denied_by_run(ws, command, "--store", "st/dal.db")
    assert (verdict["decision"] == "deny") == denied == (command != "cat notes.txt"), verdict


def test_policy_check_help_names_store_and_receipts() -> None:
    r = subprocess.run([sys.executable, "-m", "dal", "policy", "check", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert "--store PATH" in r.stdout and "--receipts DIR" in r.stdout
