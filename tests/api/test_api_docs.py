"""Every ```python block in docs/api.md runs as written, in a scratch workspace with the examples."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "api.md").read_text(), re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_api_doc_block_runs(code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code, "docs/api.md", "exec"), {})
    finally:
        os.chdir(old)


def test_docs_have_blocks() -> None:
    assert len(BLOCKS) >= 2
