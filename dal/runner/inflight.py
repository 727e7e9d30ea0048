"""The runs this process is executing, in whatever thread, so that a host that runs scripts off its main
thread can stop them as SIGTERM stops `dal run`: the runner's own signal handlers work in the main thread
only (Python delivers signals there), and `dal mcp` runs each tool call in a worker thread.

`interrupt_all` asks each live run to stop at its next step (`Runtime.interrupt` is thread-safe): the
command under way gets its grace (DAL_STOP_GRACE), the run ends `interrupted` with its receipt, resumable."""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_live: dict[int, Any] = {}  # id(runtime) -> the Runtime of a run between its start and its end


def started(rt: Any) -> None:
    with _lock:
        _live[id(rt)] = rt


def ended(rt: Any) -> None:
    with _lock:
        _live.pop(id(rt), None)


def interrupt_all(reason: str) -> int:
    """Ask every run this process is executing to stop at its next step; how many there were."""
    with _lock:
        live = list(_live.values())
    for rt in live:
        rt.interrupt(reason)
    return len(live)
