"""`dal run` output and placement flags, as an operator uses them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = "let i = 0\nwhile i < 2 { i = i + 1 }\nfor x in [1] { }\nprint(\"done\")\n"


def dal(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, NO_COLOR="1", **(env or {}))
    full.pop("DAL_STORE", None) if env is None or "DAL_STORE" not in env else None
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=tmp, capture_output=True, text=True,
                          env=full, timeout=60)


def test_default_prints_one_calm_line(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text(SCRIPT)
    p = dal(tmp_path, "run", "s.dal")
    assert p.returncode == 0 and p.stdout == "done\n"
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dal: completed") and ".dal/receipts/run_" in lines[0]


def test_verbose_prints_each_loop_receipt_and_quiet_prints_nothing(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text(SCRIPT)
    v = dal(tmp_path, "run", "s.dal", "-v")
    loops = [line for line in v.stderr.splitlines() if line.startswith("dal: loop receipt:")]
    assert len(loops) == 2
    assert "while i < 2" in loops[0] and "i < 2" in loops[0]
    q = dal(tmp_path, "run", "s.dal", "-q")
    assert q.returncode == 0 and q.stdout == "done\n" and q.stderr == ""


def test_store_and_receipts_can_be_moved(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text(SCRIPT)
    (tmp_path / "elsewhere").mkdir()  # DAL creates no folder for a store it is given (docs/cli.md)
    p = dal(tmp_path, "run", "s.dal", "--store", "elsewhere/runs.db", "--receipts", "out", "-q")
    assert p.returncode == 0
    assert (tmp_path / "elsewhere" / "runs.db").exists()
    assert len(list((tmp_path / "out").glob("run_*.md"))) == 1
    assert not (tmp_path / ".dal" / "dal.db").exists()
    env_store = tmp_path / "env.db"
    p = dal(tmp_path, "run", "s.dal", "-q", env={"DAL_STORE": str(env_store)})
    assert p.returncode == 0 and env_store.exists()
    listing = dal(tmp_path, "receipts", env={"DAL_STORE": str(env_store)})
    assert listing.stdout.count("run_") == 1


def test_a_corrupt_store_is_a_clear_error_and_nothing_runs(tmp_path: Path) -> None:
    """Without a store there is no journal, so no effect may run: DAL refuses before starting."""
    (tmp_path / "s.dal").write_text(SCRIPT)
    (tmp_path / ".dal").mkdir()
    (tmp_path / ".dal" / "dal.db").write_text("not a database")
    p = dal(tmp_path, "run", "s.dal")
    assert p.returncode == 2
    assert "dal.db" in p.stderr and "Traceback" not in p.stderr
    assert p.stdout == ""
    assert (tmp_path / ".dal" / "dal.db").read_text() == "not a database"  # nothing destroyed
