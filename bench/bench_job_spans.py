"""Where one job's time goes: one worker, in-process, with perf_counter spans around the steps of each job
in its job process (dal/worker/jobproc.py). Prints mean milliseconds per job; asserts nothing.

    python bench/bench_job_spans.py [JOBS]      # default 40 one-effect jobs (`run("true")`)

Spans nest (`_execute` holds `execute_checked`, the wall around the effect, and `_finish`, the receipt),
so they do not add up. `hand-over` is the time from the parent's hand-over of a job to the job process's
first line for it; the job process's CPU time and minor page faults for the job (from its first line for
the job to its report) are its own. The last lines give the time per job from the first run's start to the
last job's end, the CPU time of every process per job with the worker's start-up, and without it: the
parent's loop and the job processes as reaped (their start and their waits between jobs included), of
which the part timed inside the jobs (the process itself and its children: bubblewrap's side; bubblewrap's
sandbox init, reparented when bubblewrap exits, is not its child and is missed here).

    DAL_BENCH_POLL=S        the worker's poll (default 1 s, the worker's own: a job process's report wakes it)
    DAL_BENCH_PROFILE=DIR   a cProfile of each job process's jobs and of the parent's loop in DIR (no spans)
"""

from __future__ import annotations

import functools
import glob
import importlib
import json
import os
import resource
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(os.environ.get("REPO") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(REPO))

SPANS = [
    ("dal.worker.jobproc", "JobProcessMain._run"), ("dal.receipts.jobs", "JobQueue.route"),
    ("dal.receipts.jobs", "JobQueue.open"), ("dal.receipts.jobs", "JobQueue.close"),
    ("dal.runner.runner", "_execute"), ("dal.runner.finish", "finish"), ("dal.runner.operation", "RunState.release"),
    ("dal.runner.operation", "RunState.enter_key"), ("dal.receipts.store", "Store.__init__"),
    ("dal.receipts.store", "Store.close"), ("dal.receipts.store", "Store.save_receipt"),
    ("dal.receipts.store", "Store.journal_intent"), ("dal.receipts.store", "Store.journal_result"),
    ("dal.receipts.store", "Store.begin_run"), ("dal.receipts.oplock", "KeyLock.acquire"),
    ("dal.receipts.files", "write_receipt_files"), ("dal.effects.exec.running", "execute_checked"),
    # inside the wall's spawn: bubblewrap started, its init's pid read, the cgroup move (an RCU grace period
    # unless another move on the machine just paid one), the run after the release
    ("dal.effects.exec.executor", "_spawn"), ("dal.effects.exec.executor", "_read_child_pid"),
    ("dal.effects.wall.limits", "Cgroup.add"), ("dal.effects.exec.executor", "_drain"),
    ("dal.runner.runner", "check_source"),
]
acc: dict[str, float] = {}
FAULTS = "job process: minor page faults"
KIDS_FAULTS = "job process's children: minor page faults"
PROFILE = os.environ.get("DAL_BENCH_PROFILE")
POLL = float(os.environ.get("DAL_BENCH_POLL", "1.0"))  # the worker's default; a child that ends wakes the loop at once


