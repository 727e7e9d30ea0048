"""Pause Python's cyclic garbage collector while a script's tree and code are built.

Parsing, resolving and compiling allocate millions of long-lived objects and almost no cyclic
garbage (what they discard, refcounting frees). The collector still walks the growing heap again and
again: with it on, parsing 200,000 lines took twice as long as with it off, and the cost per line
grew with the script's size. It is off only while that work runs and back on after it, as it was.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

_lock = threading.Lock()
_active = 0  # pauses in progress, in any thread
_resume = False  # whether the collector was on when the first of them began
# Set by a `dal` command that builds one script and exits (dal/cli/main.py): what was built is then
# left frozen, out of every later collection, for the rest of the process. A process that goes on
# (the API, the REPL) cannot: frozen objects are never collected.
keep_frozen = False
# Set by pause_start(): the collector has been off since the `dal` process began, until the first pause
# ends (the parse of a one-shot command's script) or the command starts (end_start).
_starting = False


def pause_start() -> None:
    """The collector off while a `dal` process imports and builds its command: a cold start imports a
    hundred modules, allocating much and freeing little, and the collector walked that growing heap over
    and over (some 8% of a cold `dal run`)."""
    global _starting
    with _lock:
        if _active == 0 and gc.isenabled():
            gc.disable()
            _starting = True


def end_start() -> None:
    """The command starts: the collector back on, unless a pause is under way (its end turns it on)."""
    global _starting
    with _lock:
        if _starting and _active == 0:
            _starting = False
            gc.enable()


class gc_paused:  # noqa: N801 - used as a context manager, like contextlib's
    """`with gc_paused(): ...` runs the block with the collector off; nested and concurrent uses
    (the REPL, the API in several threads) turn it back on when the last one ends."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _active, _resume, _starting
        with _lock:
            if _active == 0:
                _resume, _starting = gc.isenabled() or _starting, False
                gc.disable()
            _active += 1

    def __exit__(self, *exc: Any) -> None:
        global _active
        with _lock:
            _active -= 1
            if _active == 0 and _resume:
                if keep_frozen:
                    # A one-shot command freezes what was built for good: the compiled script is full
                    # of reference cycles, and every full collection while it runs, and the one at
                    # exit, walked all of it. (Moving it to the oldest generation in any process, by
                    # freezing and unfreezing, kept a finished script's values alive until the next
                    # full collection: a process running scripts one after another grew to gigabytes.)
                    gc.freeze()
                gc.enable()
