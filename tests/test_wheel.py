"""The wheel ships everything DAL loads at run time (the grammar from the top-level grammar/ folder,
the receipt schema), and a script runs from a fresh virtual environment that has only the wheel and
its dependencies installed."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("dal_lang-*.whl")
    return whl


def test_wheel_contains_grammar_and_schema(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "dal/grammar/dal.lark" in names
    assert "dal/receipts/schema/receipt-v1.json" in names
    shipped = zipfile.ZipFile(wheel).read("dal/grammar/dal.lark").decode()
    assert shipped == (REPO / "grammar" / "dal.lark").read_text()


def test_script_runs_from_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.dal").write_text('let n = 0\nwhile n < 3 { n = n + 1 }\nprint("n is", n, run("echo ok"))\n')
    proc = subprocess.run([str(env_dir / "bin" / "dal"), "run", "hello.dal"], cwd=work, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "n is 3 ok\n"
    assert list((work / ".dal" / "receipts").glob("*.md"))
