"""DAL's queue against the durable job systems users would pick instead, in one run. Prints figures; asserts
nothing.

    python bench/bench_queue_peers.py     # DAL_BENCH_JOBS=200 DAL_BENCH_ROUNDS=3
                                          # DAL_BENCH_SYSTEMS=dal-sqlite,dal-pg,huey,procrastinate,dbos-sqlite,...

Every system runs the same job: one effect, the bubblewrap command line DAL's wall uses for `true` (the wall's
view of a workspace, its binds by path), with 2 worker processes x concurrency 2 on the machine's cores:
- dal-sqlite, dal-pg: `dal worker --concurrency 2 --until-idle`, two processes, on a SQLite file or a
  PostgreSQL database (the job a `run("true")` script: claim, run, journal, receipt, route);
- huey (SqliteHuey, thread workers), procrastinate (PostgreSQL), DBOS (SQLite or PostgreSQL, its queue polled
  every 50 ms): bench/queue_peer.py, in a virtual environment of the bench's own that this script creates with
  pip (the peers are not project dependencies), under ~/.cache/dal-bench/ (DAL_BENCH_PEERS_DIR);
- bare: the same command line spawned from Python, four at a time: the floor every system stands on;
- dal-run: a loop of `dal run --key K job.dal` processes, two at a time (what a cron line does).
PostgreSQL is a throwaway cluster with fsync on, on a unix socket, one new database per system and round.
CPU is counted for every process of a system with a cgroup (its workers, their children, bubblewrap's sandbox
children, which bubblewrap reparents and RUSAGE_CHILDREN therefore misses), and for the systems on PostgreSQL
the server's too (all its processes in a cgroup of their own), each less what the same workers cost on an
empty queue (start-up and stop). Rounds interleave the systems so that a change of the machine's load falls on
all alike; the table shows each system's best round (jobs/s and CPU ms per job from that round), with the
server's share, and for PostgreSQL the connections opened and transactions committed per job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

JOBS = int(os.environ.get("DAL_BENCH_JOBS", "200"))
ROUNDS = int(os.environ.get("DAL_BENCH_ROUNDS", "3"))
WORKERS, CONCURRENCY = 2, 2
ALL = ("dal-sqlite", "dal-pg", "huey", "procrastinate", "dbos-sqlite", "dbos-pg", "bare", "dal-run")
SYSTEMS = [s for s in os.environ.get("DAL_BENCH_SYSTEMS", ",".join(ALL)).split(",") if s]
PEERS = ("huey>=2.5", "procrastinate>=3.0", "dbos>=3.0", "psycopg[binary]>=3.1")
PEERS_DIR = Path(os.environ.get("DAL_BENCH_PEERS_DIR", Path.home() / ".cache" / "dal-bench"))


def say(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


# --- counting CPU -------------------------------------------------------------------------------------------

class CpuGroup:
    """A cgroup that counts the CPU of every process put in it and of everything they start: cgroup v2's
    cpu.stat where a v2 hierarchy is mounted (also the unified one of a hybrid layout), else v1's cpuacct."""

    def __init__(self, name: str) -> None:
        for root, usage in (("/sys/fs/cgroup", "cpu.stat"), ("/sys/fs/cgroup/unified", "cpu.stat"),
                            ("/sys/fs/cgroup/cpuacct", "cpuacct.usage")):
            if os.path.exists(os.path.join(root, "cgroup.procs")) and (usage != "cpu.stat" or os.path.exists(
                    os.path.join(root, "cgroup.controllers")) or root.endswith("unified")):
                path = os.path.join(root, f"dal-bench-{name}-{os.getpid()}")
                try:
                    os.makedirs(path, exist_ok=True)
                except OSError:
                    continue
                if os.path.exists(os.path.join(path, usage)):
                    self.path, self.usage_file = path, usage
                    return
                os.rmdir(path)
        raise RuntimeError("no cgroup to count CPU in (needs cgroup v2, or v1's cpuacct, writable: run as root)")

    @property
    def procs(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def add(self, pid: int) -> None:
        with open(self.procs, "w") as f:
            f.write(str(pid))

    def seconds(self) -> float:
        text = Path(self.path, self.usage_file).read_text()
        if self.usage_file == "cpuacct.usage":
            return int(text) / 1e9
        return int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6

    def spawn(self, argv: list[str], **kw: Any) -> subprocess.Popen:
        """Start `argv` inside this group from its first instruction (a shell that joins, then execs)."""
        return subprocess.Popen(["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self.procs, *argv], **kw)

    def close(self) -> None:
        try:
            for pid in Path(self.procs).read_text().split():
                with open(os.path.join(os.path.dirname(self.path), "cgroup.procs"), "w") as f:
                    f.write(pid)
            os.rmdir(self.path)
        except OSError:
            pass


# --- the job and the servers --------------------------------------------------------------------------------

def wall_argv(ws: Path) -> list[str]:
    """DAL's bubblewrap command line for `true` in `ws` (bench/bench_jobs.py builds it)."""
    from bench_jobs import wall_view

    return wall_view(ws)


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    e["PYTHONPATH"] = str(REPO)
    return e


class Server:
    """The throwaway PostgreSQL cluster, its processes counted in a cgroup of their own."""

    def __init__(self) -> None:
        from tests.pg.server import PgServer

        self.pg = PgServer.start(durable=True)
        self.group = CpuGroup("pg")
        self._adopt()

    def _adopt(self) -> None:
        """Move the postmaster and its background processes into the group; backends it forks later are
        born there."""
        pid = int((self.pg.folder / "data" / "postmaster.pid").read_text().split()[0])
        self.group.add(pid)
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    self.group.add(int(entry))

    def database(self) -> str:
        return self.pg.new_database()

    def stats(self, url: str) -> tuple[int, int]:
        """(sessions opened, transactions committed) of the database `url` names, so far."""
        import psycopg

        name = url.split("?", 1)[0].rsplit("/", 1)[1]
        with psycopg.connect(self.pg.admin, autocommit=True) as c:
            row = c.execute("SELECT sessions, xact_commit FROM pg_stat_database WHERE datname = %s",
                            (name,)).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)  # no row before the database's first session

    def close(self) -> None:
        self.pg.close()
        self.group.close()


def peers_python() -> Path | None:
    """The python of the peers' venv, made with pip on first use; None (and why, on stderr) when it fails."""
    venv = PEERS_DIR / "queue-peers"
    py = venv / "bin" / "python"
    if py.exists():
        return py
    say(f"installing {', '.join(PEERS)} into {venv} (once) ...")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *PEERS], check=True, capture_output=True,
                       timeout=900)
    except (subprocess.SubprocessError, OSError) as e:
        say(f"  the peers could not be installed ({e}); they are left out")
        shutil.rmtree(venv, ignore_errors=True)
        return None
    return py


