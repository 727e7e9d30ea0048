"""The stage check (`python -m dal.tools.layers`): DAL's own packages pass it, and it fails on an upward
import, a lazy one included, on a cycle between stages, on a private name taken from another stage and
on a module outside every stage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dal.tools.layers import check

REPO = Path(__file__).resolve().parents[2]


def test_dal_passes_the_stage_check() -> None:
    p = subprocess.run([sys.executable, "-m", "dal.tools.layers"], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("stages ok: core, syntax, resolve, eval, effects, receipts, runner")


def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "dal"
    for rel, text in {"__init__.py": "", **files}.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if path.parent != pkg and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
    return pkg


def test_an_upward_import_is_reported_even_inside_a_function(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "core/errors.py": "def f():\n    from dal.runner import run\n",
        "runner/run.py": "from dal.core import errors\n",
    })
    problems = check(pkg)
    assert any("dal/core/errors.py:2: dal.core.errors (core) lazily imports dal.runner.run (runner)" in p
               for p in problems), problems
    assert any(p.startswith("cycle between stages: core -> runner -> core") for p in problems), problems


def test_front_ends_do_not_import_each_other(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "repl/app.py": "import dal.cli.main\n",
        "cli/main.py": "from dal.repl import app\n",  # the command line may dispatch to the REPL
        "api.py": "from dal.testing import harness\n",
        "testing/harness.py": "",
    })
    problems = check(pkg)
    assert any("dal.repl.app (repl) imports dal.cli.main (cli)" in p for p in problems), problems
    assert any("dal.api (api) imports dal.testing.harness (testing)" in p for p in problems), problems
    assert not any("dal.cli.main (cli) imports" in p for p in problems), problems


def test_private_names_and_strays_are_reported(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "runner/runner.py": "def _artifact():\n    pass\n",
        "repl/wiring.py": "from dal.runner.runner import _artifact\n",
        "stray.py": "",
    })
    problems = check(pkg)
    assert any("dal.repl.wiring imports _artifact, a private name of dal.runner.runner" in p for p in problems)
    assert any("dal.stray is in no stage" in p for p in problems), problems


def test_a_store_backend_importing_another_backend_is_reported(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "receipts/store.py": "class StoreError(Exception):\n    pass\n",
        "receipts/errors.py": "class LockLost(Exception):\n    pass\n",
        "receipts/pg/store.py": "from dal.receipts.store import StoreError\nfrom dal.receipts.errors import LockLost\n",
        "receipts/pg/lock.py": "def f():\n    from dal.receipts.jobs import Fence\n",
        "receipts/jobs.py": "from dal.receipts.store import StoreError\n",
    })
    problems = check(pkg)
    assert any("dal/receipts/pg/store.py:1: dal.receipts.pg.store (the postgresql store) imports "
               "dal.receipts.store (the sqlite store)" in p for p in problems), problems
    assert any("dal.receipts.pg.lock (the postgresql store) imports dal.receipts.jobs" in p for p in problems)
    assert not any("imports dal.receipts.errors" in p or p.startswith("dal/receipts/jobs.py") for p in problems)


def test_a_clean_package_passes(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "core/errors.py": "",
        "syntax/parser.py": "from dal.core.errors import X\n",
        "runner/run.py": "import dal.syntax.parser\nfrom dal.core import errors\n",
        "cli/main.py": "from dal import __version__\nfrom dal.runner import run\n",
    })
    assert check(pkg) == []
