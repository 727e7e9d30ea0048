"""`dal worker`: a warm parent that claims jobs and hands each to one of its job processes.

The parent imports DAL once (the runner, the shell parser, the policy, the sandbox probe), then loops:
read the reports of its job processes (a process that routed its job is idle again), reap the processes
that ended (one that died holding a job has that job routed here), renew the leases of the jobs its
processes run (a lease it lost: that process is told to stop), fire due schedules, wake waiting jobs that
got a decision, claim jobs up to its concurrency and hand each to an idle job process, forking a new one
when none is idle. A job process (dal/worker/jobproc.py) runs many jobs, one at a time, keeping its store
connection and the checked scripts between them, and is replaced when it dies or is recycled
(dal/worker/pool.py). The parent is one thread, and on SQLite it keeps its store connection from turn to
turn but closes it before every fork() of a job process: a SQLite connection (and SQLite's per-file lock
bookkeeping) must never cross a fork, and fork() in a process with threads is unsafe; so the leases are
renewed from the loop, at a third of the lease. On
PostgreSQL the parent keeps one connection for its whole life (opened once, its schema checked once); a job
process it forks inherits that connection's socket and never uses or closes it.

SIGTERM, SIGINT or SIGHUP (a closed terminal) drains: no new claims, the job processes get SIGTERM (their
runs stop as interrupted at the next step, and their jobs go back to ready; an idle one ends at once), and
the parent exits 0 once they are gone.
"""

from __future__ import annotations

import functools
import json
import os
import random
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dal.core.liveness import host_name
from dal.receipts.jobs import Fence, JobQueue
from dal.receipts.location import StoreLocation
from dal.receipts.store import StoreError
from dal.worker import pool
from dal.worker.jobproc import EXIT_INTERNAL, EXIT_STORE, STOP_SIGNALS
from dal.worker.keeper import Keeper
from dal.worker.log import WorkerLog
from dal.worker.pool import JobProcess

# As `dal worker --until-idle` stops, it names a schedule of its queues due within this many seconds.
SCHEDULE_SOON = 60.0

__all__ = ["EXIT_STORE", "STOP_SIGNALS", "StoreTrouble", "Worker", "warm"]


