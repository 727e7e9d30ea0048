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


def test_the_readme_taste_is_keyed_and_a_second_run_is_skipped(tmp_path: Path) -> None:
    # Point 8: the docs show the keyed form that actually passes the key (operation(...)): the README's
    # taste runs as written with the installed dal, and its second run is skipped, not repeated.
    from dalshell import Shell

    taste = re.search(r"```dal\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert taste and "operation(" in taste.group(1)
    dal = Shell(tmp_path)
    dal.write("taste.dal", taste.group(1))
    check = dal("check", "taste.dal")
    assert check.returncode == 0 and "warning" not in check.stderr
    first, second = dal("run", "taste.dal"), dal("run", "taste.dal")
    assert first.returncode == 0 and (tmp_path / "report.md").exists()
    assert second.returncode == 0 and "dal: skipped (operation 'ensure-report' already completed" in second.stderr
    # the README's first command's script passes its key: no warning (issue 30)
    article = dal("check", str(REPO / "examples" / "article_loop.dal"))
    assert article.returncode == 0 and "warning" not in article.stderr
