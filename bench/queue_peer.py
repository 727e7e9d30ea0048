"""One peer job system running the queue benchmark's job, in the peer's own venv (bench/bench_queue_peers.py).

    python bench/queue_peer.py SYSTEM N FOLDER [CONNINFO]

SYSTEM is huey, procrastinate, dbos-sqlite or dbos-pg. The job is the one DAL's queue runs: one effect, the
bubblewrap command line of DAL's wall for `true`, read from FOLDER/argv.json. The driver enqueues N jobs first
(outside what is measured), then moves itself into the cgroup whose `cgroup.procs` FOLDER/cgroup names (so that
it and every process it starts are counted there, bubblewrap's reparented sandbox children included), starts
WORKERS worker processes of CONCURRENCY each, waits until the N jobs are done, stops them, and prints one JSON
line: {"done": jobs done, "first": the first job's start, "last": the last job's end} (epoch seconds, from the
times each job appends to FOLDER/times-PID). With N = 0 it starts the workers, lets them idle for IDLE seconds
and stops them: what start-up and stop cost, which the harness takes off. Does not import `dal`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

WORKERS = int(os.environ.get("DAL_BENCH_WORKERS", "2"))
CONCURRENCY = int(os.environ.get("DAL_BENCH_CONCURRENCY", "2"))
IDLE = 1.0
# DBOS polls its queues (default every second: 2 jobs a second per worker at concurrency 2); the bench polls
# every 50 ms, which is what lets it reach its best rate here. huey is left at its defaults but for the
# longest idle sleep, procrastinate at its defaults (LISTEN/NOTIFY).
DBOS_POLL = float(os.environ.get("DAL_BENCH_DBOS_POLL", "0.05"))

FOLDER = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(".")
ARGV: list[str] = json.loads((FOLDER / "argv.json").read_text()) if (FOLDER / "argv.json").exists() else ["true"]
ENV = {"PATH": "/usr/bin:/bin"}


def effect() -> None:
    """The job's one effect, timed into this process's file of job times."""
    t0 = time.time()
    subprocess.run(ARGV, env=ENV, stdin=subprocess.DEVNULL, check=False)
    with open(FOLDER / f"times-{os.getpid()}", "a") as f:
        f.write(f"{t0} {time.time()}\n")


def worker(call: str) -> list[str]:
    """The command line of one worker process: this module imported in a new interpreter, then `call`."""
    here = str(Path(__file__).resolve().parent)
    return [sys.executable, "-c", f"import sys, signal; sys.path.insert(0, {here!r}); import queue_peer as q; {call}",
            "x", "x", str(FOLDER)]  # sys.argv[3] is FOLDER, as for the driver


def join_cgroup() -> None:
    procs = (FOLDER / "cgroup").read_text().strip()
    with open(procs, "w") as f:
        f.write(str(os.getpid()))


def times() -> list[tuple[float, float]]:
    out = []
    for p in FOLDER.glob("times-*"):
        out += [tuple(map(float, line.split())) for line in p.read_text().splitlines() if line.strip()]
    return out


def finish(procs: list[subprocess.Popen], done: int) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    spans = times()
    print(json.dumps({"done": done, "first": min((s for s, _ in spans), default=0.0),
                      "last": max((e for _, e in spans), default=0.0)}))


def wait_for(n: int, count, procs: list[subprocess.Popen], limit: float = 600) -> int:
    deadline = time.monotonic() + limit
    done = 0
    while time.monotonic() < deadline:
        done = count()
        if done >= n or all(p.poll() is not None for p in procs):
            return done
        time.sleep(0.05)
    return done


# --- huey ----------------------------------------------------------------------------------------------------

def huey_app():
    from huey import SqliteHuey

    huey = SqliteHuey("bench", filename=str(FOLDER / "huey.db"))

    @huey.task(name="job")
    def job(i: int) -> None:
        effect()

    return huey, job


def huey_main(n: int) -> None:
    huey, job = huey_app()
    for i in range(n):
        job(i)
    join_cgroup()
    # WORKERS consumers of CONCURRENCY worker threads each, polling as huey does (the longest idle sleep 1 s)
    call = f"h, _ = q.huey_app(); h.create_consumer(workers={CONCURRENCY}, worker_type='thread', max_delay=1.0).run()"
    procs = [subprocess.Popen(worker(call)) for _ in range(WORKERS)]
    if n == 0:
        time.sleep(IDLE)
        return finish(procs, 0)
    finish(procs, wait_for(n, lambda: len(times()), procs))


# --- procrastinate ------------------------------------------------------------------------------------------

def procrastinate_app(conninfo: str):
    import procrastinate

    app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=conninfo))

    @app.task(name="job")
    def job(i: int) -> None:
        effect()

    return app, job


def procrastinate_worker(conninfo: str) -> None:
    import procrastinate

    app, _ = procrastinate_app(conninfo)
    app = app.with_connector(procrastinate.PsycopgConnector(conninfo=conninfo))
    app.run_worker(concurrency=CONCURRENCY, wait=False, install_signal_handlers=True)


def procrastinate_main(n: int, conninfo: str) -> None:
    app, job = procrastinate_app(conninfo)
    with app.open():
        app.schema_manager.apply_schema()
        for i in range(n):
            job.defer(i=i)
    join_cgroup()
    procs = [subprocess.Popen(worker(f"q.procrastinate_worker({conninfo!r})")) for _ in range(WORKERS)]
    if n == 0:
        time.sleep(IDLE)
        return finish(procs, 0)
    for p in procs:  # wait=False: each worker stops once the queue is empty
        p.wait()
    finish(procs, len(times()))


# --- DBOS ---------------------------------------------------------------------------------------------------

def dbos_worker(url: str) -> None:
    from dbos import DBOS

    DBOS(config={"name": "dal-bench", "system_database_url": url})

    @DBOS.step(name="effect")
    def run_effect() -> None:
        effect()

    @DBOS.workflow(name="job")
    def job(i: int) -> None:
        run_effect()

    DBOS.launch()
    DBOS.register_queue("jobs", worker_concurrency=CONCURRENCY, polling_interval_sec=DBOS_POLL,
                        on_conflict="always_update")
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    DBOS.destroy()


def dbos_main(n: int, url: str) -> None:
    from dbos import DBOSClient

    # the workers create the system database; a first one run alone makes it before anything is enqueued
    call = f"signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGTERM, signal.SIGINT}}); q.dbos_worker({url!r})"
    first = subprocess.Popen(worker(call))
    client = None
    deadline = time.monotonic() + 60
    while client is None and time.monotonic() < deadline:
        try:
            client = DBOSClient(system_database_url=url)
            client.list_workflows(limit=1)
        except Exception:  # not created yet
            client = None
            time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    first.wait()
    assert client is not None, "DBOS did not create its system database"
    for i in range(n):
        client.enqueue({"queue_name": "jobs", "workflow_name": "job"}, i)
    join_cgroup()
    procs = [subprocess.Popen(worker(call)) for _ in range(WORKERS)]
    if n == 0:
        time.sleep(IDLE)
        return finish(procs, 0)
    finish(procs, wait_for(n, lambda: len(times()), procs))


def main() -> None:
    system, n = sys.argv[1], int(sys.argv[2])
    conninfo = sys.argv[4] if len(sys.argv) > 4 else ""
    if system == "huey":
        huey_main(n)
    elif system == "procrastinate":
        procrastinate_main(n, conninfo)
    elif system == "dbos-sqlite":
        dbos_main(n, f"sqlite:///{FOLDER / 'dbos.sqlite'}")
    elif system == "dbos-pg":
        dbos_main(n, conninfo)
    else:
        raise SystemExit(f"unknown system {system!r}")


if __name__ == "__main__":
    import queue_peer  # the tasks are defined in the module `queue_peer`, as the workers import it

    queue_peer.main()
