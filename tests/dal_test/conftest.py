"""Helpers for testing `dal test`: write a folder of test scripts and workflows, run `dal test` on it."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest


@attrs.define
class Outcome:
    code: int
    out: str
    err: str

    @property
    def summary(self) -> str:
        return self.out.rstrip("\n").splitlines()[-1]


@pytest.fixture
def dal_test(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """`dal_test({"name.test.dal": source, ...}, *args)`: write the files under tmp_path, run `dal test`
    there in-process, return its exit code and output."""
    from dal.cli.main import main

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)

    def go(files: dict[str, str], *args: str) -> Outcome:
        for name, text in files.items():
            p = tmp_path / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        capsys.readouterr()
        try:
            code = main(["test", *args])
        except SystemExit as e:
            code = int(e.code or 0)
        got = capsys.readouterr()
        return Outcome(code, got.out, got.err)

    return go


@pytest.fixture(autouse=True)
def _no_store_env(monkeypatch: pytest.MonkeyPatch) -> None:
    if "DAL_STORE" in os.environ:
        monkeypatch.delenv("DAL_STORE")
