"""Text from a script or a program, made safe to show a person on a terminal.

A script's author is untrusted, and so is what the programs it runs print. Raw control characters in a
command, an output, a key or a blocker would be played by the reader's terminal: ESC sequences that clear
the screen, move the cursor, hide text or set the clipboard (OSC 52), CR and backspace that overwrite what
the approver reads, BEL, and Unicode bidi controls (U+202E) that reorder it. Every renderer and every
message DAL writes for people passes such text through `visible` (or a whole receipt through
`visible_data`) before adding its own colours; JSON output is never changed (docs/receipts.md).

Each such character is shown as an escape a person can read: `\\x1b`, `\\r`, `\\n`, `\\t`, `\\x07`,
`\\u202e`. (A backslash the text already holds is left alone: `\\x1b` typed as four characters looks the
same, and no terminal plays it.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# C0 and C1 controls and DEL; the bidi embedding, override and isolate controls and marks; line and
# paragraph separators; zero-width space, non-joiner and the byte order mark (invisible, used to disguise);
# lone surrogates (no UTF-8 stream can carry them: writing one would fail, not show it).
_OTHERS = "\x7f-\x9f\u061c\u200b\u200c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff"
_ALL = re.compile(f"[\x00-\x1f{_OTHERS}]")
_KEEP_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")  # all but tab and newline
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _show(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str, *, lines: bool = False) -> str:
    """`text` with every control character shown as an escape. `lines`: newlines and tabs stay as they
    are (output shown as lines); otherwise they are escaped too (a value on one line of a receipt)."""
    pattern = _KEEP_LINES if lines else _ALL
    return pattern.sub(_show, text) if pattern.search(text) else text


def visible_json(text: str) -> str:
    """JSON text with every character `visible` escapes written as `\\uXXXX` (inside strings, the only
    place JSON lets one be, that is the same JSON): a log line a terminal may show."""
    return _ALL.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _ALL.search(text) else text


def visible_data(value: Any) -> Any:
    """A copy of `value` (a receipt, a row: dicts, lists, strings) with every string passed through
    `visible`, for a renderer that shows it to a person."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, Mapping):
        return {k: visible_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [visible_data(v) for v in value]
    return value