def timed(modname: str, qual: str) -> None:
    owner: Any = importlib.import_module(modname)
    *path, name = qual.split(".")
    for p in path:
        owner = getattr(owner, p)
    f = getattr(owner, name)

    @functools.wraps(f)
    def g(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc[qual] = acc.get(qual, 0.0) + time.perf_counter() - t

    setattr(owner, name, g)


def cpu(who: int = resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def cpu_all() -> float:
    return cpu() + cpu(resource.RUSAGE_CHILDREN)


def main() -> None:
    from dal.receipts.jobs import JobQueue

    try:
        from dal.core.liveness import host_name
    except ImportError:  # a checkout from before dal/core/liveness.py (REPO=)
        from dal.receipts.jobs import machine_host as host_name  # type: ignore[attr-defined,no-redef]
    from dal.receipts.store import Store
    from dal.runner.build import build_spec
    from dal.worker import worker as w
    from dal.worker.spec import make_spec

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    ws = Path(tempfile.mkdtemp())
    (ws / "job.dal").write_text('run("true")\n', encoding="utf-8")
    db = ws / ".dal" / "dal.db"
    spec = make_spec(build_spec(ws / "job.dal", workspace=ws, max_steps=1000))
    with Store(db) as store:
        for i in range(n):
            JobQueue.of(store).submit(spec=spec, key=f"bench:{i}", queue="default", priority=0, run_at=0.0,
                                      max_attempts=1, host=host_name(), movable=False)
    out = Path(tempfile.mkdtemp())
    for mod, qual in SPANS if not PROFILE else ():
        timed(mod, qual)
    from dal.worker import jobproc

    one, start = jobproc.JobProcessMain._one, w.Worker._start
    prof = None

    def traced_one(self: Any, job: dict[str, Any]) -> Any:
        nonlocal prof
        acc.clear()
        acc["hand-over"] = time.time() - job["_handed_at"]
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if PROFILE and prof is None:  # DAL_BENCH_PROFILE=DIR: a cProfile of each job process's jobs (no spans)
            import cProfile

            prof = cProfile.Profile()
        if prof is not None:
            prof.enable()
        try:
            return one(self, job)
        finally:
            if prof is not None:
                prof.disable()
                prof.dump_stats(os.path.join(PROFILE, f"jobs-{os.getpid()}.prof"))
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            acc["job process: user CPU"] = r1.ru_utime - r0.ru_utime
            acc["job process: system CPU"] = r1.ru_stime - r0.ru_stime
            acc["job process's children: CPU"] = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
            acc[KIDS_FAULTS] = k1.ru_minflt - k0.ru_minflt
            acc[FAULTS] = r1.ru_minflt - r0.ru_minflt
            (out / f"{os.getpid()}-{job['job_id']}.json").write_text(json.dumps(acc))

    def traced_start(self: Any, job: dict[str, Any]) -> None:
        job["_handed_at"] = time.time()
        start(self, job)

    loop = w.Worker._loop
    marks: dict[str, float] = {}

    def traced_loop(self: Any) -> None:  # the parent's own CPU in its loop, its start-up left out
        marks["loop0"], marks["reaped0"] = cpu(), cpu(resource.RUSAGE_CHILDREN)
        marks["flt0"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        prof = None
        if PROFILE:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        try:
            loop(self)
        finally:
            if prof is not None:
                prof.disable()
                prof.dump_stats(os.path.join(PROFILE, "parent.prof"))
            marks["loop1"] = cpu()
            marks["flt1"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    jobproc.JobProcessMain._one = traced_one  # type: ignore[method-assign]
    w.Worker._start, w.Worker._loop = traced_start, traced_loop  # type: ignore[method-assign]
    c0 = cpu_all()
    w.Worker(db, until_idle=True, poll=POLL, say=lambda text: None).run()
    used = cpu_all() - c0
    marks["reaped1"] = cpu(resource.RUSAGE_CHILDREN)  # the job processes ended as the worker stopped
    files = glob.glob(str(out / "*.json"))
    total: dict[str, float] = {}
    for f in files:
        for k, v in json.loads(Path(f).read_text()).items():
            total[k] = total.get(k, 0.0) + v
    print(f"{n} one-effect jobs, one worker; load average {os.getloadavg()[0]:.1f}; mean per job:")
    counts = {k: total.pop(k, 0.0) for k in (FAULTS, KIDS_FAULTS)}
    for k, v in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"  {k:34s} {v / len(files) * 1000:7.2f} ms")
    for k, v in counts.items():
        print(f"  {k:34s} {v / len(files):7.0f}")
    print(f"  {'parent: minor page faults':34s} {(marks['flt1'] - marks['flt0']) / len(files):7.0f}")
    with Store(db, readonly=True) as store:
        runs = store.list_runs(limit=None)
        jobs = JobQueue.of(store).list(limit=None)
    first = min(datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")).timestamp() for r in runs)
    span = max(j["finished_at"] or 0 for j in jobs) - first
    parent = marks["loop1"] - marks["loop0"]
    kids = sum(total.get(k, 0.0) for k in ("job process: user CPU", "job process: system CPU",
                                            "job process's children: CPU"))
    print(f"first run's start to last job's end: {span / n * 1000:.1f} ms per job; CPU {used / n * 1000:.1f} ms "
          "per job (all processes, the worker's start-up included)")
    reaped = marks["reaped1"] - marks["reaped0"]  # the job processes whole, their start, waits and exit included
    print(f"CPU per job, the worker's start-up left out: {(parent + reaped) / n * 1000:.1f} ms = the parent's loop "
          f"{parent / n * 1000:.1f} (its forks included) + the job processes, reaped, "
          f"{reaped / n * 1000:.1f} (of which timed in the jobs: {kids / n * 1000:.1f}, the process, bubblewrap and "
          "the program)")


if __name__ == "__main__":
    main()