# --- one round of one system --------------------------------------------------------------------------------

class Result:
    def __init__(self, rate: float, cpu_ms: float, server_ms: float = 0.0, conns: float | None = None,
                 xacts: float | None = None, note: str = "") -> None:
        self.rate, self.cpu_ms, self.server_ms, self.conns, self.xacts, self.note = \
            rate, cpu_ms, server_ms, conns, xacts, note


def dal_queue(ws: Path, server: Server | None) -> Result:
    from dal.core.liveness import host_name
    from dal.receipts.location import StoreLocation, open_store
    from dal.runner.build import build_spec
    from dal.worker.spec import make_spec

    def drain(loc: str) -> float:
        group = CpuGroup("dal")
        try:
            procs = [group.spawn([sys.executable, "-m", "dal", "worker", "--concurrency", str(CONCURRENCY),
                                  "--until-idle", "--store", loc], cwd=ws, env=env(), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for _ in range(WORKERS)]
            for p in procs:
                p.wait()
            return group.seconds()
        finally:
            group.close()

    def store(loc: str, n: int) -> None:
        if loc.startswith("postgresql:"):
            subprocess.run([sys.executable, "-m", "dal", "store", "migrate", "--store", loc], cwd=ws, env=env(),
                           capture_output=True, check=True)

        spec = make_spec(build_spec(ws / "job.dal", workspace=ws, max_steps=1000))
        with open_store(StoreLocation.parse(loc, str(ws))) as s:
            q = s.jobs()
            for i in range(n):
                q.submit(spec=spec, key=f"bench:{i}", queue="default", priority=0, run_at=0.0, max_attempts=1,
                         host=host_name(), movable=False)

    def fresh() -> str:
        if server is not None:
            return server.database()
        return str(Path(tempfile.mkdtemp(dir=ws / ".dal")) / "dal.db")

    busy, idle = fresh(), fresh()
    store(busy, JOBS)
    store(idle, 0)
    s0 = server.group.seconds() if server else 0.0
    st0 = server.stats(busy) if server else (0, 0)
    used = drain(busy)
    s1 = server.group.seconds() if server else 0.0
    st1 = server.stats(busy) if server else (0, 0)
    used -= drain(idle)
    s2 = server.group.seconds() if server else 0.0
    server_used = (s1 - s0) - (s2 - s1)
    with open_store(StoreLocation.parse(busy, str(ws))) as s:
        runs = s.list_runs(limit=None)
        q = s.jobs()
        jobs, states = q.list(limit=None), q.counts()
    first = min(datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")).timestamp() for r in runs)
    span = max(j["finished_at"] or 0 for j in jobs) - first
    note = "" if states.get("done") == JOBS else f"not every job done: {states}"
    conns = (st1[0] - st0[0]) / JOBS if server else None
    xacts = (st1[1] - st0[1]) / JOBS if server else None
    return Result(JOBS / span, (used + server_used) * 1000 / JOBS, server_used * 1000 / JOBS, conns, xacts, note)


def peer(system: str, py: Path, argv: list[str], server: Server | None) -> Result:
    def once(n: int, url: str) -> tuple[dict, float, float]:
        folder = Path(tempfile.mkdtemp(prefix=f"dal-bench-{system}-"))
        group = CpuGroup(system)
        try:
            (folder / "argv.json").write_text(json.dumps(argv))
            (folder / "cgroup").write_text(group.procs)
            s0 = server.group.seconds() if server else 0.0
            out = subprocess.run([str(py), str(HERE / "queue_peer.py"), system, str(n), str(folder), url],
                                 capture_output=True, text=True, timeout=900)
            s1 = server.group.seconds() if server else 0.0
            if out.returncode != 0:
                last = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
                raise RuntimeError(last)
            return json.loads(out.stdout.strip().splitlines()[-1]), group.seconds(), s1 - s0
        finally:
            group.close()
            shutil.rmtree(folder, ignore_errors=True)

    url = server.database() if server else ""
    st0 = server.stats(url) if server else (0, 0)
    got, used, server_used = once(JOBS, url)
    st1 = server.stats(url) if server else (0, 0)
    _, idle, server_idle = once(0, server.database() if server else "")
    used, server_used = used - idle, server_used - server_idle
    note = "" if got["done"] == JOBS else f"{got['done']} of {JOBS} jobs done"
    span = got["last"] - got["first"]
    conns = (st1[0] - st0[0]) / JOBS if server else None
    xacts = (st1[1] - st0[1]) / JOBS if server else None
    return Result(got["done"] / span if span > 0 else 0.0, (used + server_used) * 1000 / JOBS,
                  server_used * 1000 / JOBS, conns, xacts, note)


def parallel(code: str, at_once: int, n: int) -> Result:
    """`at_once` Python processes each running `code`'s item() `n` times, in one cgroup."""
    start = time.time() + 1.0 + 0.1 * at_once
    timed = (f"import sys, time\n{code}\ntime.sleep(max(0.0, {start!r} - time.time()))\nt0 = time.time()\n"
             f"for _ in range({n}):\n    item()\nprint(t0, time.time())\n")
    group = CpuGroup("loop")
    try:
        procs = [group.spawn([sys.executable, "-c", timed], env=env(), stdout=subprocess.PIPE, text=True)
                 for _ in range(at_once)]
        spans = [tuple(map(float, p.communicate()[0].split())) for p in procs]
        used = group.seconds()
    finally:
        group.close()
    idle_group = CpuGroup("idle")
    try:  # the processes' own start-up, taken off
        procs = [idle_group.spawn([sys.executable, "-c", code.replace("\nitem()\n", "\n")], env=env())
                 for _ in range(at_once)]
        for p in procs:
            p.wait()
        idle = idle_group.seconds()
    finally:
        idle_group.close()
    total = at_once * n
    return Result(total / (max(e for _, e in spans) - min(s for s, _ in spans)), (used - idle) * 1000 / total)


def bare(argv: list[str]) -> Result:
    code = (f"import subprocess\nargv = {argv!r}\n\n\ndef item():\n"
            "    subprocess.run(argv, env={'PATH': '/usr/bin:/bin'})\n")
    return parallel(code, WORKERS * CONCURRENCY, max(1, JOBS // (WORKERS * CONCURRENCY)))


def dal_run_loop(ws: Path) -> Result:
    code = ("import itertools, os, subprocess\ncount = itertools.count()\n\ndef item():\n"
            f"    subprocess.run([sys.executable, '-m', 'dal', 'run', '-q', '--key', f'loop:{{os.getpid()}}:"
            f"{{next(count)}}', 'job.dal'], cwd={str(ws)!r})\n")
    return parallel(code, WORKERS, max(1, min(30, JOBS // 8)))


# --- the table ----------------------------------------------------------------------------------------------

LABEL = {
    "dal-sqlite": "DAL queue (SQLite)", "dal-pg": "DAL queue (PostgreSQL)", "huey": "huey (SqliteHuey)",
    "procrastinate": "procrastinate (PostgreSQL)", "dbos-sqlite": "DBOS (SQLite)", "dbos-pg": "DBOS (PostgreSQL)",
    "bare": "bare spawns of the command from Python", "dal-run": "a loop of `dal run` processes, one per job",
}


def main() -> None:
    from dal.effects import sandbox_status

    ok, why = sandbox_status()
    if not ok:
        say(f"bubblewrap: unavailable ({why}); every system runs DAL's bubblewrap command, so the bench needs it")
        return
    load0 = os.getloadavg()[0]
    py = peers_python() if any(s in SYSTEMS for s in ("huey", "procrastinate", "dbos-sqlite", "dbos-pg")) else None
    server = Server() if any(s in SYSTEMS for s in ("dal-pg", "procrastinate", "dbos-pg")) else None
    results: dict[str, list[Result]] = {s: [] for s in SYSTEMS}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp)
            (ws / "job.dal").write_text('run("true")\n', encoding="utf-8")
            (ws / ".dal").mkdir()
            argv = wall_argv(ws)
            for r in range(ROUNDS):
                for system in SYSTEMS:
                    say(f"round {r + 1}/{ROUNDS}: {system} ...")
                    try:
                        if system == "dal-sqlite":
                            res = dal_queue(ws, None)
                        elif system == "dal-pg":
                            res = dal_queue(ws, server)
                        elif system == "bare":
                            res = bare(argv)
                        elif system == "dal-run":
                            res = dal_run_loop(ws)
                        elif py is None:
                            continue
                        else:
                            res = peer(system, py, argv, server if system in ("procrastinate", "dbos-pg") else None)
                    except Exception as e:  # one system failing leaves the others' figures
                        say(f"  {system} failed: {type(e).__name__}: {e}")
                        continue
                    results[system].append(res)
    finally:
        if server is not None:
            server.close()
    print(f"{JOBS} one-effect jobs (DAL's bubblewrap command for `true`), {WORKERS} workers x concurrency "
          f"{CONCURRENCY}, {os.cpu_count()} cores, best of {ROUNDS} interleaved rounds; load average {load0:.1f} "
          f"at the start, {os.getloadavg()[0]:.1f} at the end")
    print()
    print("| system | jobs/s | CPU ms/job | of which the server | connections/job | transactions/job |")
    print("|---|---:|---:|---:|---:|---:|")
    for system in SYSTEMS:
        got = results[system]
        if not got:
            print(f"| {LABEL[system]} | – | – | – | – | – |")
            continue
        best = max(got, key=lambda x: x.rate)
        cpu = min(x.cpu_ms for x in got)
        srv = f"{min(x.server_ms for x in got):.1f}" if best.conns is not None else ""
        conns = f"{best.conns:.2f}" if best.conns is not None else ""
        xacts = f"{best.xacts:.1f}" if best.xacts is not None else ""
        note = f" ({best.note})" if best.note else ""
        print(f"| {LABEL[system]}{note} | {best.rate:.0f} | {cpu:.1f} | {srv} | {conns} | {xacts} |")


if __name__ == "__main__":
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)  # settings are environment variables (above); the bench takes no arguments
    elif sys.argv[1:]:
        sys.exit(f"bench_queue_peers.py takes no arguments (got {' '.join(sys.argv[1:])}); see --help")
    else:
        main()
