"""SIGTERM (or Ctrl-C) while a command runs lets it finish for a grace period (DAL_STOP_GRACE, default
5 s), then stops it rather than waiting for its timeout: its process group is killed, the run ends as
interrupted with the effect's outcome unknown, and a resume handles it like any effect whose result was
never recorded."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def test_sigterm_stops_a_running_command(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('run("touch before")\nrun("sleep 3")\nrun("touch after")\nprint("done")\n')
    proc = subprocess.Popen([sys.executable, "-m", "dal", "run", "s.dal", "--key", "slow"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, DAL_STOP_GRACE="0.3"))
    deadline = time.monotonic() + 30
    while not (tmp_path / "before").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)  # now inside `sleep 3`
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert time.monotonic() - sent < 2.2  # the grace, not the command's remaining time
    assert "Traceback" not in err
    (path,) = (tmp_path / ".dal" / "receipts").glob("*.json")
    receipt = json.loads(path.read_text())
    assert receipt["status"] == "interrupted" and receipt["retry"] == "resume"
    items = {i["command"]: i for i in receipt["effects"]["items"]}
    assert items["sleep 3"]["status"] == "uncertain"
    assert "SIGTERM" in items["sleep 3"]["reason"]
    assert not (tmp_path / "after").exists()
    # resuming re-runs the read (safe), not the completed touch, and finishes
    again = subprocess.run([sys.executable, "-m", "dal", "run", "s.dal", "--key", "slow"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "done\n"
    assert (tmp_path / "after").exists()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGHUP, 129), (signal.SIGQUIT, 131)])
def test_a_closed_terminal_or_sigquit_stops_the_run_and_the_walls_undo_still_runs(tmp_path: Path, sig: int,
                                                                                  code: int) -> None:
    # With no handler, SIGHUP killed DAL outright and a nested dal.toml the command had made stayed.
    (tmp_path / "sub").mkdir()
    (tmp_path / "w.sh").write_text("printf '[run]\\nallow = [\"sh\"]\\n' > sub/dal.toml; touch before; sleep 3\n")
    (tmp_path / "s.dal").write_text('run("sh w.sh")\nrun("touch after")\n')
    proc = subprocess.Popen([sys.executable, "-m", "dal", "run", "s.dal", "--key", "hup", "--allow-run=sh"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, DAL_STOP_GRACE="0.3"), start_new_session=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "before").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert (tmp_path / "sub" / "dal.toml").exists()  # made by the command, inside the wall or not
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    (path,) = (tmp_path / ".dal" / "receipts").glob("*.json")
    receipt = json.loads(path.read_text())
    assert receipt["status"] == "interrupted" and receipt["retry"] == "resume"
    assert not (tmp_path / "after").exists()
    if shutil.which("bwrap"):  # the wall undoes a policy file a program made (without it, the check denies sh's)
        assert not (tmp_path / "sub" / "dal.toml").exists()
