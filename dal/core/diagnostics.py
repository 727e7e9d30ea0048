"""The one renderer for every DAL diagnostic: message, file:line:col, source line, carets.

Used by the CLI, the REPL, receipts and golden files alike. Colour only when asked for; callers
decide with `want_color(stream)` which honours NO_COLOR and non-terminals.
"""

from __future__ import annotations

import os
import re
from typing import TextIO

from dal.core.errors import DalError
from dal.core.sources import source_line

_RED = "\x1b[1;31m"
_YELLOW = "\x1b[1;33m"
_BLUE = "\x1b[1;34m"
_BOLD = "\x1b[1m"
_RESET = "\x1b[0m"


# `dal --color always|never` (None: auto, decided per stream below).
COLOR_CHOICE: dict[str, bool | None] = {"force": None}


def want_color(stream: TextIO) -> bool:
    """Colour for `stream`: what --color said; else none when NO_COLOR is set (https://no-color.org), some
    when FORCE_COLOR is; else only for a terminal."""
    if COLOR_CHOICE["force"] is not None:
        return bool(COLOR_CHOICE["force"])
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
MAX_LINE = 120  # a longer source line is shown as the part around the error, with `...` for the rest


def _window(text: str, start: int, width: int) -> tuple[str, int, int]:
    """Cut a long source line down to the part around the carets: (text, caret start, caret width)."""
    if len(text) <= MAX_LINE:
        return text, start, width
    width = min(width, MAX_LINE // 2)
    lo = max(0, min(start - MAX_LINE // 4, len(text) - MAX_LINE))
    hi = min(len(text), lo + MAX_LINE)
    head = "..." if lo > 0 else ""
    tail = "..." if hi < len(text) else ""
    return head + text[lo:hi] + tail, start - lo + len(head), width


def render(err: DalError, color: bool = False, *, severity: str = "error") -> str:
    """Render `err` as a caret diagnostic (no trailing newline)."""

    def c(code: str, text: str) -> str:
        return f"{code}{text}{_RESET}" if color else text

    from dal.core.visible import visible

    head_color = _YELLOW if severity == "warning" else _RED
    # The message may hold the script's text (a command, a key, fail("...")): shown, never played.
    out = [c(head_color, f"{severity}[{err.kind}]") + c(_BOLD, f": {visible(err.message, lines=True)}")]
    s = err.span
    fname = err.filename or "<unknown>"
    if s.line > 0:
        out.append(c(_BLUE, " --> ") + f"{fname}:{s.line}:{s.column}")
        text = source_line(err.source, s.line)
        if text is not None:
            # one column per character, and no control character reaches the terminal (an escape
            # sequence in a script would otherwise be played by the reader's terminal)
            text = _CONTROL.sub("\ufffd", text.expandtabs(1))
            gutter = " " * len(str(s.line))
            start = max(s.column - 1, 0)
            if s.end_line == s.line and s.end_column > s.column:
                width = s.end_column - s.column
            else:
                width = max(len(text) - start, 1)
            width = max(1, min(width, max(len(text) - start, 1)))
            text, start, width = _window(text, start, width)
            out.append(c(_BLUE, f"{gutter} |"))
            out.append(c(_BLUE, f"{s.line} |") + f" {text}")
            out.append(c(_BLUE, f"{gutter} |") + " " + " " * start + c(head_color, "^" * width))
    else:
        out.append(c(_BLUE, " --> ") + fname)
    if err.help:
        out.append(c(_BLUE, " = ") + f"help: {visible(err.help, lines=True)}")
    out.extend(c(_BLUE, " = ") + visible(line) for line in stack_lines(err))
    return "\n".join(out)


def stack_lines(err: DalError, limit: int = 12) -> list[str]:
    """The DAL call stack, outermost call first; runs of the same call collapse into one line."""
    lines: list[str] = []
    frames = list(reversed(err.call_stack))
    i = 0
    while i < len(frames):
        f = frames[i]
        j = i
        while j + 1 < len(frames) and frames[j + 1] == f:
            j += 1
        text = f"in {f.function}, called at {f.filename}:{f.span.line}:{f.span.column}"
        if j > i:
            text += f" (and {j - i} more times)"
        lines.append(text)
        i = j + 1
    if len(lines) > limit:
        hidden = len(lines) - limit
        lines = lines[: limit // 2] + [f"... {hidden} more calls ..."] + lines[-limit // 2 :]
    return lines
