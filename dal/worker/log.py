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

Nothing a script chose can reach the terminal raw, in either format: control characters (C0, DEL, C1),
the bidirectional-text controls that reorder what a reader sees, the line and paragraph separators and
lone surrogates are written as escapes (`\\x1b`, `\\u202e`), so a script can neither forge a line of the
log nor move the cursor, ring the bell or reverse the text that follows.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

FORMATS = ("text", "json")
LEVELS = ("info", "warning", "error")
FIELDS = ("job", "key", "run", "state", "retry", "duration")

# What must not reach a terminal raw: C0 controls, DEL and C1 controls, the bidirectional controls (ALM,
# LRM, RLM, the embeddings and overrides, the isolates), the line and paragraph separators, and lone
# surrogates (which no UTF-8 stream can carry either).
_OTHER_UNSAFE = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_UNSAFE_RE = re.compile(f"[\x00-\x1f{_OTHER_UNSAFE}]")
_UNSAFE_BUT_TAB = re.compile(f"[\x00-\x08\x0a-\x1f{_OTHER_UNSAFE}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def visible(text: str) -> str:
    """`text` on one line, safe for a terminal: newlines, other control characters, bidirectional controls
    and lone surrogates as escapes (`\\n`, `\\x1b`, `\\u202e`)."""
    return _UNSAFE_RE.sub(_escape, text)


def visible_output(line: str) -> str:
    """A line of a script's output, safe for a terminal: as `visible`, but a tab stays a tab."""
    return _UNSAFE_BUT_TAB.sub(_escape, line)


def json_line(obj: dict[str, Any]) -> str:
    """`obj` as one line of JSON in which nothing unsafe for a terminal is raw: JSON escapes the C0
    controls; the rest of what `visible` escapes is written as `\\uXXXX` too (inside strings, the only
    place it can be, that is the same JSON)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))
    return _UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


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
