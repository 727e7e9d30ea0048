"""A process that keeps the run store open for as long as its worker runs.

In WAL mode the last connection to close a database folds the whole WAL back into the file and removes
it: a checkpoint, with an fsync of the WAL and one of the file. A worker cannot hold a connection of its
own across fork(), so without a keeper every job's child closed the last connection at its end, and each
job paid a checkpoint (about a third of a one-effect job's store time). The keeper is a small separate
process (started with exec, not forked from the worker's heap) that opens the store, reads it once so
that it holds the WAL index, and then waits; no job's connection is ever the last. The WAL is folded
back as SQLite always does it besides: when a commit takes it past its autocheckpoint size (1,000 pages),
and when the keeper's own connection closes last as the worker stops. Nothing about durability changes:
a checkpoint moves committed pages from one file to the other.

The keeper reads its stdin until the worker closes its end (the worker stops, or dies: the kernel closes
its descriptors, once the children that inherited them have ended too) and also dies with the worker
(PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_KEEPER = """
import ctypes, os, signal, sqlite3, sys
try:
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)  # for the worker, which drains, then closes our stdin
if os.getppid() != int(sys.argv[2]):
    sys.exit(0)  # the worker died before prctl took effect
conn = sqlite3.connect("file:" + sys.argv[1], uri=True, timeout=30)  # never writes; closes last, folding the WAL
conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # maps the WAL index: the store is held open
sys.stdout.write("open\\n")
sys.stdout.flush()
sys.stdin.buffer.read()
conn.close()
"""


class Keeper:
    """The keeper of one worker; start() once the store has been vetted, stop() as the worker ends."""

    def __init__(self, store: Path) -> None:
        self.store = Path(store)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> bool:
        """Start the keeper and wait until it holds the store; False when it could not (the worker runs on
        without one: each job then pays its checkpoint)."""
        from urllib.parse import quote

        path = quote(self.store.resolve().as_posix())
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-S", "-c", _KEEPER, path, str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            )
        except OSError:
            self.proc = None
            return False
        assert self.proc.stdout is not None
        if self.proc.stdout.readline() != b"open\n":
            self.stop()
            return False
        return True

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # EOF: its connection closes (the last one: the WAL is folded back)
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
