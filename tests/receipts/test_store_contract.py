"""The store contract run against every store DAL has: SQLite today (PostgreSQL adds a factory here)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.receipts.store_contract import *  # noqa: F403 - the contract's tests run here


def _sqlite(tmp_path: Path) -> str:
    return str(tmp_path / "store" / "dal.db")


FACTORIES: dict[str, Callable[[Path], str]] = {"sqlite": _sqlite}


@pytest.fixture(params=sorted(FACTORIES))
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A location for a new, empty store of each kind."""
    return FACTORIES[request.param](tmp_path)
