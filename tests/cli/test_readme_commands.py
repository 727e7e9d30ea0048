"""Issue 15, point 11: the README's commands work as written. `python bench/run.py ...` runs whatever
`python` is first on PATH, which on a fresh clone has no DAL: the bench runs under the clone's .venv."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _bare_python() -> str:
    """The interpreter the venv was made from: no DAL, no lark (unless someone installed them there)."""
    for name in ("python3", "python"):
        candidate = Path(sys.base_prefix) / "bin" / name
        if candidate.exists():
            return str(candidate)
    pytest.skip("no base interpreter")


def test_the_readme_names_the_bench_command_verbatim() -> None:
    readme = (REPO / "README.md").read_text()
    assert re.search(r"^python bench/run\.py --quick --no-peers ", readme, re.M)


def test_bench_run_under_a_python_without_dal_uses_the_clones_venv() -> None:
    bare = _bare_python()
    has = subprocess.run([bare, "-c", "import lark, dal"], capture_output=True, cwd="/")
    if has.returncode == 0:
        pytest.skip("the base interpreter has DAL installed")
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("this checkout has no .venv")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    p = subprocess.run([bare, "bench/run.py", "--help"], cwd=REPO, capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ModuleNotFoundError" not in p.stderr and "--no-peers" in p.stdout
