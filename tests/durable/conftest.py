"""Fixtures for the durability tests: a workspace whose policy classes `tee` as an external program (a
stand-in for a mail or HTTP send: no network), the `dal` command as a subprocess (for kill -9), the CLI
in-process (fast), and a check that a store is sound and every receipt in it matches the schema."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Files, Result, cli_in, dal_env, make_workspace

POLICY = """\
# `tee` stands in for a program that leaves the machine (sendmail, curl -X POST): each line it appends
# to outbox.txt is one message sent.
[programs.tee]
class = "external"
"""


class Durable(Files):
    """One workspace with a store, and ways to run `dal` against it."""

    def __init__(self, ws: Path, pycache: Path) -> None:
        self.ws = ws
        self.pycache = pycache

    @property
    def db(self) -> Path:
        return self.ws / ".dal" / "dal.db"

    def env(self, **extra: str) -> dict[str, str]:
        return dal_env(extra, validate=False, pycache=self.pycache, keep_bytecode_flag=False)

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "dal", *args]

    def spawn(self, *args: str, **env: str) -> subprocess.Popen[str]:
        """`dal ARGS` in the workspace as a child process (for kills and concurrency)."""
        return subprocess.Popen(self.argv(*args), cwd=self.ws, env=self.env(**env), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def run(self, *args: str, timeout: float = 60, **env: str) -> Result:
        """`dal ARGS` in the workspace as a subprocess."""
        p = subprocess.run(self.argv(*args), cwd=self.ws, env=self.env(**env), text=True,
                           capture_output=True, timeout=timeout)
        return Result(p.returncode, p.stdout, p.stderr)

    def cli(self, *args: str) -> Result:
        """`dal ARGS` in this process (fast): the same main() the command runs."""
        return cli_in(self.ws, *args)

    def receipts(self) -> list[dict[str, Any]]:
        """Every stored receipt, oldest first."""
        from dal.receipts.store import Store

        with Store(self.db, readonly=True) as store:
            rows = store.list_runs(limit=None)
            return [r for r in (store.get_run(row["run_id"]) for row in reversed(rows)) if r is not None]

    def latest(self) -> dict[str, Any]:
        return self.receipts()[-1]

    def check_store(self) -> list[dict[str, Any]]:
        """The store passes `pragma integrity_check`, every run has a receipt that matches dal.receipt/v1,
        and so does every receipt file. Returns the receipts, oldest first."""
        import json

        from dal.receipts.schema import validate
        from dal.receipts.store import Store

        with Store(self.db, readonly=True) as store:
            assert store.integrity_check() == []
            running = [r["run_id"] for r in store.list_runs(limit=None) if r["status"] == "running"]
        got = self.receipts()
        for r in got:
            validate(r)
        for f in (self.ws / ".dal" / "receipts").glob("*.json"):
            validate(json.loads(f.read_text(encoding="utf-8")))
        assert not running or all(r["run_id"] not in running for r in got)
        return got


@pytest.fixture
def durable(tmp_path: Path, pycache: Path, monkeypatch: pytest.MonkeyPatch) -> Durable:
    """A fresh workspace with the policy above and an input file."""
    monkeypatch.delenv("DAL_STORE", raising=False)
    monkeypatch.delenv("DAL_TEST_CRASH_AT", raising=False)
    return Durable(make_workspace(tmp_path / "ws", POLICY), pycache)


@pytest.fixture
def make_durable(tmp_path: Path, pycache: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Several workspaces in one test (to run crash children in parallel)."""
    monkeypatch.delenv("DAL_STORE", raising=False)
    monkeypatch.delenv("DAL_TEST_CRASH_AT", raising=False)

    def make(name: str) -> Durable:
        return Durable(make_workspace(tmp_path / name, POLICY), pycache)

    return make
