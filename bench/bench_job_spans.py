"""Where one job's time goes: one worker, in-process, with perf_counter spans around the steps of each job
in its forked child. Prints mean milliseconds per job; asserts nothing.

    python bench/bench_job_spans.py [JOBS]      # default 40 one-effect jobs (`run("true")`)

Spans nest (`_execute` holds `execute_checked`, the wall around the effect, and `_finish`, the receipt),
so they do not add up. `fork->child` is the time from the fork to the child's first line; the child's CPU
time and minor page faults (copy-on-write of the warm parent's heap, mostly) are its own. The last lines
give the time per job from the first run's start to the last job's end, the CPU time of every process per
job with the worker's start-up, and without it: the parent's loop (its fork calls included) and the
children as reaped (their exit included), of which the part timed inside the child (itself and its
children: bubblewrap's side). The parts: the child before its first line (the fork's return, its set-up),
its own CPU after that (user and system), its children's, and its exit (what is left of "reaped").

    DAL_BENCH_POLL=S        the worker's poll (default 1 s, the worker's own: a child that ends wakes it)
    DAL_BENCH_PROFILE=DIR   a cProfile of each child and of the parent's loop in DIR (the spans are off)
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
    ("dal.worker.worker", "Worker._child"), ("dal.receipts.jobs", "JobQueue.route"),
    ("dal.receipts.jobs", "JobQueue.open"), ("dal.receipts.jobs", "JobQueue.close"),
    ("dal.runner.runner", "_execute"), ("dal.runner.runner", "_finish"), ("dal.runner.runner", "_RunState.release"),
    ("dal.runner.runner", "_RunState.enter_key"), ("dal.receipts.store", "Store.__init__"),
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
FAULTS = "child: minor page faults"
KIDS_FAULTS = "child's children: minor page faults"
EARLY_FAULTS = "child: page faults before its first line"
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
    from dal.receipts.jobs import JobQueue, machine_host
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
                                      max_attempts=1, host=machine_host(), movable=False)
    out = Path(tempfile.mkdtemp())
    for mod, qual in SPANS if not PROFILE else ():
        timed(mod, qual)
    child, fork = w.Worker._child, w.Worker._fork

    def traced_child(self: Any, job: dict[str, Any], fence: Any) -> int:
        acc.clear()
        acc["fork->child"] = time.time() - job["_forked_at"]
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        k0 = cpu(resource.RUSAGE_CHILDREN)
        prof = None
        if PROFILE:  # DAL_BENCH_PROFILE=DIR: a cProfile of each child, to read with pstats (its spans are off)
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        try:
            return child(self, job, fence)
        finally:
            if prof is not None:
                prof.disable()
                prof.dump_stats(os.path.join(PROFILE, f"child-{os.getpid()}.prof"))
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            acc["child: CPU before its first line"] = r0.ru_utime + r0.ru_stime  # the fork's return, its set-up
            acc["child: user CPU"] = r1.ru_utime - r0.ru_utime
            acc["child: system CPU"] = r1.ru_stime - r0.ru_stime
            acc["child's children: CPU"] = cpu(resource.RUSAGE_CHILDREN) - k0  # bubblewrap, its init, true
            acc[KIDS_FAULTS] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
            acc["child: RSS at its end, KiB"] = r1.ru_maxrss
            faults = r1.ru_minflt - r0.ru_minflt
            acc[EARLY_FAULTS] = r0.ru_minflt
            (out / f"{os.getpid()}.json").write_text(json.dumps({**acc, FAULTS: faults}))

    def traced_fork(self: Any, job: dict[str, Any]) -> None:
        job["_forked_at"] = time.time()
        fork(self, job)

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
            marks["loop1"], marks["reaped1"] = cpu(), cpu(resource.RUSAGE_CHILDREN)
            marks["flt1"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    w.Worker._child, w.Worker._fork, w.Worker._loop = traced_child, traced_fork, traced_loop  # type: ignore
    c0 = cpu_all()
    w.Worker(db, until_idle=True, poll=POLL, say=lambda text: None).run()
    used = cpu_all() - c0
    files = glob.glob(str(out / "*.json"))
    total: dict[str, float] = {}
    for f in files:
        for k, v in json.loads(Path(f).read_text()).items():
            total[k] = total.get(k, 0.0) + v
    print(f"{n} one-effect jobs, one worker; load average {os.getloadavg()[0]:.1f}; mean per job:")
    counts = {k: total.pop(k, 0.0) for k in (FAULTS, EARLY_FAULTS, KIDS_FAULTS, "child: RSS at its end, KiB")}
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
    kids = sum(total.get(k, 0.0) for k in ("child: user CPU", "child: system CPU", "child's children: CPU"))
    print(f"first run's start to last job's end: {span / n * 1000:.1f} ms per job; CPU {used / n * 1000:.1f} ms "
          "per job (all processes, the worker's start-up included)")
    reaped = marks["reaped1"] - marks["reaped0"]  # the children whole, their exit included
    print(f"CPU per job, the worker's start-up left out: {(parent + reaped) / n * 1000:.1f} ms = the parent's loop "
          f"{parent / n * 1000:.1f} (the fork's own cost included) + the children, reaped, "
          f"{reaped / n * 1000:.1f} (of which timed in the child: {kids / n * 1000:.1f}, itself, bubblewrap and "
          "the program)")


if __name__ == "__main__":
    main()
