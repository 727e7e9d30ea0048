"""`dal worker --metrics-port PORT`: the worker's metrics for Prometheus, from prometheus-client (the optional
extra `metrics`, imported only here, only when the flag is given).

The metrics are served from the worker's own loop, not from a thread: the worker forks its job processes,
and fork() in a process with threads is unsafe. The listening socket and its connections are watched by the
loop's select() beside everything else; a request is read without blocking, answered with the current
metrics (after the job counts are read in the loop's next store transaction), and the connection closed.
A client that sends nothing, or too much, is dropped after a few seconds or kilobytes: no scrape can hold
the loop (and with it the leases it renews).

    dal_worker_jobs{state, queue}               gauge: jobs in the store, as of the scrape (every worker's are
                                                the same numbers: aggregate with max, not sum)
    dal_worker_run_seconds{queue}               histogram: a job's attempt, from its hand-over to its routing
    dal_worker_effect_seconds                   histogram: each effect its runs executed (replays not counted)
    dal_worker_outcomes_total{retry, state}     counter: attempts by the run's retry class (`crashed`: its
                                                process died; `not_started`: no run) and the state they left
                                                the job in (`lost`: no longer this worker's)
    dal_worker_lease_losses_total               counter: jobs whose lease this worker lost while it ran them
    dal_worker_takeovers_total                  counter: jobs it took over from a worker whose lease ran out
    dal_worker_job_processes, dal_worker_jobs_running   gauges: job processes alive, and those running a job
    dal_worker_store_refusing                   gauge: 1 while the run store refuses the worker's loop
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

MAX_REQUEST = 8192  # bytes of a request's head: a scrape's is a few hundred
REQUEST_PATIENCE = 5.0  # seconds a connection may take to send its request
MAX_CONNECTIONS = 16  # open at once; more are closed at once


class MetricsUnavailable(Exception):
    """prometheus-client is not installed, or the port cannot be listened on."""


class _Conn:
    __slots__ = ("sock", "buf", "since", "ready", "head")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.since = now
        self.ready = False  # its request has been read: it waits for the answer
        self.head = False  # a HEAD request: no body


class Metrics:
    """The worker's metrics and the socket they are served on (`host`:`port`; port 0: one the system picks)."""

    def __init__(self, host: str, port: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        try:
            import prometheus_client as pc
        except ImportError:
            from dal.core.extras import install_hint

            raise MetricsUnavailable(f"--metrics-port needs prometheus-client: {install_hint('metrics')} "
                                     "(or `pip install prometheus-client` in DAL's environment)") from None
        self._pc = pc
        self.clock = clock
        if hasattr(pc, "disable_created_metrics"):  # 0.18 on: no `_created` series beside every counter
            pc.disable_created_metrics()
        r = self.registry = pc.CollectorRegistry()
        pc.ProcessCollector(registry=r)  # the worker's own CPU, memory and descriptors
        self.jobs = pc.Gauge("dal_worker_jobs", "Jobs in the run store, by state and queue", ["state", "queue"],
                             registry=r)
        self.runs = pc.Histogram("dal_worker_run_seconds", "A job's attempt, from its hand-over to its routing",
                                 ["queue"], registry=r,
                                 buckets=(0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600))
        self.effects = pc.Histogram("dal_worker_effect_seconds", "Each effect the worker's runs executed",
                                    registry=r, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                                                         30, 60, 300))
        self.outcomes = pc.Counter("dal_worker_outcomes", "Attempts by retry class and the state they left the job in",
                                   ["retry", "state"], registry=r)
        self.lease_losses = pc.Counter("dal_worker_lease_losses", "Jobs whose lease this worker lost while it ran "
                                       "them", registry=r)
        self.takeovers = pc.Counter("dal_worker_takeovers", "Jobs taken over from a worker whose lease ran out",
                                    registry=r)
        self.processes = pc.Gauge("dal_worker_job_processes", "Job processes alive", registry=r)
        self.running = pc.Gauge("dal_worker_jobs_running", "Job processes running a job", registry=r)
        self.refusing = pc.Gauge("dal_worker_store_refusing", "1 while the run store refuses the worker's loop",
                                 registry=r)
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self.listener = socket.socket(family, socket.SOCK_STREAM)
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.listener.bind((host, port))
            self.listener.listen(MAX_CONNECTIONS)
        except OSError as e:
            raise MetricsUnavailable(f"cannot serve metrics on {host}:{port}: {e.strerror or e}") from None
        self.listener.setblocking(False)
        self.host = host
        self.port = self.listener.getsockname()[1]
        self.conns: list[_Conn] = []

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    # -- what the worker tells it ---------------------------------------------------------------------

    def routed(self, *, retry: str | None, state: str | None, queue: str | None = None,
               duration: float | None = None, effects: list[float] | None = None) -> None:
        self.outcomes.labels(retry or "not_started", state or "lost").inc()
        if duration is not None:
            self.runs.labels(queue or "default").observe(duration)
        for seconds in effects or ():
            self.effects.observe(seconds)

    def set_counts(self, counts: dict[tuple[str, str], int]) -> None:
        self.jobs.clear()  # a state or queue with no job left shows no series, not a stale number
        for (state, queue), n in counts.items():
            self.jobs.labels(state, queue).set(n)

    # -- serving --------------------------------------------------------------------------------------

    def fds(self) -> list[socket.socket]:
        """What the loop's select() watches for this."""
        return [self.listener, *(c.sock for c in self.conns if not c.ready)]

    @property
    def waiting(self) -> bool:
        """A request has been read and waits for its answer (the loop reads the job counts first)."""
        return any(c.ready for c in self.conns)

    def poll(self) -> None:
        """Accept what connected and read what was sent, without waiting; drop the slow and the oversized."""
        now = self.clock()
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            if len(self.conns) >= MAX_CONNECTIONS:
                sock.close()
                continue
            sock.setblocking(False)
            self.conns.append(_Conn(sock, now))
        for c in list(self.conns):
            if c.ready:
                continue
            try:
                got = c.sock.recv(MAX_REQUEST)
            except (BlockingIOError, InterruptedError):
                got = None
            except OSError:
                got = b""
            if got == b"":
                self._drop(c)
                continue
            if got:
                c.buf += got
            if b"\r\n\r\n" in c.buf or b"\n\n" in c.buf:
                c.ready = True
            elif len(c.buf) > MAX_REQUEST or now - c.since > REQUEST_PATIENCE:
                self._drop(c)

    def answer(self) -> None:
        """Answer every request read: the metrics for GET (or HEAD) of /metrics or /, 404 for anything else."""
        body: bytes | None = None
        for c in [c for c in self.conns if c.ready]:
            line = bytes(c.buf.split(b"\n", 1)[0]).decode("latin-1").split()
            method, path = (line + ["", ""])[:2]
            if method not in ("GET", "HEAD"):
                reply = _response(405, b"only GET\n", "text/plain")
            elif path.split("?", 1)[0] not in ("/metrics", "/"):
                reply = _response(404, b"not found: the metrics are at /metrics\n", "text/plain")
            else:
                if body is None:
                    body = self._pc.generate_latest(self.registry)
                reply = _response(200, body, self._pc.CONTENT_TYPE_LATEST, head=method == "HEAD")
            try:
                c.sock.settimeout(1.0)  # a few kilobytes: the socket's buffer takes them at once
                c.sock.sendall(reply)
            except OSError:
                pass
            self._drop(c)

    def _drop(self, c: _Conn) -> None:
        try:
            c.sock.close()
        except OSError:
            pass
        self.conns.remove(c)

    def close(self) -> None:
        for c in list(self.conns):
            self._drop(c)
        try:
            self.listener.close()
        except OSError:
            pass


def _response(status: int, body: bytes, content_type: str, *, head: bool = False) -> bytes:
    reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}[status]
    head_text = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                 "Connection: close\r\n\r\n")
    return head_text.encode("latin-1") + (b"" if head else body)