class Worker:
    def __init__(
        self,
        store: Path | StoreLocation,
        *,
        queues: tuple[str, ...] = ("default",),
        concurrency: int = 1,
        lease: float = 30.0,
        poll: float = 1.0,
        backoff: float = 5.0,
        until_idle: bool = False,
        max_jobs: int | None = None,
        say: Callable[[str], Any] | None = None,
        log_format: str = "text",
        recycle_after: int = pool.RECYCLE_AFTER,
        recycle_memory: int = pool.RECYCLE_MEMORY,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
    ) -> None:
        # Where the store is: a SQLite file (self.store, a Path) or a PostgreSQL database; the queue and the
        # key locks are opened through it (dal/receipts/location.py, open_store).
        self.location = store if isinstance(store, StoreLocation) else StoreLocation("sqlite", os.fspath(store))
        self.store: Any = self.location.file if self.location.is_file else self.location
        self._waker: Any = None  # PostgreSQL: LISTEN for submits, decisions and requeues between polls
        self._pg: Any = None  # PostgreSQL: the store the loop keeps open (see _queue)
        self._sqlite: JobQueue | None = None  # SQLite: the loop's queue, kept between forks (see _queue)
        self._sqlite_file: tuple[int, int] | None = None  # the store file it was opened on (device, inode)
        self.queues = tuple(dict.fromkeys(queues)) or ("default",)
        self.concurrency = max(1, concurrency)
        self.lease = lease
        self.poll = poll
        self.backoff = backoff
        self.until_idle = until_idle
        self.max_jobs = max_jobs
        self.host = host_name()
        self.id = f"w_{os.uname().nodename}_{os.getpid()}_{os.urandom(3).hex()}"
        self.recycle_after = max(1, recycle_after)  # jobs a job process runs before it is replaced
        self.recycle_memory = recycle_memory  # resident bytes past which a job process is replaced
        self.procs: dict[int, JobProcess] = {}  # the job processes, by pid
        self.metrics_at = (metrics_host, metrics_port) if metrics_port is not None else None
        self.metrics: Any = None  # dal/worker/metrics.py, from run() on when --metrics-port is given
        self.claimed = 0
        self.done = 0  # runs ended here (a job that waited and was resumed ran twice)
        self.jobs: set[int] = set()  # the jobs they were runs of
        self.draining = False
        self.log = WorkerLog(self.id, format=log_format, say=say)
        self._pipe: tuple[int, int] | None = None
        # SQLite: holds the store open, so no job's connection closes last (PostgreSQL has no such cost)
        self._keeper = Keeper(self.store) if self.location.is_file else None
        # job_id -> (lease_epoch, lease_until, monotonic time this worker first saw that lease): a lease
        # is stale only once this worker has seen it unrenewed for a whole lease of its own clock.
        self._leases: dict[int, tuple[int, float, float]] = {}
        self._unrouted: list[tuple[JobProcess, str]] = []  # processes that died with a job while the store refused
        self._trouble = StoreTrouble(poll, self.say, cap=max(poll, min(STORE_WAIT_CAP, lease / 3)),
                                     warn=lambda text: self.say(text, level="warning"))

    def say(self, text: str, *, level: str = "info", **fields: Any) -> None:
        """One line of the worker's log (dal/worker/log.py), with the job's fields when it is about one.
        Text from a script (a blocker, an error message in a note) shows its control characters escaped,
        so that it cannot start a line of its own that reads like the worker's ("dal worker w_...: job 9
        ... → done") or move the terminal's cursor."""
        self.log.line(text, level=level, **fields)

    # -- start and stop ------------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Open the store once (checked, migrated), register, and import what every run uses."""
        from dal.core.liveness import identity
        from dal.receipts.location import open_store

        with open_store(self.location):
            pass
        if self._keeper is not None:
            self._keeper.start()  # SQLite: see dal/worker/keeper.py
        else:  # imported once here, shared with every child (see warm)
            import dal.receipts.pg.jobs  # noqa: F401
            import dal.receipts.pg.lock  # noqa: F401
        warm()
        start, boot = identity(os.getpid())
        now = time.time()
        with self._queue() as q:
            q.register_worker({
                "worker_id": self.id, "host": self.host, "pid": os.getpid(), "pid_start": start, "boot_id": boot,
                "queues": json.dumps(list(self.queues)), "concurrency": self.concurrency, "lease": self.lease,
                "state": "running", "running": 0, "done": 0, "started_at": now, "heartbeat_at": now,
            })

    def run(self) -> int:
        # A stop asked for while the worker starts drains it as well (nothing is claimed yet).
        early = {s: signal.signal(s, self._on_stop) for s in STOP_SIGNALS}
        try:
            if self.metrics_at is not None:  # first: a port that cannot be served records nothing
                from dal.worker.metrics import Metrics

                self.metrics = Metrics(*self.metrics_at)
            self._prepare()
        except BaseException:
            if self.metrics is not None:
                self.metrics.close()
                self.metrics = None
            if self._keeper is not None:
                self._keeper.stop()
            for s, h in early.items():
                signal.signal(s, h)
            raise
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        self._pipe = (r, w)
        old_wakeup = signal.set_wakeup_fd(w)
        handlers = dict(early)
        handlers[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select
        self.say(f"started: queues {', '.join(self.queues)}, concurrency {self.concurrency}, lease {self.lease:g} s, "
                 f"store {self.store}" + (f", metrics on {self.metrics.url}" if self.metrics is not None else ""))
        try:
            self._loop()
        finally:
            for s, h in handlers.items():
                signal.signal(s, h)
            signal.set_wakeup_fd(old_wakeup)
            os.close(r)
            os.close(w)
            self._pipe = None
            if self._waker is not None:
                self._waker.close()
                self._waker = None
            try:
                with self._queue() as q:
                    q.worker_beat(self.id, state="stopped", running=0, done=self.done)
            except StoreError as e:
                self.say(f"could not record that it stopped: {e}")
            self._drop_queue()
            if self._pg is not None:
                self._pg.close()
                self._pg = None
            self._end_processes()
            if self.metrics is not None:
                self.metrics.close()
                self.metrics = None
            if self._keeper is not None:
                self._keeper.stop()
        runs, jobs = self.done, len(self.jobs)
        self.say(f"stopped: {runs} run{'s' if runs != 1 else ''} of {jobs} job{'s' if jobs != 1 else ''}")
        return 0

    def _on_stop(self, signum: int, frame: Any) -> None:
        if not self.draining:
            self.draining = True

    # -- the loop ------------------------------------------------------------------------------------

    def _loop(self) -> None:
        next_beat = next_chores = 0.0
        while True:
            self._read_reports()
            exited = self._unrouted + self._reap()
            self._unrouted = []
            if self.draining:
                for proc in self.procs.values():
                    if not proc.stopped:
                        proc.stopped = True
                        _signal(proc.pid, signal.SIGTERM)
            if self.draining and not self.procs and not exited:
                return
            claimed: list[dict[str, Any]] = []
            idle = False
            refused = False
            wait = 0.0
            try:
                with self._queue() as q:  # closed before any fork below
                    now = time.time()  # this loop's own timers
                    # What is due (scheduled jobs, schedules' slots, backoffs) goes by the store's clock: on
                    # PostgreSQL the database's, so that a worker whose clock runs ahead runs nothing early
                    # and skips no slot.
                    due = q.clock()
                    while exited:
                        self._route_crash(q, *exited[0], due)
                        exited.pop(0)
                    if now >= next_beat:
                        self._beat(q, due)
                        next_beat = now + self.lease / 3
                    if not self.draining:
                        if now >= next_chores:
                            self._chores(q, due)
                            next_chores = now + min(self.poll, 1.0)
                        room = self.concurrency - self._busy()
                        if self.max_jobs is not None:
                            room = min(room, self.max_jobs - self.claimed)
                        if room > 0:  # every job there is room for, in one transaction
                            claimed = q.claim_some(owner=self.id, queues=self.queues, host=self.host,
                                                   lease=self.lease, limit=room, now=due, stale=self._stale(q))
                            self.claimed += len(claimed)
                        idle = not claimed and not self._busy() and self._idle(q, due)
                        if idle and self.until_idle:
                            self._say_next_schedule(q, due)  # it stops now
                    if self.metrics is not None and self.metrics.waiting:  # a scrape: the counts as of now
                        self.metrics.set_counts(q.counts_by_queue())
            except StoreError as e:
                # Waited out below, however soon the next beat falls due: a store that refuses at once (a
                # server that is down, a damaged file) must not be asked again at once.
                self._drop_queue()  # asked again on a fresh connection
                refused = True
                self._unrouted = exited  # routed once the store answers again
                wait = self._trouble.failed(e)
            else:
                self._trouble.ok()
            if self.metrics is not None:
                self._answer_scrapes(refused, claimed)
            if refused and self.draining and not self.procs:
                for proc, _how in self._unrouted:  # a stop must not wait for a store that may never come back
                    assert proc.fence is not None and proc.job is not None
                    self.say(f"job {proc.fence.job_id} ({proc.job['key']}): not routed, the run store refuses; "
                             "once its lease ends another worker takes it over and continues it from its journal",
                             level="warning", job=proc.fence.job_id, key=proc.job["key"], state="running")
                return
            for job in claimed:
                self._start(job)
            if self.draining:
                continue_after = 0.05
            elif idle and (self.until_idle or (self.max_jobs is not None and self.claimed >= self.max_jobs)):
                return
            else:
                continue_after = self.poll  # a job process's report (or its end: SIGCHLD) wakes the loop at once
            if refused:
                self._wait(wait if not self.draining else min(wait, 0.5))
            else:
                self._wait(min(continue_after, max(0.0, next_beat - time.time())))

    def _answer_scrapes(self, refused: bool, claimed: list[dict[str, Any]]) -> None:
        m = self.metrics
        for job in claimed:
            if str(job.get("note") or "").startswith("taken over from"):  # the claim's own note (jobs.py)
                m.takeovers.inc()
        m.refusing.set(1 if refused else 0)
        m.processes.set(len(self.procs))
        m.running.set(self._busy() + len(claimed))
        if m.waiting:
            m.answer()  # while the store refuses: with the counts last read

    def _queue(self) -> Any:
        """A queue on a connection of its own, kept from turn to turn and closed as the worker stops. SQLite's
        (JobQueue.open) is also closed before every fork (_drop_queue: a forked child must not hold a copy of
        a connection) and after the store refused something, and opened again when the store's path names
        another file than the one it was opened on (a restore from a backup): opening and closing it at every
        turn cost the loop a connection, two PRAGMAs and the -shm lock's registration per job. PostgreSQL's
        store reconnects when its connection was lost."""
        if self.location.is_file:
            try:
                st = os.stat(self.store)
                now: tuple[int, int] | None = (st.st_dev, st.st_ino)
            except OSError:
                now = None
            if self._sqlite is not None and (now is None or now != self._sqlite_file):
                self._drop_queue()
            if self._sqlite is None:
                self._sqlite = JobQueue.open(self.store)
                self._sqlite_file = now
            return _Kept(self._sqlite)
        if self._pg is None:
            from dal.receipts.location import open_store

            self._pg = open_store(self.location)
        return self._pg.jobs()

    def _drop_queue(self) -> None:
        """Close the loop's SQLite queue (before a fork, after a refusal, as the worker stops)."""
        q, self._sqlite, self._sqlite_file = self._sqlite, None, None
        if q is not None:
            q.close()

    def _stale(self, q: JobQueue) -> list[tuple[int, int, float]]:
        """The running jobs of other workers whose lease this worker has seen unchanged (not renewed) for a
        whole lease, by its own monotonic clock. A lease's end is a time on its holder's clock; comparing it
        with this worker's wall clock would let a clock stepped (or skewed) ahead take over live jobs."""
        mono = time.monotonic()
        seen: dict[int, tuple[int, float, float]] = {}
        out: list[tuple[int, int, float]] = []
        for job_id, epoch, until, owner in q.running_leases(self.queues, self.host):
            if owner == self.id:
                continue
            prev = self._leases.get(job_id)
            first = prev[2] if prev is not None and prev[:2] == (epoch, until) else mono
            seen[job_id] = (epoch, until, first)
            if mono - first >= self.lease:
                out.append((job_id, epoch, until))
        self._leases = seen
        return out

    def _idle(self, q: JobQueue, now: float) -> bool:
        """Nothing this worker could still do: no job of its queues is ready, scheduled or running."""
        if self.max_jobs is not None and self.claimed >= self.max_jobs:
            return True
        if not self.location.is_file:
            return not q.has_work(self.queues, self.host)
        marks = ", ".join("?" * len(self.queues))
        return not q._read(  # noqa: SLF001 - one question only the worker asks
            "looking for work",
            lambda c: c.execute(
                f"SELECT 1 FROM jobs WHERE state IN ('ready', 'scheduled', 'running') AND queue IN ({marks})"
                " AND (movable = 1 OR host = ?) LIMIT 1", (*self.queues, self.host)).fetchone(),
            None,
        )

    def _say_next_schedule(self, q: JobQueue, now: float) -> None:
        """As --until-idle stops: the next slot of a schedule of its queues, when one is due within
        SCHEDULE_SOON seconds. A schedule is not a job until its slot comes, so it does not keep an idle
        worker running (one every minute would keep it for ever); a person who expected its job to run
        learns why it did not, and what serves it."""
        soon = [r for r in q.schedules(due=now + SCHEDULE_SOON)
                if r.get("queue") in self.queues and (r.get("movable") or r.get("host") == self.host)]
        if soon:
            first = min(soon, key=lambda r: float(r["next_at"]))
            self.say(f"idle: schedule {first['name']} is due in {max(0.0, float(first['next_at']) - now):.0f} s, "
                     "but --until-idle does not wait for a schedule's next slot (a worker without it serves "
                     "schedules)")

    def _wait(self, timeout: float) -> None:
        assert self._pipe is not None
        if timeout > 0:
            watched: list[Any] = [self._pipe[0], *(p.sock for p in self.procs.values() if not p.closed)]
            if self.metrics is not None:
                watched += self.metrics.fds()
            if not self.location.is_file:
                if self._waker is None:
                    from dal.receipts.pg.jobs import Waker

                    self._waker = Waker(self.location.path)
                fd = self._waker.fileno()  # -1 when the server cannot be reached: the poll finds the work
                watched += [fd] if fd >= 0 else []
            try:
                select.select(watched, [], [], timeout)
            except InterruptedError:
                pass
            if self._waker is not None:
                self._waker.drain()
        if self.metrics is not None:
            self.metrics.poll()
        try:
            while os.read(self._pipe[0], 512):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _busy(self) -> int:
        return sum(1 for p in self.procs.values() if p.job is not None)

    def _read_reports(self) -> None:
        for proc in self.procs.values():
            for report in proc.reports():
                self._reported(proc, report)

    def _reported(self, proc: JobProcess, report: dict[str, Any]) -> None:
        """A job process routed its job and is idle again (or ends now: `ending` says why)."""
        if proc.job is None or report.get("idle") != proc.job["job_id"]:
            return
        if self.metrics is not None:
            self.metrics.routed(retry=report.get("retry"), state=report.get("state"), queue=proc.job.get("queue"),
                                duration=report.get("duration"), effects=report.get("effects"))
            if report.get("state") is None and report.get("event") and not proc.lost:
                self.metrics.lease_losses.inc()  # its run was fenced before this loop saw the lease go
        self.jobs.add(proc.job["job_id"])
        proc.job = proc.fence = None
        self.done += 1
        if report.get("ending"):
            proc.retiring = True
            if not proc.stopped and report["ending"] != "stopped":
                self.say(f"job process {proc.pid} ends ({report['ending']}); a new one is forked when one is needed")

    def _reap(self) -> list[tuple[JobProcess, str]]:
        """The job processes that ended: those that held a job, with how they ended (their jobs are routed
        as crashed ones by the caller)."""
        out: list[tuple[JobProcess, str]] = []
        # Each job process by its pid, never waitpid(-1): that would also reap a child some other part of
        # this process started (a probe, a library's subprocess) and leave it an ECHILD.
        for pid in list(self.procs):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, None  # reaped already, by nobody we know of: it ended, how is lost
            if done == 0:
                continue
            proc = self.procs.pop(pid)
            for report in proc.reports():  # what it said before it ended
                self._reported(proc, report)
            proc.close()
            if status is None:
                how = "ended (its exit status was taken by another wait)"
            elif os.WIFSIGNALED(status):
                how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
            elif os.WEXITSTATUS(status) == EXIT_STORE:
                how = "could not reach the run store (its log line says why)"
            elif os.WEXITSTATUS(status) == EXIT_INTERNAL:
                how = "stopped on an internal error in DAL (its log line says where the report is)"
            else:
                how = f"exited with status {os.WEXITSTATUS(status)}"
            if proc.job is not None:
                self.done += 1
                self.jobs.add(proc.job["job_id"])
                out.append((proc, how))
            elif not (proc.stopped or proc.retiring or self.draining) or (
                    status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) != signal.SIGTERM):
                self.say(f"job process {pid} {how} while idle; a new one is forked when one is needed",
                         level="warning")
        return out

    def _route_crash(self, q: JobQueue, proc: JobProcess, how: str, now: float) -> None:
        """A job process that ended without routing its job (its job is still running under its fence)."""
        from dal.worker import routing

        assert proc.fence is not None
        job = q.get(proc.fence.job_id)
        if (job is None or job["state"] != "running" or job["lease_epoch"] != proc.fence.epoch
                or job["lease_owner"] != self.id):
            return  # routed by the process (or taken over, or cancelled)
        route = routing.for_crash(job, how, now, self.backoff)
        to = q.route(proc.fence, route.event, run_at=route.run_at, streak=route.streak, note=route.note, now=now)
        if self.metrics is not None:
            self.metrics.routed(retry="crashed", state=to)
        self.say(f"job {job['job_id']} ({job['key']}): the process running it {how} → {to or 'not ours any more'}",
                 level="warning", job=job["job_id"], key=job["key"], state=to, retry="resume")

    def _beat(self, q: JobQueue, now: float) -> None:
        for proc in self.procs.values():
            if proc.lost or proc.fence is None or proc.job is None:
                continue
            if not q.heartbeat(proc.fence, self.lease, now):
                proc.lost = True
                job = q.get(proc.fence.job_id)
                if job is not None and job["lease_epoch"] == proc.fence.epoch and job["state"] != "cancelled":
                    continue  # the process routed it (its report is on its way)
                why = "cancelled" if job and job["state"] == "cancelled" else "taken over by another worker"
                if self.metrics is not None:
                    self.metrics.lease_losses.inc()
                self.say(f"job {proc.fence.job_id}: lost its lease ({why}); stopping its run", level="warning",
                         job=proc.fence.job_id, key=proc.job["key"], state=job["state"] if job else None)
                if not proc.stopped:  # its run stops at its next step; the process ends once it routed the job
                    proc.stopped = True
                    _signal(proc.pid, signal.SIGTERM)
        q.worker_beat(self.id, state="draining" if self.draining else "running", running=self._busy(),
                      done=self.done, now=now)

    def _chores(self, q: JobQueue, now: float) -> None:
        """Due schedules become jobs; waiting jobs that got a decision are ready again."""
        if q.schedules(due=now):
            from dal.worker.schedules import fire_due

            for job in fire_due(q, now):
                self.say(f"schedule {job['schedule']}: job {job['job_id']} ({job['key']})", job=job["job_id"],
                         key=job["key"], state=job["state"])
        q.sweep_waiting(now)

    # -- the job processes ----------------------------------------------------------------------------

    def _start(self, job: dict[str, Any]) -> None:
        """Hand `job` (claimed) to an idle job process, forking one when none is idle."""
        fence = Fence(job["job_id"], job["lease_epoch"], self.id)
        proc = next((p for p in self.procs.values() if p.idle), None) or self._spawn()
        proc.assign(job, fence)
        if self.draining:  # a stop that came during the claim: the process routes the job as drained
            proc.stopped = True
            _signal(proc.pid, signal.SIGTERM)

    def _spawn(self) -> JobProcess:
        """Fork a job process (dal/worker/jobproc.py) from this warm parent; it never returns here."""
        import socket

        from dal.worker.jobproc import JobProcessMain

        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sys.stdout.flush()
        sys.stderr.flush()
        self._drop_queue()  # no copy of the loop's SQLite connection in the child
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the job process: never returns
            code = EXIT_INTERNAL
            try:
                mine.close()
                self._child_setup()
                code = JobProcessMain(self, theirs, parent).serve()
            except BaseException as e:  # noqa: BLE001 - a job process never returns into the parent's loop
                _quietly(self._internal_error, "a job process", 0, e)
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        theirs.close()
        proc = self.procs[pid] = JobProcess(pid, mine)
        return proc

    def _child_setup(self) -> None:
        """In a job process just forked: let go of what is the parent's."""
        signal.set_wakeup_fd(-1)
        if self._pipe is not None:
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None
        for proc in self.procs.values():  # the other processes' sockets: their EOF must not wait for this one
            proc.close()
        self.procs = {}
        if self.metrics is not None:  # its sockets are the parent's (this copy closes only its descriptors)
            self.metrics.close()
            self.metrics = None
        # The keeper's pipes and a PostgreSQL waker's and loop's connections stay open here, untouched, and referenced
        # (by this copy of the worker) for the process's whole life: closing them, or letting their objects
        # be collected, would close what the parent still uses (a connection's goodbye on its socket) or
        # whatever descriptor later reuses their numbers. A job process ends with its worker.

    def _end_processes(self, patience: float = 30.0) -> None:
        """The worker stops: its idle job processes end (their socket closes: EOF), any still running a job
        stop it as a drain does (SIGTERM); wait for them, at most `patience` seconds."""
        for proc in self.procs.values():
            if proc.job is None:
                proc.close()
            _signal(proc.pid, signal.SIGTERM)
        end = time.monotonic() + patience
        while self.procs and time.monotonic() < end:
            for pid in list(self.procs):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    self.procs.pop(pid).close()
            if self.procs:
                time.sleep(0.01)

    def _internal_error(self, label: str, job_id: int, error: BaseException) -> None:
        """A bug in DAL while a child ran its job: one line in the log, the traceback in a file beside the
        store (SQLite: its .dal/ folder; PostgreSQL: .dal/ of the worker's directory) for the bug report;
        only when no such file can be written does the traceback go to the log, under a header."""
        text = traceback.format_exc()
        folder = (Path(self.store).parent if self.location.is_file else Path.cwd() / ".dal") / "worker-errors"
        path = folder / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-job{job_id}-{os.getpid()}.txt"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(f"dal worker {self.id}: {label}\n{text}", encoding="utf-8")
        except OSError as e:
            if self.log.format == "json":  # the traceback inside the line: every line stays one object
                self.say(f"{label}: internal error in DAL (please report it, with this traceback, which could not "
                         f"be written to {folder}: {e}); the worker routes the job once this process ends\n{text}",
                         level="error", job=job_id)
                return
            self.say(f"{label}: internal error in DAL (please report it, with the traceback below, which could not "
                     f"be written to {folder}: {e}); the worker routes the job once this process ends",
                     level="error", job=job_id)
            sys.stderr.write(text)
            return
        self.say(f"{label}: internal error in DAL ({type(error).__name__}: {error}); please report it, with "
                 f"{path}; the worker routes the job once this process ends", level="error", job=job_id)


