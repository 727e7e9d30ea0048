"""An unwritable receipts folder: refused before anything runs when it is so at start; reported as what it is
(the run ended as the store says; only its files are missing, and where to read the receipt instead) when it
becomes so while the effects run."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0


def env() -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k != "DAL_STORE"}
    return {**base, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}


def dal(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env())


@contextlib.contextmanager
def folder(where: Path) -> Iterator[tuple[Path, object]]:
    """A receipts folder and a function that makes it unwritable (a read-only remount for root, whom file
    modes do not stop; chmod otherwise)."""
    where.mkdir()
    if ROOT:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], check=True)

        def lock() -> None:
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
    else:
        def lock() -> None:
            os.chmod(where, 0o555)
    try:
        yield where, lock
    finally:
        if ROOT:
            subprocess.run(["umount", "-l", str(where)], check=False)
        else:
            os.chmod(where, 0o755)


def test_an_unwritable_folder_refuses_the_run_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('run("touch marker")\n')
    with folder(tmp_path / "out") as (out, lock):
        lock()  # type: ignore[operator]
        p = dal(tmp_path, "run", "--allow-run", "touch", "--receipts", str(out), "s.dal")
        assert p.returncode == 2, p.stderr
        assert f"cannot write receipt files in {out}" in p.stderr and "Nothing ran" in p.stderr
        assert "--receipts DIR" in p.stderr and "Traceback" not in p.stderr
        host = dal(tmp_path, "run", "--json", "--allow-run", "touch", "--receipts", str(out), "s.dal")
        assert host.returncode == 2 and json.loads(host.stdout)["error"]["exit_code"] == 2
    assert not (tmp_path / "marker").exists()
    assert not (tmp_path / ".dal" / "dal.db").exists()  # nothing recorded either: the store was not opened


def test_a_file_where_the_folder_should_be(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('run("touch marker")\n')
    (tmp_path / "out").write_text("not a folder")
    p = dal(tmp_path, "run", "--allow-run", "touch", "--receipts", "out", "s.dal")
    assert p.returncode == 2 and "out exists and is not a folder" in p.stderr, p.stderr
    assert not (tmp_path / "marker").exists() and (tmp_path / "out").read_text() == "not a folder"


@pytest.mark.parametrize(("tail", "status", "code"), [('finish("done")', "completed", 0), ('fail("no")', "failed", 1)])
def test_a_folder_lost_while_the_effects_run(tmp_path: Path, tail: str, status: str, code: int) -> None:
    (tmp_path / "s.dal").write_text(f'run("touch marker")\nrun("sleep 1")\n{tail}\n')
    with folder(tmp_path / "out") as (out, lock):
        proc = subprocess.Popen([sys.executable, "-m", "dal", "run", "--allow-run", "touch,sleep", "--receipts",
                                 str(out), "s.dal"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env())
        deadline = time.monotonic() + 60
        while not (tmp_path / "marker").exists():  # the first effect ran: now the folder goes
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        lock()  # type: ignore[operator]
        _, err = proc.communicate(timeout=120)
        assert list(out.iterdir()) == []
    assert proc.returncode == code, err  # the run's own exit code: it ended as its receipt says
    assert "Traceback" not in err and "no run could start" not in err
    line = next(ln for ln in err.splitlines() if ln.startswith("dal: error: the receipt files"))
    rid = line.split("the receipt files of run ")[1].split()[0]
    assert f"could not be written in {out}" in line and f"The run ended {status}" in line
    assert f"`dal receipt show {rid}`" in line
    shown = dal(tmp_path, "receipt", "show", rid, "--json")  # the next move the message names works
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == status
    assert json.loads(shown.stdout)["effects"]["count"] == 2
