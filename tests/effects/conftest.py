"""Fixtures: a fresh workspace per test, or one shared read-only per module."""

from __future__ import annotations

from pathlib import Path

import pytest
from effects_workspace import build_workspace


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    ws, _ = build_workspace(tmp_path)
    return ws


@pytest.fixture(scope="module")
def shared_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Read-only use: the static checks never change it."""
    ws, _ = build_workspace(tmp_path_factory.mktemp("effects"))
    return ws
