"""The store contract run against every store DAL has: SQLite, and PostgreSQL (a database of its own per test,
on the tests' server: tests/pg/server.py, which skips or, in CI, fails without one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.pg.server import pg_server  # noqa: F401 - the fixture the postgresql factory asks for
from tests.receipts.store_contract import *  # noqa: F403 - the contract's tests run here


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "store" / "dal.db")


def _postgresql(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return request.getfixturevalue("pg_server").new_database()


FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {"sqlite": _sqlite, "postgresql": _postgresql}


@pytest.fixture(params=sorted(FACTORIES))
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A location for a new, empty store of each kind."""
    return FACTORIES[request.param](request, tmp_path)