# The longest wait between two tries of a store that refuses (never more than a third of the lease: the
# leases of the jobs still running are renewed as soon as it answers again).
STORE_WAIT_CAP = 10.0


class StoreTrouble:
    """The worker's loop while the run store refuses: how long to wait before the next try (the poll, then
    doubling up to `cap`, each wait 20% either way at random, so that workers that failed together do not
    all try again together), and what the log says: the refusal once, "still refusing" at most every
    `remind` seconds, and "back" when a try succeeds again."""

    def __init__(self, poll: float, say: Callable[[str], Any], *, cap: float, remind: float = 60.0,
                 clock: Callable[[], float] = time.time, warn: Callable[[str], Any] | None = None) -> None:
        self.poll = max(poll, 0.05)
        self.cap = max(cap, self.poll)
        self.remind = remind
        self.say = say
        self.warn = warn or say  # the refusals; `say` the store's return
        self.clock = clock
        self.since: float | None = None
        self.tries = 0
        self.told = 0.0
        self.wait = self.poll
        self.last = ""

    def failed(self, error: BaseException) -> float:
        """A try that the store refused: the seconds to wait before the next."""
        now = self.clock()
        message = str(error).rstrip(".")
        if self.since is None:
            self.since, self.tries, self.wait = now, 1, self.poll
            self.warn(f"the run store refused: {message}; trying again in {self.wait:g} s, then less often "
                     f"(up to every {self.cap:g} s) while it refuses")
            self.told, self.last = now, message
        else:
            self.tries += 1
            self.wait = min(self.wait * 2, self.cap)
            if now - self.told >= self.remind:
                changed = f": {message}" if message != self.last else " (the same error)"
                self.warn(f"the run store still refuses, since {_clock_text(self.since)} ({self.tries} tries in "
                         f"{now - self.since:.0f} s){changed}")
                self.told, self.last = now, message
        return self.wait * random.uniform(0.8, 1.2)

    def ok(self) -> None:
        """A try that the store answered."""
        if self.since is not None:
            self.say(f"the run store is back, after {self.clock() - self.since:.1f} s refusing "
                     f"({self.tries} tr{'ies' if self.tries != 1 else 'y'})")
            self.since = None


