"""A name swapped, as fast as a process can, between a regular file and a symlink to a canary outside the
roots: what a script's program can do to any name in the workspace while DAL reads it on the operator's side.

The swapper is a separate process (not a thread), so that it flips the name while the reader holds the GIL
too; each flip is an atomic rename, so the name always exists and a reader that tests it and then opens it
again sees whichever state the swapper left last."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

CANARY = "CANARY_a7f3e1_outside_the_workspace"

_SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b = sys.argv[1].encode(), sys.argv[2].encode()
print("ready", flush=True)
while True:  # the two names trade places atomically: neither is ever missing
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
"""


def make_canary(outside: Path, text: str = CANARY) -> Path:
    """A file outside every root whose content must never show in DAL's output."""
    outside.mkdir(parents=True, exist_ok=True)
    canary = outside / "secret.txt"
    canary.write_text(text + "\n")
    return canary


@contextmanager
def swapping(path: Path, content: str | None, canary: Path) -> Iterator[None]:
    """While the block runs, `path` flips between what it is now and a symlink to `canary`. `content`: write
    it to `path` first, as a regular file (None: `path` exists already, a file or a folder; for a folder,
    `canary` is best a folder holding a file of the same name as the one read below `path`)."""
    if content is not None:
        path.write_text(content)
    other = path.with_name(path.name + ".swap")
    os.symlink(canary, other)
    proc = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(path), str(other)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(0.01)
        assert proc.poll() is None, "the swapper stopped"
        yield
    finally:
        proc.kill()
        proc.wait()
        if os.path.islink(path):  # put the name back as it was
            os.unlink(path)
            os.rename(other, path)
        else:
            os.unlink(other)


def race(read: Callable[[], object], times: int, pause: float = 0.0,
         until: Callable[[list[object]], bool] | None = None, within: float = 20.0) -> list[object]:
    """`read()` called `times` times; each outcome (its value, or the exception it raised) in a list.
    `pause`: seconds to sleep between calls, so that the swapper gets the CPU on a busy machine even when
    a call is quick (a refusal takes microseconds). `until`: after those calls, go on calling (pausing a
    millisecond between calls) until it says the outcomes are enough — both states of the name met —, for
    at most `within` seconds: a machine too busy to run the swapper meanwhile does not fail the test."""
    out: list[object] = []

    def once() -> None:
        try:
            out.append(read())
        except Exception as e:  # every outcome is inspected by the test
            out.append(e)

    for _ in range(times):
        if pause:
            time.sleep(pause)
        once()
    deadline = time.monotonic() + within
    while until is not None and not until(out) and time.monotonic() < deadline:
        time.sleep(0.001)
        once()
    return out
