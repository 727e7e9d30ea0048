"""Shared fixtures: the `--update-goldens` flag, an in-process DAL runner and the `dal` command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

REPO = Path(__file__).resolve().parents[1]

# Every receipt written anywhere in the suite, in-process or by a `dal` subprocess, is checked against
# the shipped schema (production runs skip the check: see dal/receipts/schema.py).
os.environ["DAL_VALIDATE_RECEIPTS"] = "1"


@pytest.fixture(scope="session", autouse=True)
def _workspace_ceiling(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Workspace discovery (dal/runner/workspace.py) walks up from a test's folder; it stops at pytest's base
    temporary folder, so that a marker left above it (another suite's `.dal/`) cannot change a test."""
    os.environ["DAL_CEILING_DIRECTORIES"] = str(tmp_path_factory.getbasetemp())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite golden files from the current output instead of comparing against them",
    )


@pytest.fixture(scope="session")
def pycache() -> Path:
    """Bytecode of the `dal` children, kept between sessions outside the repository (starts ~0.4 s faster)."""
    from tests.harness import pycache_dir

    return pycache_dir()


@pytest.fixture(scope="session")
def update_goldens(request: pytest.FixtureRequest) -> bool:
    """True when pytest ran with --update-goldens."""
    return bool(request.config.getoption("--update-goldens"))


@attrs.define
class Ran:
    """How one in-process run ended: stdout, the error (rendered without colour) and the step count."""

    status: str  # completed | failed | exhausted | interrupted | waiting | rejected
    stdout: str
    error: Any = None  # the DalError, if the run ended with one (the first one when rejected)
    rendered: str = ""
    errors: list[Any] = attrs.field(factory=list)  # every error (several when the script is rejected)
    steps: int = 0
    result: Any = None


class Dal:
    """Run DAL source in-process (fast) or the `dal` command in a subprocess."""

    def run(self, source: str, filename: str = "test.dal", *, max_steps: int = 1_000_000) -> Ran:
        from dal.core.diagnostics import render
        from dal.eval.host import NullHost
        from dal.eval.interpreter import Engine, check_source
        from dal.eval.runtime import Runtime

        checked, errors = check_source(source, filename)
        if errors:
            return Ran("rejected", "", errors[0], "\n\n".join(render(e) for e in errors), errors=errors)
        assert checked is not None
        out: list[str] = []
        rt = Runtime(max_steps=max_steps, host=NullHost(out.append))
        outcome = Engine(rt).execute(checked)
        err = outcome.error
        return Ran(outcome.status, "".join(out), err, render(err) if err is not None else "",
                   [err] if err is not None else [], rt.steps, outcome.result)

    def cli(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
        full_env.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "dal", *args],
            cwd=cwd, env=full_env, input=input, capture_output=True, timeout=timeout, text=True, encoding="utf-8",
        )


@pytest.fixture(scope="session")
def dal() -> Dal:
    return Dal()
