"""The writer of a job's output to the worker's stdout, a stream the run does not own (a log pipe).

A reader that goes away (a log pipe or journald stream that closes) must not fail the job's run (`dal
run x | head -1` is the CLI's own case: it stops quietly as SIGPIPE, dal/cli/run_cmd.py): the output is
lost, the run goes on, and its receipt says how much was lost (`output.undelivered`). After the first
broken pipe the stream's file descriptor is pointed at /dev/null, so that nothing later in the process
(another print, the interpreter's flush at exit) trips over it again.
"""

from __future__ import annotations

import errno
import os
from typing import Any, TextIO


class StreamWriter:
    """`write(text)` to `stream`, flushed when `flush` (a line-prefixed log); `lost` counts the characters
    that could not be delivered, `delivered` those that were."""

    def __init__(self, stream: TextIO, *, flush: bool = False) -> None:
        self.stream = stream
        self.flush = flush
        self.delivered = 0
        self.lost = 0
        self.why: str | None = None

    def __call__(self, text: str) -> Any:
        if self.why is not None:
            self.lost += len(text)
            return None
        try:
            self.stream.write(text)
            if self.flush:
                self.stream.flush()
        except OSError as e:
            if isinstance(e, BrokenPipeError) or e.errno in (errno.EPIPE, errno.EBADF):
                self._closed("the reader closed it" if e.errno != errno.EBADF else "it is closed")
            else:
                self._closed(e.strerror or str(e))
            self.lost += len(text)
            return None
        self.delivered += len(text)
        return None

    def _closed(self, why: str) -> None:
        self.why = why
        try:
            fd = self.stream.fileno()
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
        except (OSError, ValueError, AttributeError):
            pass  # not a file (a StringIO): nothing later trips over it

    def undelivered(self) -> str | None:
        """What the receipt says about output that was lost, or None when none was."""
        if not self.lost:
            return None
        return (f"the script's output could not be delivered ({self.why}) after {self.delivered} characters: "
                f"{self.lost} characters were dropped; the run went on")
