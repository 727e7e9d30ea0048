"""The PostgreSQL store against the SQLite store on this machine. Prints figures; asserts nothing.

    python bench/bench_pg.py [JOBS]

1. The per-effect journal cost with a durable commit: journal_intent + journal_result of one effect, each its
   own committed transaction, with set_synchronous("FULL") (SQLite: fsync of the WAL; PostgreSQL:
   synchronous_commit=on, the server's WAL flushed to disk) and with NORMAL (survives kill -9 of DAL only).
2. Jobs per second: JOBS jobs (default 300) of a one-effect script drained by `dal worker --until-idle`, one
   worker (concurrency 2) on each store, then four workers on the PostgreSQL store (the cluster shape). The
   figure includes each worker's start-up (about a second), so it is a floor for a long-running worker.

The server is a cluster started here with fsync on, listening on a unix socket (the database on the same
disk as the SQLite file: the same machine, the same disk), unless DAL_BENCH_PG names a database to use.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dal.receipts.location import StoreLocation, open_store  # noqa: E402


def journal_cost(location: str, level: str, n: int = 200, rounds: int = 5) -> float:
    """Median milliseconds per effect (intent + result, two commits) at durability `level`."""
    per: list[float] = []
    with open_store(StoreLocation.parse(location, ".")) as s:
        s.set_synchronous(level)
        for r in range(rounds):
            run_id = f"run_20260101T0000{r:02d}000Z_{os.urandom(3).hex()}"
            s.begin_run(run_id, operation="bench")
            t0 = time.perf_counter()
            for seq in range(1, n + 1):
                s.journal_intent(run_id, seq, "echo x", "local", detail={"line": seq})
                s.journal_result(run_id, seq, {"status": "completed", "code": 0, "stdout": "x\n"})
            per.append((time.perf_counter() - t0) * 1000 / n)
    return statistics.median(per)


def drain(location: str, jobs: int, workers: int, root: Path) -> float:
    """Jobs per second of `workers` workers draining `jobs` jobs of a one-effect script."""
    tag = os.urandom(3).hex()
    ws = root / f"ws-{tag}"
    ws.mkdir()
    (ws / "one.dal").write_text('param n: str\nrun("true")\n', encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DAL_")}, "DAL_STORE": location,
           "PYTHONPATH": str(REPO)}
    first = subprocess.run([sys.executable, "-m", "dal", "submit", "one.dal", "n=0", "--key", f"b{tag}:0", "--json"],
                           cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    import json

    job = json.loads(first.stdout)["job"]
    with open_store(StoreLocation.parse(location, ws)) as s:
        q = s.jobs()
        for i in range(1, jobs):
            spec = {**job["spec"], "extensions": {**job["spec"]["extensions"], "args": {"n": str(i)}}}
            q.submit(spec=spec, key=f"b{tag}:{i}", queue="default", priority=0, run_at=0.0, max_attempts=3,
                     host=job["host"], movable=True)
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "dal", "worker", "--until-idle", "--concurrency", "2",
                               "--poll", "0.2"], cwd=ws, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(workers)]
    for p in procs:
        p.wait(3600)
    elapsed = time.perf_counter() - t0
    with open_store(StoreLocation.parse(location, ws), readonly=True) as s:
        mine = [j for j in s.jobs().list(limit=None) if j["key"].startswith(f"b{tag}:")]
    left = [f"job {j['job_id']} {j['state']}: {j['note']}" for j in mine if j["state"] != "done"]
    if left:  # a bench says what it saw: a job not done is reported, not hidden in the rate
        print(f"    ({len(left)} of {jobs} jobs not done: {'; '.join(left[:3])})")
    return (jobs - len(left)) / elapsed


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    root = Path(tempfile.mkdtemp(prefix="dal-bench-pg-"))
    server: Any = None
    given = os.environ.get("DAL_BENCH_PG")
    if given:
        pg = given
    else:
        from tests.pg.server import PgServer

        server = PgServer.start(durable=True)
        pg = server.new_database()
    try:
        sqlite = str(root / "store" / "dal.db")
        (root / "store").mkdir()
        print(f"journal, ms per effect (intent + result, {os.cpu_count()} cores; lower is better)")
        for level in ("FULL", "NORMAL"):
            lite = journal_cost(sqlite, level)
            post = journal_cost(pg, level)
            print(f"  {level:<6}  sqlite {lite:7.3f}   postgresql {post:7.3f}")
        print(f"\njobs per second, {jobs} one-effect jobs, worker start-up included (higher is better)")
        print(f"  sqlite,     1 worker x2:  {drain(sqlite + '.jobs', jobs, 1, root):7.1f}")
        db2 = server.new_database() if server is not None else pg
        print(f"  postgresql, 1 worker x2:  {drain(db2, jobs, 1, root):7.1f}")
        db3 = server.new_database() if server is not None else pg
        print(f"  postgresql, 4 workers x2: {drain(db3, jobs, 4, root):7.1f}")
    finally:
        if server is not None:
            server.close()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
