"""On PostgreSQL, what is due goes by the database's clock, never a worker's: a worker on a
host whose clock ran 120 s ahead claimed a job submitted `--in 90` at once, and fired a schedule's coming slot
early, after which the schedule's next slot jumped ahead. Executed: real `dal worker` processes, their clock
shifted by a sitecustomize, on the session's throwaway server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DAL = [sys.executable, "-m", "dal"]

SHIFT = """
import time as _t
_rt, _rtn = _t.time, _t.time_ns
_t.time = lambda: _rt() + 120.0
_t.time_ns = lambda: _rtn() + 120_000_000_000
"""


def _dal(ws: Path, url: str, *args: str, shifted: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAL_STORE": url}
    if shifted is not None:
        env["PYTHONPATH"] = f"{shifted}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return subprocess.run([*DAL, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=60)


def _fast_worker(ws: Path, url: str, shifted: Path, seconds: float) -> str:
    env = {**os.environ, "DAL_STORE": url, "PYTHONPATH": f"{shifted}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    p = subprocess.Popen([*DAL, "worker", "--concurrency", "1", "--poll", "0.2"], cwd=ws, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(seconds)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0, out
    return out


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    ws, shifted = tmp_path / "ws", tmp_path / "clock"
    (ws / "out").mkdir(parents=True)
    shifted.mkdir()
    (shifted / "sitecustomize.py").write_text(SHIFT)
    (ws / "s.dal").write_text('run("echo ran >> out/ran")\n')
    return ws, shifted


def test_a_worker_whose_clock_runs_ahead_runs_no_job_before_its_time(tmp_path: Path, pg_url: str) -> None:
    ws, shifted = _setup(tmp_path)
    # The clock really is shifted in a process given the sitecustomize (else the test proves nothing).
    probe = subprocess.run([sys.executable, "-c", "import time; print(time.time())"], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(shifted)}, check=True)
    assert float(probe.stdout) - time.time() > 100
    r = _dal(ws, pg_url, "submit", "--in", "90", "--key", "later", "--allow-write=out", "s.dal")
    assert r.returncode == 0, r.stderr
    out = _fast_worker(ws, pg_url, shifted, 4.0)
    assert not (ws / "out" / "ran").exists(), out
    jobs = json.loads(_dal(ws, pg_url, "jobs", "--json").stdout)["jobs"]
    assert [j["state"] for j in jobs] == ["scheduled"]
    # `--in` is counted from the database's clock too: a submitter running ahead does not make it due later.
    r = _dal(ws, pg_url, "submit", "--in", "1", "--key", "soon", "--allow-write=out", "s.dal", shifted=shifted)
    assert r.returncode == 0, r.stderr
    soon = next(j for j in json.loads(_dal(ws, pg_url, "jobs", "--json").stdout)["jobs"] if j["key"] == "soon")
    assert soon["run_at"] - time.time() < 30


def test_a_worker_whose_clock_runs_ahead_fires_no_slot_early(tmp_path: Path, pg_url: str) -> None:
    ws, shifted = _setup(tmp_path)
    if 60 - time.time() % 60 < 15:  # keep the worker's few seconds inside one real minute
        time.sleep(60 - time.time() % 60 + 1)
    r = _dal(ws, pg_url, "schedule", "add", "every", "--cron", "* * * * *", "--allow-write=out", "s.dal")
    assert r.returncode == 0, r.stderr
    before = json.loads(_dal(ws, pg_url, "schedule", "list", "--json").stdout)
    out = _fast_worker(ws, pg_url, shifted, 4.0)
    jobs = json.loads(_dal(ws, pg_url, "jobs", "--json").stdout)["jobs"]
    assert jobs == [] and not (ws / "out" / "ran").exists(), out
    after = json.loads(_dal(ws, pg_url, "schedule", "list", "--json").stdout)
    assert after == before  # its next slot did not move
