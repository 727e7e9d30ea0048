"""Jobs per second through the queue, end to end. Prints figures; asserts nothing.

    python bench/bench_jobs.py            # DAL_BENCH_JOBS=400 for a longer run

One-effect jobs (`run("true")`) with 2 workers (`dal worker --concurrency 1`, two processes) on the
machine's cores: claim, fork, run, journal (intent and result), receipt (store and files), route. The rate
is taken from the store (the first run's start to the last job's end), so the workers' own start-up is not
in it. Against, on the same cores, two at a time:
- bare sandbox spawns: `bwrap --ro-bind / / -- true` in a loop (issue 17's baseline);
- DAL's own wall around `true` (run_effect, the spawn a job's effect cannot avoid);
- a loop of `dal run --key K job.dal` processes (what a cron line does today).
Target (issue 17): the queue costs at most 25% on top of the bare sandbox spawns.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOBS = int(os.environ.get("DAL_BENCH_JOBS", "200"))
RUNS = int(os.environ.get("DAL_BENCH_RUNS", "30"))  # per process, for the `dal run` loop
WORKERS = 2


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    e["PYTHONPATH"] = str(REPO)
    return e


def parallel(code: str, n: int) -> float:
    """Wall seconds for WORKERS Python processes each running `code` (which loops `n` times) at once."""
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n)], env=env()) for _ in range(WORKERS)]
    for p in procs:
        p.wait()
    return time.perf_counter() - started


BWRAP = """
import subprocess, sys
argv = ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--", "true"]
for _ in range(int(sys.argv[1])):
    subprocess.run(argv, env={"PATH": "/usr/bin:/bin"})
"""

WALL = """
import sys, tempfile
from pathlib import Path
from dal.effects import EffectContext, Policy, run_effect
ws = Path(tempfile.mkdtemp())
ctx = EffectContext(policy=Policy.load(ws))
run_effect("true", ctx)
for _ in range(int(sys.argv[1])):
    run_effect("true", ctx)
"""


def dal_loop(ws: Path, n: int) -> float:
    code = f"""
import subprocess, sys, os
for i in range(int(sys.argv[1])):
    subprocess.run([sys.executable, "-m", "dal", "run", "-q", "--key", f"loop:{{os.getpid()}}:{{i}}", "job.dal"],
                   cwd={str(ws)!r})
"""
    return parallel(code, n)


def queue_rate(ws: Path) -> tuple[float, float]:
    """(jobs per second, seconds) for JOBS one-effect jobs drained by WORKERS workers."""
    sys.path.insert(0, str(REPO))
    from dal.receipts.jobs import JobQueue, machine_host
    from dal.receipts.store import Store
    from dal.runner.build import build_spec
    from dal.worker.spec import make_spec

    db = ws / ".dal" / "dal.db"
    spec = make_spec(build_spec(ws / "job.dal", workspace=ws, max_steps=1000))
    with Store(db) as store:
        q = JobQueue.of(store)
        for i in range(JOBS):
            q.submit(spec=spec, key=f"bench:{i}", queue="default", priority=0, run_at=0.0, max_attempts=1,
                     host=machine_host(), movable=False)
    procs = [subprocess.Popen([sys.executable, "-m", "dal", "worker", "--concurrency", "1", "--until-idle",
                               "--poll", "0.02", "--store", str(db)], cwd=ws, env=env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(WORKERS)]
    for p in procs:
        p.wait()
    with Store(db, readonly=True) as store:
        runs = store.list_runs(limit=None)
        jobs = JobQueue.of(store).list(limit=None)
    assert all(j["state"] == "done" for j in jobs), {j["state"] for j in jobs}
    first = min(datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")).timestamp() for r in runs)
    span = max(j["finished_at"] for j in jobs) - first
    return JOBS / span, span


def main() -> None:
    from dal.effects import sandbox_status

    sys.path.insert(0, str(REPO))
    ok, why = sandbox_status()
    if not ok:
        print(f"bubblewrap: unavailable ({why}); the figures need it")
        return
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "job.dal").write_text('run("true")\n', encoding="utf-8")
        (ws / ".dal").mkdir()
        rate, span = queue_rate(ws)
        bare = WORKERS * (JOBS // WORKERS) / parallel(BWRAP, JOBS // WORKERS)
        wall = WORKERS * (JOBS // WORKERS) / parallel(WALL, JOBS // WORKERS)
        loop = WORKERS * RUNS / dal_loop(ws, RUNS)
    print(f"{JOBS} one-effect jobs, {WORKERS} workers on {os.cpu_count()} cores (load {os.getloadavg()[0]:.1f} at end)")
    per = 1000 / rate * WORKERS
    print(f"queue (claim, fork, run, journal, receipt, route)  {rate:8.1f} jobs/s   {per:6.2f} ms per job per worker")
    print(f"bare sandbox spawns (bwrap --ro-bind / / true)     {bare:8.1f} /s       the queue costs "
          f"{bare / rate - 1:+.0%} on top (target: at most +25%)")
    print(f"DAL's wall around true (run_effect)                {wall:8.1f} /s       the queue costs "
          f"{wall / rate - 1:+.0%} on top of the spawn it cannot avoid")
    print(f"a loop of `dal run --key K job.dal` processes      {loop:8.1f} runs/s   the queue is "
          f"{rate / loop:.1f}x as fast")


if __name__ == "__main__":
    main()
