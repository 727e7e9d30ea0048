"""tests/mcp: each test drives a real `dal mcp` subprocess with the SDK's stdio client (mcp_agent.py). The SDK
is in the test extra (`pip install '.[test]'`): without it these tests fail rather than skip."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "dal.toml").write_text('[run]\nallow = ["touch", "echo"]\n\n[programs.touch]\napproval = true\n')
    return w.resolve()
