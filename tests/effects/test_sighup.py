"""SIGHUP (the operator's terminal or ssh session closing) stops `dal run` as SIGTERM does, so the wall's undo
runs: attack6 finding 08 (a nested dal.toml a program made and then waited on stayed for good)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dal.effects import sandbox_status

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")
def test_sighup_lets_the_wall_undo_a_nested_policy_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "dal.toml").write_text('[run]\nallow = ["sh"]\n')
    (ws / "s.dal").write_text('print(run("sh -c \'printf [run] > sub/dal.toml; echo made > made; sleep 20\'"))\n')
    env = {**os.environ, "PYTHONPATH": str(REPO), "DAL_STOP_GRACE": "0.2"}
    proc = subprocess.Popen([sys.executable, "-m", "dal", "run", "--require-sandbox", "s.dal"], cwd=ws,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while not (ws / "made").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    assert (ws / "sub" / "dal.toml").exists()  # made inside the wall, the pipeline still running
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 129, err
    assert "Traceback" not in err
    assert not (ws / "sub" / "dal.toml").exists(), err
