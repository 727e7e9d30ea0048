"""`dal worker`: a warm parent that claims jobs and runs each in a child forked from it.

The parent imports DAL once (the runner, the shell parser, the policy, the sandbox probe), then loops:
reap the children that ended (a child that died before routing its job has it routed here), renew the
leases of the jobs its children run (a lease it lost: its child is told to stop), fire due schedules,
wake waiting jobs that got a decision, claim jobs up to its concurrency and fork one child per job.
The parent is one thread, and it closes its store connection before every fork(): a SQLite connection
(and SQLite's per-file lock bookkeeping) must never cross a fork, and fork() in a process with threads is
unsafe; so the leases are renewed from the loop, at a third of the lease.

A child runs the job's specification once under the job's key, with the lease's fence passed down to
the journal, then routes the job by the run's receipt (dal/worker/routing.py) in one transaction guarded
by the same fence, and exits.

SIGTERM, SIGINT or SIGHUP (a closed terminal) drains: no new claims, the children get SIGTERM (their runs
stop as interrupted at the next step, and their jobs go back to ready), and the parent exits 0 once they are
gone.
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

from dal.receipts.jobs import Fence, JobQueue, machine_host
from dal.receipts.location import StoreLocation
from dal.receipts.store import StoreError
from dal.worker.keeper import Keeper
from dal.worker.log import WorkerLog

# What drains the worker (and, in a child before its run begins, stops it): systemd, Ctrl-C, a closed terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# A child that could not reach the run store (to start its run, or to route its job at the end) exits with
# this status (EX_TEMPFAIL); the worker then routes the job itself, once the store answers again.
EXIT_STORE = 75


class Child:
    __slots__ = ("pid", "job", "fence", "stopped", "lost")

    def __init__(self, pid: int, job: dict[str, Any], fence: Fence) -> None:
        self.pid = pid
        self.job = job
        self.fence = fence
        self.stopped = False  # sent SIGTERM (drain, lost lease)
        self.lost = False  # its lease is no longer this worker's


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
    ) -> None:
        # Where the store is: a SQLite file (self.store, a Path) or a PostgreSQL database; the queue and the
        # key locks are opened through it (dal/receipts/location.py, open_store).
        self.location = store if isinstance(store, StoreLocation) else StoreLocation("sqlite", os.fspath(store))
        self.store: Any = self.location.file if self.location.is_file else self.location
        self._waker: Any = None  # PostgreSQL: LISTEN for submits, decisions and requeues between polls
        self.queues = tuple(dict.fromkeys(queues)) or ("default",)
        self.concurrency = max(1, concurrency)
        self.lease = lease
        self.poll = poll
        self.backoff = backoff
        self.until_idle = until_idle
        self.max_jobs = max_jobs
        self.host = machine_host()
        self.id = f"w_{os.uname().nodename}_{os.getpid()}_{os.urandom(3).hex()}"
        self.children: dict[int, Child] = {}
        self.claimed = 0
        self.done = 0
        self.draining = False
        self.log = WorkerLog(self.id, format=log_format, say=say)
        self._pipe: tuple[int, int] | None = None
        # SQLite: holds the store open, so no job's connection closes last (PostgreSQL has no such cost)
        self._keeper = Keeper(self.store) if self.location.is_file else None
        self._stop_asked = False  # (in a child) SIGTERM came before its run began
        # job_id -> (lease_epoch, lease_until, monotonic time this worker first saw that lease): a lease
        # is stale only once this worker has seen it unrenewed for a whole lease of its own clock.
        self._leases: dict[int, tuple[int, float, float]] = {}
        self._unrouted: list[tuple[Child, str]] = []  # children that ended while the store refused
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
        from dal.core.procinfo import identity
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
            self._prepare()
        except BaseException:
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
                 f"store {self.store}")
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
            if self._keeper is not None:
                self._keeper.stop()
        self.say(f"stopped: {self.done} job{'s' if self.done != 1 else ''} run")
        return 0

    def _on_stop(self, signum: int, frame: Any) -> None:
        if not self.draining:
            self.draining = True

    # -- the loop ------------------------------------------------------------------------------------

    def _loop(self) -> None:
        next_beat = next_chores = 0.0
        while True:
            exited = self._unrouted + self._reap()
            self._unrouted = []
            if self.draining:
                for child in self.children.values():
                    if not child.stopped:
                        child.stopped = True
                        _signal(child.pid, signal.SIGTERM)
            if self.draining and not self.children and not exited:
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
                    # and skips no slot (attack10 03).
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
                        room = self.concurrency - len(self.children)
                        if self.max_jobs is not None:
                            room = min(room, self.max_jobs - self.claimed)
                        if room > 0:  # every job there is room for, in one transaction
                            claimed = q.claim_some(owner=self.id, queues=self.queues, host=self.host,
                                                   lease=self.lease, limit=room, now=due, stale=self._stale(q))
                            self.claimed += len(claimed)
                        idle = not claimed and not self.children and self._idle(q, due)
            except StoreError as e:
                # Waited out below, however soon the next beat falls due: a store that refuses at once (a
                # server that is down, a damaged file) must not be asked again at once (attack7 03).
                refused = True
                self._unrouted = exited  # routed once the store answers again
                wait = self._trouble.failed(e)
            else:
                self._trouble.ok()
            if refused and self.draining and not self.children:
                for child, _how in self._unrouted:  # a stop must not wait for a store that may never come back
                    self.say(f"job {child.fence.job_id} ({child.job['key']}): not routed, the run store refuses; "
                             "once its lease ends another worker takes it over and continues it from its journal",
                             level="warning", job=child.fence.job_id, key=child.job["key"], state="running")
                return
            for job in claimed:
                self._fork(job)
            if self.draining:
                continue_after = 0.05
            elif idle and (self.until_idle or (self.max_jobs is not None and self.claimed >= self.max_jobs)):
                return
            else:
                continue_after = self.poll  # a child that ends wakes the loop at once (SIGCHLD)
            if refused:
                self._wait(wait if not self.draining else min(wait, 0.5))
            else:
                self._wait(min(continue_after, max(0.0, next_beat - time.time())))

    def _queue(self) -> Any:
        """A queue on a connection of its own, to close before any fork (SQLite: JobQueue.open; PostgreSQL: a
        store of its own, which the queue closes)."""
        if self.location.is_file:
            return JobQueue.open(self.store)
        from dal.receipts.location import open_store

        return open_store(self.location).jobs(owned=True)

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

    def _wait(self, timeout: float) -> None:
        assert self._pipe is not None
        if timeout > 0:
            watched = [self._pipe[0]]
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
        try:
            while os.read(self._pipe[0], 512):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _reap(self) -> list[tuple[Child, str]]:
        out: list[tuple[Child, str]] = []
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            child = self.children.pop(pid, None)
            if child is None:
                continue
            self.done += 1
            if os.WIFSIGNALED(status):
                how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
            elif os.WEXITSTATUS(status) == EXIT_STORE:
                how = "could not reach the run store (its log line says why)"
            else:
                how = f"exited with status {os.WEXITSTATUS(status)}"
            out.append((child, how))
        return out

    def _route_crash(self, q: JobQueue, child: Child, how: str, now: float) -> None:
        """A child that ended without routing its job (its job is still running under its fence)."""
        from dal.worker import routing

        job = q.get(child.fence.job_id)
        if (job is None or job["state"] != "running" or job["lease_epoch"] != child.fence.epoch
                or job["lease_owner"] != self.id):
            return  # routed by the child (or taken over, or cancelled)
        route = routing.for_crash(job, how, now, self.backoff)
        to = q.route(child.fence, route.event, run_at=route.run_at, streak=route.streak, note=route.note, now=now)
        self.say(f"job {job['job_id']} ({job['key']}): the process running it {how} → {to or 'not ours any more'}",
                 level="warning", job=job["job_id"], key=job["key"], state=to, retry="resume")

    def _beat(self, q: JobQueue, now: float) -> None:
        for child in self.children.values():
            if child.lost:
                continue
            if not q.heartbeat(child.fence, self.lease, now):
                child.lost = True
                job = q.get(child.fence.job_id)
                if job is not None and job["lease_epoch"] == child.fence.epoch and job["state"] != "cancelled":
                    continue  # the child routed it and is exiting
                why = "cancelled" if job and job["state"] == "cancelled" else "taken over by another worker"
                self.say(f"job {child.fence.job_id}: lost its lease ({why}); stopping its run", level="warning",
                         job=child.fence.job_id, key=child.job["key"], state=job["state"] if job else None)
                if not child.stopped:
                    child.stopped = True
                    _signal(child.pid, signal.SIGTERM)
        q.worker_beat(self.id, state="draining" if self.draining else "running", running=len(self.children),
                      done=self.done, now=now)

    def _chores(self, q: JobQueue, now: float) -> None:
        """Due schedules become jobs; waiting jobs that got a decision are ready again."""
        if q.schedules(due=now):
            from dal.worker.schedules import fire_due

            for job in fire_due(q, now):
                self.say(f"schedule {job['schedule']}: job {job['job_id']} ({job['key']})", job=job["job_id"],
                         key=job["key"], state=job["state"])
        q.sweep_waiting(now)

    # -- the child -----------------------------------------------------------------------------------

    def _fork(self, job: dict[str, Any]) -> None:
        fence = Fence(job["job_id"], job["lease_epoch"], self.id)
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 70
            label = f"job {job['job_id']} ({job['key']})"
            try:
                self._child_setup(parent)
                code = self._child(job, fence)
            except StoreError as e:  # opening its queue, the key's takeover wait, --new-attempt's question
                code = EXIT_STORE
                said = (f"{label}: the run store refused before its run began: {str(e).rstrip('.')}; the worker "
                        "routes the job once this process ends")
                _quietly(lambda: self.say(said, level="warning", job=job["job_id"], key=job["key"]))
            except BaseException as e:  # noqa: BLE001 - a child never returns into the parent's loop
                _quietly(self._internal_error, label, job["job_id"], e)
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        self.children[pid] = Child(pid, job, fence)
        if self.draining:
            self.children[pid].stopped = True
            _signal(pid, signal.SIGTERM)

    def _child_setup(self, parent: int) -> None:
        signal.set_wakeup_fd(-1)
        if self._pipe is not None:
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None
        # The keeper's pipes stay open here, untouched (closing them would leave file objects that close
        # whatever descriptor reuses their numbers): the child ends with os._exit, and a keeper outliving
        # its worker for as long as such a child runs is harmless.
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.children = {}
        self._stop_asked = False

        def on_stop(signum: int, frame: Any) -> None:
            self._stop_asked = True

        for s in STOP_SIGNALS:
            signal.signal(s, on_stop)  # until the run begins; the runner installs its own for the run
        _die_with(parent)

    def _child(self, job: dict[str, Any], fence: Fence) -> int:
        # One connection for the job's whole life, open while the run uses its own: the run's store is then
        # never the last connection to close, so SQLite folds its WAL back into the file (a checkpoint and
        # its fsyncs) once per job, when this one closes, not once per connection. The holder is recorded
        # with the run (Store.begin_run's fence): a job cancelled right after its claim runs no effect (its
        # first intent is fenced), and its route below finds it no longer this worker's.
        with self._queue() as q:
            return self._child_run(q, job, fence)

    def _child_run(self, q: JobQueue, job: dict[str, Any], fence: Fence) -> int:
        from dal.runner.runner import RunnerError
        from dal.worker import routing, takeover
        from dal.worker import spec as jobspec

        if job.get("took_over"):
            takeover.wait_for_key(self.store, job, self.lease, self.say)
        now = q.clock()
        route: routing.Route | None = None
        receipt: dict[str, Any] | None = None
        label = f"job {job['job_id']} ({job['key']})"
        try:
            spec = jobspec.check_spec(json.loads(job["spec"]))
        except (ValueError, jobspec.SpecError) as e:
            route = routing.Route("park", note=f"the job's specification cannot be read: {e}")
        if route is None and self._stop_asked:
            route = routing.Route("drain", run_at=now, note="the worker stopped before the run began")
        output = _Prefixed(self.log, job["job_id"], job["key"])
        t0 = time.monotonic()
        if route is None:
            try:
                report = jobspec.run_spec(
                    spec, store=self.store, key=job["key"], fence=fence,
                    new_attempt=_new_attempt(self.store, spec, job["key"]),
                    write=output,
                    notify=lambda text: self.say(f"{label}: note: {text}", job=job["job_id"], key=job["key"]),
                )
            except RunnerError as e:
                route = routing.for_runner_error(str(e), e.exit_code, job, q.clock(), self.backoff)
            except jobspec.SpecError as e:
                route = routing.Route("park", note=f"the job's specification cannot be run: {e}")
            else:
                receipt = report.receipt
                route = routing.for_receipt(receipt, job, q.clock(), self.backoff,
                                            signal_name=report.signal_name, store_problem=report.store_problem)
                if report.error is not None and report.error.kind == "store" and not report.store_problem:
                    route = route._replace(note=f"{route.note}: {report.error.message}")
        if (lost := output.undelivered()) is not None:
            route = route._replace(note=f"{route.note} ({lost})")
        run = None
        fields: dict[str, Any] = {"job": job["job_id"], "key": job["key"]}
        if receipt is not None:
            run = {"run_id": receipt["run_id"], "status": receipt["status"], "retry": receipt["retry"]}
            fields.update(run=receipt["run_id"], retry=receipt["retry"])
        try:
            to = q.route(fence, route.event, run_at=route.run_at, failures=route.failures, streak=route.streak,
                         run=run, waits_on=route.waits_on, note=route.note)
        except StoreError as e:  # a lock held past the busy timeout, a server gone (attack7 02)
            self.say(f"{label}: {route.note}; but the run store refused to route the job: {str(e).rstrip('.')}; "
                     "the worker routes it once this process ends (the next run continues from the journal)",
                     level="warning", state="running", duration=time.monotonic() - t0, **fields)
            return EXIT_STORE
        if to is None:
            self.say(f"{label}: {route.note}; the job is no longer this worker's (taken over or cancelled)",
                     duration=time.monotonic() - t0, **fields)
        else:
            self.say(f"{label}: {route.note} → {to}", state=to, duration=time.monotonic() - t0, **fields)
        return 0

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


def _new_attempt(store: Path | StoreLocation, spec: Any, key: str) -> bool:
    """A job submitted with --new-attempt starts the operation over only while the key's newest run is
    still the one it was submitted after (a resume of that first attempt must not start over again)."""
    if not spec.new_attempt:
        return False
    from dal.receipts.location import StoreLocation, open_store

    where = store if isinstance(store, StoreLocation) else StoreLocation("sqlite", os.fspath(store))
    with open_store(where, readonly=True) as s:
        newest = s.newest_run_of_key(key)
    return (newest["run_id"] if newest else None) == spec.extensions.get("new_attempt_of")


class _Prefixed:
    """The script's output on the worker's stdout, line by line, as the log's format shows it (text: each line
    after `[job N] `, its control characters escaped). A stdout nobody reads any more (a log pipe that went
    away) loses the output, not the run (dal.core.outwrite)."""

    def __init__(self, log: WorkerLog, job: int, key: str) -> None:
        from dal.core.outwrite import StreamWriter

        self.log = log
        self.job = job
        self.key = key
        self.pending = ""
        self.out = StreamWriter(log.out, flush=True)

    def __call__(self, text: str) -> None:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        if lines:
            self.out(self.log.output_lines(self.job, self.key, lines))

    def undelivered(self) -> str | None:
        return self.out.undelivered()


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
