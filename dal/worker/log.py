"""The worker's log: one line per event on stderr, the scripts' output on stdout, as text or as JSON.

Text (the default) is for a person: `dal worker W: job 1 (k): run R completed → done`, each script
output line after `[job N] `. JSON (`dal worker --log-format json`) is for a log collector: one object per
line with the same keys on every line (null where a key does not apply):

    {"time": "2026-12-01T09:00:00.123Z", "level": "info", "worker": "w_vm_4711_3f2a1c", "job": 1,
     "key": "k", "run": "run_...", "state": "done", "retry": "none", "duration": 0.412,
     "message": "job 1 (k): run run_... completed → done"}

`level` is `info`, `warning` (the store refused, a job could not be routed) or `error` (a bug in DAL);
`state` is where the event left the job, `retry` the run's retry class, `duration` the seconds the job's
attempt took. An output line is `"level": "output"` with the line as its message, on stdout.

Nothing a script chose can reach the terminal raw, in either format: what `dal.core.visible` escapes for
every other line DAL shows (control characters, the bidirectional-text controls that reorder what a reader
sees, zero-width characters, the line and paragraph separators, lone surrogates) is written as escapes
(`\\x1b`, `\\u202e`, `\\u200b`), so a script can neither forge a line of the log nor move the cursor, ring
the bell, hide text or reverse the text that follows.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from dal.core.visible import visible, visible_json

FORMATS = ("text", "json")
LEVELS = ("info", "warning", "error")
FIELDS = ("job", "key", "run", "state", "retry", "duration")

__all__ = ["FIELDS", "FORMATS", "LEVELS", "WorkerLog", "json_line", "visible", "visible_output"]


def visible_output(line: str) -> str:
    """A line of a script's output, safe for a terminal: as `visible`, but a tab stays a tab."""
    return visible(line, lines=True).replace("\n", "\\n")


def json_line(obj: dict[str, Any]) -> str:
    """`obj` as one line of JSON in which nothing unsafe for a terminal is raw: JSON escapes the C0
    controls; the rest of what `visible` escapes is written as `\\uXXXX` too (inside strings, the only
    place it can be, that is the same JSON)."""
    return visible_json(json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")))


def _now_text(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


class WorkerLog:
    """The log of one worker (and of the job processes it forks, which inherit it).

    `say`: where text lines go (default: stderr), for tests and hosts that collect the lines. `out`: the
    stream of the scripts' output (default: stdout)."""

    def __init__(self, worker: str, *, format: str = "text", say: Callable[[str], Any] | None = None,
                 out: TextIO | None = None, clock: Callable[[], float] = time.time) -> None:
        if format not in FORMATS:
            raise ValueError(f"unknown log format {format!r} (expected {' or '.join(FORMATS)})")
        self.worker = worker
        self.format = format
        self._say = say
        self._out = out
        self.clock = clock

    def line(self, message: str, *, level: str = "info", **fields: Any) -> None:
        """One event. `fields`: any of FIELDS (job, key, run, state, retry, duration in seconds)."""
        if self.format == "json":
            obj: dict[str, Any] = {"time": _now_text(self.clock()), "level": level, "worker": self.worker}
            for k in FIELDS:
                v = fields.get(k)
                obj[k] = round(v, 3) if k == "duration" and isinstance(v, float) else v
            obj["message"] = message
            text = json_line(obj)
        else:
            text = f"dal worker {self.worker}: {visible(message)}"
        if self._say is not None:
            self._say(text)
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def output_lines(self, job: int, key: str, lines: list[str]) -> str:
        """Lines of job `job`'s output as the stdout text to write."""
        if self.format == "json":
            now = _now_text(self.clock())
            return "".join(json_line({"time": now, "level": "output", "worker": self.worker, "job": job, "key": key,
                                      "run": None, "state": None, "retry": None, "duration": None,
                                      "message": line}) + "\n" for line in lines)
        return "".join(f"[job {job}] {visible_output(line)}\n" for line in lines)

    @property
    def out(self) -> TextIO:
        return self._out if self._out is not None else sys.stdout