def _clock_text(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t))


def _quietly(fn: Callable[..., Any], *args: Any) -> None:
    """`fn(*args)` in a child on its way out: a log that cannot be written must not keep it from exiting."""
    try:
        fn(*args)
    except BaseException:  # noqa: BLE001, S110
        pass


def warm() -> None:
    """Import and prepare, once in the parent, what every run of a job uses, so that a forked child starts
    running at once: one real run of a one-effect script in a scratch workspace and store (the parser's
    tables, the compiler, the runner, the shell parser and checker, the executor, the sandbox probe, the
    store's schema and the receipt writers), then a frozen heap shared with every child."""
    import gc
    import shutil
    import tempfile

    import dal.core.outwrite  # noqa: F401 - every child's output
    import dal.receipts.render  # noqa: F401 - routing's next-step text
    import dal.runner.journal  # noqa: F401
    import dal.worker.routing  # noqa: F401
    import dal.worker.takeover  # noqa: F401
    from dal.runner.build import build_spec
    from dal.runner.runner import RunnerError, execute
    from dal.runner.spec import RunHooks

    scratch = Path(tempfile.mkdtemp(prefix="dal-worker-warm-"))
    # The test-only hooks (a crash, a store fault at the Nth write) are for the jobs' runs, not this one.
    hooks = {k: os.environ.pop(k) for k in ("DAL_TEST_CRASH_AT", "DAL_TEST_STORE_FAULT") if k in os.environ}
    try:
        script = scratch / "warm.dal"
        script.write_text('let r = run("true")\nprint(r.ok)\n', encoding="utf-8")
        execute(build_spec(script, workspace=scratch, key="warm", store=scratch / "dal.db"),
                RunHooks(write=lambda text: None, handle_signals=False))
    except (RunnerError, OSError, ValueError):
        pass  # only warming: a real run says what is wrong
    finally:
        os.environ.update(hooks)
        shutil.rmtree(scratch, ignore_errors=True)
    _prctl()  # _die_with, in every child
    gc.collect()
    gc.freeze()  # what the parent built stays shared with every child (copy-on-write)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _die_with(parent: int) -> None:
    """The child gets SIGTERM when the worker that forked it dies (Linux: PR_SET_PDEATHSIG), so that a
    worker killed with kill -9 leaves no run going on unsupervised (its run stops as interrupted)."""
    prctl = _prctl()
    if prctl is None:
        return
    prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up once in the warm parent (warm): looking it up in each child (ctypes.CDLL) cost
    0.3 ms of CPU there, most of it copy-on-write faults of ctypes' objects."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


class _Kept:
    """`with` over a kept queue: the block uses it, and its end leaves it open (Worker._queue)."""

    __slots__ = ("q",)

    def __init__(self, q: JobQueue) -> None:
        self.q = q

    def __enter__(self) -> JobQueue:
        return self.q

    def __exit__(self, *exc: object) -> None:
        pass
