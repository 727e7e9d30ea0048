"""The `dal` fixture: the installed command in a fresh folder (dalshell.Shell)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dalshell import DAL, Shell


@pytest.fixture
def dal(tmp_path: Path) -> Shell:
    assert DAL.exists(), f"the installed dal is missing: {DAL}"
    return Shell(tmp_path)
