"""`dal receipt show` of a run with no receipt yet: a live one says it is running; one whose process
died (kill -9) shows what its journal says ran, and the next move."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def show(tmp: Path, ref: str = "latest") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dal", "receipt", "show", ref], cwd=tmp, capture_output=True,
                          text=True, timeout=60)


def test_running_then_killed(tmp_path: Path) -> None:
    (tmp_path / "k.dal").write_text('run("touch a")\nrun("sleep 30")\nrun("touch b")\n')
    proc = subprocess.Popen([sys.executable, "-m", "dal", "run", "k.dal"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            live = show(tmp_path)
            if live.stdout.startswith("running"):
                break
            assert time.monotonic() < deadline, live.stdout + live.stderr
            time.sleep(0.2)
        assert f"process {proc.pid}" in live.stdout and "no receipt until it ends" in live.stdout
        deadline = time.monotonic() + 30
        while "2 effects journaled" not in show(tmp_path).stdout:  # wait until it sleeps in effect 2
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    dead = show(tmp_path)
    assert dead.returncode == 0, dead.stderr
    assert dead.stdout.startswith("died  run_")  # one word for the state: the list says it too
    assert "1. touch a — command completed" in dead.stdout
    assert "2. sleep 30 — outcome unknown" in dead.stdout
    assert "died before writing its receipt" in dead.stdout
    assert "next: `dal resume run_" in dead.stdout  # a read of unknown outcome simply runs again
    assert not (tmp_path / "b").exists()
    listing = subprocess.run([sys.executable, "-m", "dal", "receipts"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60)
    assert " died " in listing.stdout  # the list does not call a killed run `running`

    def receipts(*args: str) -> list[dict]:
        p = subprocess.run([sys.executable, "-m", "dal", "receipts", "--json", *args], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)["runs"]

    assert [r["status"] for r in receipts()] == ["died"]
    assert [r["status"] for r in receipts("--status", "died")] == ["died"]
    assert receipts("--status", "running") == []
    as_json = subprocess.run([sys.executable, "-m", "dal", "receipt", "show", "latest", "--json"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert json.loads(as_json.stdout)["status"] == "died"
