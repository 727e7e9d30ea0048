"""Issue 30: on a file system mounted read-only, DAL does not tell a person to `chmod u+w` (which changes
nothing there): it says the mount is read-only and names another place. The mount is made read-only for
one `dal` process by bubblewrap (`--ro-bind`), the rest of the machine as it is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BWRAP = shutil.which("bwrap")
pytestmark = pytest.mark.skipif(BWRAP is None, reason="needs bubblewrap to mount a folder read-only")


def _dal_on_read_only(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DAL_STORE"}
    return subprocess.run([BWRAP or "bwrap", "--dev-bind", "/", "/", "--ro-bind", str(ws), str(ws),
                           sys.executable, "-m", "dal", "run", *args], cwd=ws, env=env, capture_output=True,
                          text=True, timeout=60)


def _probe_works(ws: Path) -> None:
    p = subprocess.run([BWRAP or "bwrap", "--dev-bind", "/", "/", "--ro-bind", str(ws), str(ws), "true"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"bubblewrap cannot make a read-only bind here: {p.stderr.strip()}")


def test_a_store_on_a_read_only_mount_names_another_store_not_chmod(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _probe_works(ws)
    (ws / "s.dal").write_text('print("x")\n')
    made = subprocess.run([sys.executable, "-m", "dal", "run", "-q", "s.dal"], cwd=ws, capture_output=True,
                          text=True, env={k: v for k, v in os.environ.items() if k != "DAL_STORE"})
    assert made.returncode == 0, made.stderr
    before = (ws / ".dal" / "dal.db").read_bytes()
    p = _dal_on_read_only(ws, "--receipts", str(tmp_path / "receipts"), "s.dal")
    assert p.returncode == 2 and p.stdout == ""
    assert "mounted read-only" in p.stderr and "--store PATH" in p.stderr and "chmod u+w" not in p.stderr
    assert (ws / ".dal" / "dal.db").read_bytes() == before


def test_receipts_and_a_new_store_on_a_read_only_mount_say_so_too(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _probe_works(ws)
    (ws / "s.dal").write_text('print("x")\n')
    receipts = _dal_on_read_only(ws, "s.dal")
    assert receipts.returncode == 2 and "cannot write receipt files" in receipts.stderr
    assert "mounted read-only" in receipts.stderr and "--receipts DIR" in receipts.stderr
    assert "make the folder writable" not in receipts.stderr
    store = _dal_on_read_only(ws, "--receipts", str(tmp_path / "receipts"), "s.dal")
    assert store.returncode == 2 and "mounted read-only" in store.stderr and "Make it writable" not in store.stderr
    assert not (ws / ".dal").exists()

