"""A job process: forked from the warm worker, it runs one job after another until it is told to stop, its
worker goes away, or it is recycled (dal/worker/pool.py).

It keeps what does not change between jobs: one connection to the run store, lent to every run
(RunHooks.store) and used to route each job; the checked scripts, by their text's digest (RunHooks.check);
and the jobs' specifications with their policies, by the stored text. Each job is run as before: the job's
spec once under the job's key, with the lease's fence passed down to the journal, then routed by the run's
receipt (dal/worker/routing.py) in one transaction guarded by the same fence; then the process tells the
worker it is idle again.

Between jobs it waits for the next on its socket; SIGTERM, SIGINT or SIGHUP then ends it at once. During a
job the runner takes those signals (the run stops as interrupted at its next step) and the process ends
once it has routed that job. It also ends with its worker: SIGTERM from the kernel when the worker dies
(PR_SET_PDEATHSIG), or the socket closing.

A job the process cannot finish routing ends the process with EXIT_STORE (the store refused) or 70 (a
bug in DAL): the worker routes that job as a crashed one once it has reaped the process.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from dal.receipts.jobs import Fence
from dal.receipts.store import StoreError
from dal.worker import pool

if TYPE_CHECKING:
    from dal.worker.worker import Worker

# A child that could not reach the run store (to start its run, or to route its job at the end) exits with
# this status (EX_TEMPFAIL); the worker then routes the job itself, once the store answers again.
EXIT_STORE = 75
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in DAL while it ran a job (its traceback is in a file)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CACHED = 64  # checked scripts and job specifications kept (least recently used ones go first)


class Cache:
    """At most `size` values by key, the least recently used one dropped first."""

    def __init__(self, size: int = CACHED) -> None:
        self.size = size
        self.items: OrderedDict[Any, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Any, make: Any) -> Any:
        if key in self.items:
            self.items.move_to_end(key)
            self.hits += 1
            return self.items[key]
        self.misses += 1
        value = self.items[key] = make()
        if len(self.items) > self.size:
            self.items.popitem(last=False)
        return value


class JobProcessMain:
    """The job process's loop (`serve`), forked from `worker`, with `sock` its end of the socket pair."""

    def __init__(self, worker: Worker, sock: socket.socket, parent: int) -> None:
        self.w = worker
        self.sock = sock
        self.parent = parent
        self.stop = False  # a stop signal came (or the run was stopped by one): end after this job
        self.store: Any = None  # the run store, opened at the first job, lent to every run
        self._file: tuple[int, int, int] | None = None  # a SQLite store's file as it was opened (_file_id)
        self.scripts = Cache()  # (sha256 of the text, filename) -> Checked
        self.specs = Cache()  # sha256 of the stored spec's text -> RunSpec (its Policy inside)
        self.ran = 0
        self.out: Any = None  # the stdout writer every job's output goes through (dal.core.outwrite)
        self.last: dict[str, Any] = {}  # what the worker's metrics take from the job just routed
        self._wake: tuple[int, int] | None = None

    # -- set-up and the loop ------------------------------------------------------------------------

    def setup(self) -> None:
        from dal.core.outwrite import StreamWriter
        from dal.worker.worker import _die_with

        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        self._wake = (r, w)
        signal.set_wakeup_fd(w)  # a stop signal wakes the wait between jobs

        def on_stop(signum: int, frame: Any) -> None:
            self.stop = True

        for s in STOP_SIGNALS:
            signal.signal(s, on_stop)  # between jobs and before a run begins; the runner takes them during it
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _die_with(self.parent)
        self.out = StreamWriter(self.w.log.out, flush=True)

    def serve(self) -> int:
        """Run jobs until told to stop: the process's exit status."""
        self.setup()
        while True:
            job = self._next_job()
            if job is None:
                self._close()
                return 0
            code, troubled = self._one(job)
            if code != 0:
                return code  # the worker routes the job once it has reaped this process
            self.ran += 1
            ending = self._ending(troubled)
            try:
                pool.send(self.sock, {"idle": job["job_id"], "ending": ending, **self.last})
            except OSError:
                ending = "the worker is gone"
            if ending:
                self._close()
                return 0

    def _ending(self, troubled: bool) -> str | None:
        """Why this process ends after the job it just routed, or None when it goes on."""
        if self.stop:
            return "stopped"
        if troubled:
            return "the run store refused during its last job: a new process opens it afresh"
        if self.ran >= self.w.recycle_after:
            return f"recycled after {self.ran} jobs"
        if (rss := pool.resident_bytes()) > self.w.recycle_memory:
            return f"recycled: its resident memory is {rss >> 20} MiB, more than {self.w.recycle_memory >> 20} MiB"
        return None

    def _next_job(self) -> dict[str, Any] | None:
        """The next job the worker hands over, None when this process is to end."""
        assert self._wake is not None
        while True:
            try:  # once stopped, only a job already sent is taken (and routed as drained, see _run)
                ready, _, _ = select.select([self.sock, self._wake[0]], [], [], 0 if self.stop else None)
            except InterruptedError:
                continue
            try:
                while os.read(self._wake[0], 512):
                    pass
            except (BlockingIOError, InterruptedError):
                pass
            if self.sock in ready:
                return pool.receive(self.sock)  # None: the worker closed its end (or died)
            if self.stop:
                return None

    def _close(self) -> None:
        if self.store is not None:
            try:
                self.store.close()
            except StoreError:
                pass
            self.store = None

    # -- one job -------------------------------------------------------------------------------------

    def _one(self, job: dict[str, Any]) -> tuple[int, bool]:
        """Run and route one job: (exit status, whether this process should end after it). A status other
        than 0 ends the process with the job unrouted (see the module doc)."""
        from dal.worker.worker import _quietly

        self.last = {}
        label = f"job {job['job_id']} ({job['key']})"
        fence = Fence(job["job_id"], job["lease_epoch"], self.w.id)
        try:
            return self._run(job, fence)
        except StoreError as e:  # opening the store, the key's takeover wait, --new-attempt's question
            said = (f"{label}: the run store refused before its run began: {str(e).rstrip('.')}; the worker "
                    "routes the job once this process ends")
            _quietly(lambda: self.w.say(said, level="warning", job=job["job_id"], key=job["key"]))
            return EXIT_STORE, True
        except BaseException as e:  # noqa: BLE001 - a job process never returns into the worker's loop
            _quietly(self.w._internal_error, label, job["job_id"], e)  # noqa: SLF001 - the worker's report
            return EXIT_INTERNAL, True

    def _open_store(self) -> Any:
        """The store this process lends its runs, opened (again) with every check of an open when there is
        none yet or `_reopen` says so."""
        if self.store is not None and self._reopen():
            self._close()
        if self.store is None:
            from dal.receipts.location import open_store

            store = open_store(self.w.location)
            store.set_synchronous("NORMAL")  # as a run sets it: every commit survives kill -9
            self.store = store
            self._file = _file_id(self.w.location) if self.w.location.is_file else None
        return self.store

    def _reopen(self) -> bool:
        """Whether a SQLite store must be opened again before the next job: its file was replaced since
        (a restore from a backup: the open connection would journal into the old, unlinked file), or it is
        small enough that every open runs PRAGMA integrity_check (dal/receipts/store.py), as the job's run
        would have had it if it opened the store itself (docs/durability.md)."""
        if not self.w.location.is_file:
            return False
        from dal.receipts.store import FULL_CHECK_ALWAYS

        now = _file_id(self.w.location)
        return now is None or self._file is None or now[:2] != self._file[:2] or now[2] <= FULL_CHECK_ALWAYS

    def _check(self, source: str, filename: str) -> Any:
        """dal.eval.interpreter.check_source, answered from the scripts checked before when the text and its
        name are the same (a script that does not check is checked again each time: it is rare, and its
        errors are the run's to report as they are)."""
        from dal.eval.interpreter import check_source

        key = (hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest(), filename)
        if key in self.scripts.items:
            return self.scripts.get(key, None), []
        checked, errors = check_source(source, filename)
        if checked is not None:
            self.scripts.get(key, lambda: checked)
        return checked, errors

    def _spec(self, text: str) -> Any:
        from dal.worker import spec as jobspec

        return self.specs.get(hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
                              lambda: jobspec.check_spec(json.loads(text)))

    def _run(self, job: dict[str, Any], fence: Fence) -> tuple[int, bool]:
        from dal.runner.runner import RunnerError
        from dal.worker import routing, takeover
        from dal.worker import spec as jobspec

        w = self.w
        t0 = time.monotonic()
        if job.get("took_over"):
            takeover.wait_for_key(w.store, job, w.lease, w.say)
        store = self._open_store()
        q = store.jobs()
        now = q.clock()
        route: routing.Route | None = None
        receipt: dict[str, Any] | None = None
        report: Any = None
        troubled = False  # the store refused something: this process ends after the job (a fresh connection)
        label = f"job {job['job_id']} ({job['key']})"
        try:
            spec = self._spec(job["spec"]) if isinstance(job["spec"], str) else jobspec.check_spec(job["spec"])
        except (ValueError, jobspec.SpecError) as e:
            route = routing.Route("park", note=f"the job's specification cannot be read: {e}")
        if route is None and self.stop:
            route = routing.Route("drain", run_at=now, note="the worker stopped before the run began")
        output = _JobOutput(self, job["job_id"], job["key"])
        if route is None:
            try:
                report = jobspec.run_spec(
                    spec, store=w.store, key=job["key"], fence=fence,
                    new_attempt=_new_attempt(store, spec, job["key"]),
                    write=output,
                    notify=lambda text: w.say(f"{label}: note: {text}", job=job["job_id"], key=job["key"]),
                    lent=store, check=self._check,
                )
            except RunnerError as e:
                # The runner turns a StoreError into a RunnerError inside its except clause: the store refused.
                troubled = isinstance(e.__context__, StoreError)
                route = routing.for_runner_error(str(e), e.exit_code, job, q.clock(), w.backoff, store_fault=troubled)
            except jobspec.SpecError as e:
                route = routing.Route("park", note=f"the job's specification cannot be run: {e}")
            else:
                receipt = report.receipt
                said = report.error.message if report.error is not None and report.error.kind == "store" else None
                # Fenced (cancelled, taken over) is an error of kind store too, but not the store's refusal.
                fault = said if said is not None and _still_ours(q, fence) else None
                route = routing.for_receipt(receipt, job, q.clock(), w.backoff, signal_name=report.signal_name,
                                            store_problem=report.store_problem, store_fault=fault)
                if said is not None and fault is None:
                    route = route._replace(note=f"{route.note}: {said}")
                troubled = bool(report.store_problem or fault)
                if report.signal_name in ("SIGTERM", "SIGINT", "SIGHUP"):
                    self.stop = True  # told to stop while the run went on: this process ends after routing
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
        except StoreError as e:  # a lock held past the busy timeout, a server gone
            w.say(f"{label}: the run store refused to record where the job goes ({str(e).rstrip('.')}); the "
                  "worker routes it once this process ends (the next run continues from the journal). What was "
                  f"to be recorded: {route.note}",
                  level="warning", state="running", duration=time.monotonic() - t0, **fields)
            return EXIT_STORE, True
        took = time.monotonic() - t0
        if to is None:
            w.say(f"{label}: {route.note}; the job is no longer this worker's (taken over or cancelled)",
                  duration=took, **fields)
        else:
            w.say(f"{label}: {route.note} → {to}", state=to, duration=took, **fields)
        self.last = {"state": to, "event": route.event, "retry": receipt["retry"] if receipt else None,
                     "queue": job.get("queue"), "duration": took, "effects": _effect_seconds(receipt)}
        return 0, troubled


