"""The worker's side of its job processes: each runs many jobs, one at a time, and talks to the worker over
a socket pair made before the fork.

The worker hands an idle process a job (the claimed row); the process runs it, routes it itself (in one
transaction guarded by the lease's fence, as before), and reports that it is idle again. A process that
dies while it holds a job (kill -9, the OOM killer, a crash of DAL) takes only that job with it: the worker
reaps it, routes the job as a crashed one (its next run continues from the journal) and forks a new
process when it next needs one. A process is replaced too once it ran `recycle_after` jobs, or when its
resident memory passed `recycle_memory` after a job (as Celery's prefork pool and gunicorn recycle theirs):
what a long-lived interpreter keeps (a fragmented heap, a cache grown large) is given back.

Messages are a 4-byte length and a pickle: both ends are the same program, forked from one parent, and no
one else has the sockets (they are made by socketpair, never bound to a name).
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
from typing import Any

from dal.core import defaults
from dal.receipts.jobs import Fence

_HEADER = struct.Struct("!I")
_MAX_MESSAGE = 64 << 20  # a job's row with its spec is a few kilobytes; anything this large is a broken peer

RECYCLE_AFTER = defaults.WORKER_RECYCLE_AFTER  # jobs a job process runs before it is replaced (--recycle-after)
RECYCLE_MEMORY = defaults.WORKER_RECYCLE_MEMORY  # resident bytes past which it is replaced (--recycle-memory)


def send(sock: socket.socket, message: Any) -> None:
    """One message (OSError when the other end is gone)."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(data)) + data)


def receive(sock: socket.socket) -> Any:
    """The next message, waiting for it; None when the other end closed (or broke) the connection."""
    head = _exactly(sock, _HEADER.size)
    if head is None:
        return None
    (size,) = _HEADER.unpack(head)
    if size > _MAX_MESSAGE:
        return None
    body = _exactly(sock, size)
    return None if body is None else pickle.loads(body)  # noqa: S301 - our own fork's peer, see the module doc


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            got = sock.recv(n - len(buf))
        except OSError:
            return None
        if not got:
            return None
        buf += got
    return bytes(buf)


class JobProcess:
    """One job process as the worker sees it: its pid, its socket, and the job it runs (None: idle)."""

    __slots__ = ("pid", "sock", "_buf", "job", "fence", "stopped", "lost", "retiring", "jobs", "closed")

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self._buf = bytearray()
        self.job: dict[str, Any] | None = None
        self.fence: Fence | None = None
        self.stopped = False  # sent SIGTERM (drain, lost lease): it ends after its job, if it has one
        self.lost = False  # the lease of its job is no longer this worker's
        self.retiring = False  # it said it ends after this job (recycled)
        self.jobs = 0  # jobs handed to it
        self.closed = False  # its end of the socket pair reported EOF

    @property
    def idle(self) -> bool:
        """Free for a new job: no job, not told to stop, not about to retire, still connected."""
        return self.job is None and not (self.stopped or self.retiring or self.closed)

    def assign(self, job: dict[str, Any], fence: Fence) -> None:
        """Hand it `job`. A process that died meanwhile fails to take it: it is reaped with the job, which is
        then routed as the crashed process's."""
        self.job, self.fence, self.lost = job, fence, False
        self.jobs += 1
        try:
            send(self.sock, job)
        except OSError:
            self.closed = True

    def reports(self) -> list[dict[str, Any]]:
        """The reports it sent since the last call (read without waiting)."""
        out: list[dict[str, Any]] = []
        while not self.closed:
            try:
                got = self.sock.recv(65536, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                got = b""
            if not got:
                self.closed = True
                break
            self._buf += got
        while len(self._buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buf)
            if len(self._buf) < _HEADER.size + size:
                break
            body = bytes(self._buf[_HEADER.size:_HEADER.size + size])
            del self._buf[:_HEADER.size + size]
            out.append(pickle.loads(body))  # noqa: S301 - see the module doc
        return out

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def resident_bytes() -> int:
    """This process's resident memory (Linux: /proc/self/statm), 0 when it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
