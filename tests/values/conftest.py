"""Fixtures for the value tests: run DAL source in-process and get its output; run `dal test`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest


@pytest.fixture
def dal_engine() -> Callable[..., str]:
    """`dal_engine(source)`: run `source` in-process, return what it printed; a failed run fails the test."""
    from dal.core.diagnostics import render
    from dal.eval.host import NullHost
    from dal.eval.interpreter import Engine, check_source
    from dal.eval.runtime import Runtime

    def go(source: str, **budgets: int) -> str:
        checked, errors = check_source(source, "t.dal")
        assert not errors, [render(e) for e in errors]
        out: list[str] = []
        outcome = Engine(Runtime(host=NullHost(out.append), **budgets)).execute(checked)  # type: ignore[arg-type]
        assert outcome.status == "completed", render(outcome.error) if outcome.error else outcome
        return "".join(out)

    return go


@attrs.define
class Tested:
    code: int
    out: str
    err: str

    @property
    def summary(self) -> str:
        return self.out.rstrip("\n").splitlines()[-1]


@pytest.fixture
def dal_test(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """`dal_test({"tests/x.test.dal": source, ...})`: write the files, run `dal test` in-process there."""
    from dal.cli.main import main

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)

    def go(files: dict[str, str], *args: str) -> Tested:
        for name, text in files.items():
            p = tmp_path / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        capsys.readouterr()
        try:
            code = main(["test", *args])
        except SystemExit as e:
            code = int(e.code or 0)
        got = capsys.readouterr()
        return Tested(code, got.out, got.err)

    return go