def _still_ours(q: Any, fence: Fence) -> bool:
    """Whether the job is still running under `fence` (a run stopped by its fence has an error of kind
    `store` too, but the store did not refuse)."""
    job = q.get(fence.job_id)
    return (job is not None and job["state"] == "running" and job["lease_epoch"] == fence.epoch
            and job["lease_owner"] == fence.owner)


def _file_id(location: Any) -> tuple[int, int, int] | None:
    """A SQLite store file's device, inode, and size with its WAL's; None when it cannot be read."""
    from dal.receipts import storefile

    try:
        st = os.stat(location.file)
    except OSError:
        return None
    try:
        wal = os.stat(storefile.wal_path(location.file)).st_size
    except OSError:
        wal = 0
    return st.st_dev, st.st_ino, st.st_size + wal


def _effect_seconds(receipt: dict[str, Any] | None) -> list[float]:
    """The duration of each effect the run executed, in seconds (for the worker's metrics)."""
    out: list[float] = []
    for item in ((receipt or {}).get("effects") or {}).get("items") or []:
        ms = item.get("duration_ms")
        if isinstance(ms, int | float) and not item.get("replayed"):
            out.append(ms / 1000)
    return out


def _new_attempt(store: Any, spec: Any, key: str) -> bool:
    """A job submitted with --new-attempt starts the operation over only while the key's newest run is
    still the one it was submitted after (a resume of that first attempt must not start over again)."""
    if not spec.new_attempt:
        return False
    newest = store.newest_run_of_key(key)
    return (newest["run_id"] if newest else None) == spec.extensions.get("new_attempt_of")


class _JobOutput:
    """One job's output on the worker's stdout, line by line, as the log's format shows it (text: each line
    after `[job N] `, its control characters escaped). It goes through the process's one writer: a stdout
    nobody reads any more (a log pipe that went away) loses the output, not the run (dal.core.outwrite),
    and that job's receipt and log line say how much of its own output was dropped."""

    def __init__(self, proc: JobProcessMain, job: int, key: str) -> None:
        self.log = proc.w.log
        self.out = proc.out
        self.job = job
        self.key = key
        self.pending = ""
        self.lost0 = self.out.lost
        self.delivered0 = self.out.delivered

    def __call__(self, text: str) -> None:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        if lines:
            self.out(self.log.output_lines(self.job, self.key, lines))

    def undelivered(self) -> str | None:
        lost = self.out.lost - self.lost0
        if not lost:
            return None
        return (f"the script's output could not be delivered ({self.out.why}) after "
                f"{self.out.delivered - self.delivered0} characters: {lost} characters were dropped; the run went on")


