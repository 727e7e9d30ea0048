"""Text that leaves DAL as UTF-8: lone surrogates written as JSON's `\\uXXXX` escape.

A DAL string is a sequence of code points, and it may hold a lone surrogate (U+D800-U+DFFF): JSON text
such as `"\\ud83d"` (an emoji cut in half by a tool that counts UTF-16 units) parses to one, and so does
the literal `"\\ud800"`. UTF-8 cannot encode such a code point, so everywhere DAL writes text out (the
store, the receipt files, `--json`, the markdown receipt) it is written as the six characters `\\ud83d`:
in JSON that is the escape for exactly that code point, so the text reads back as the same string, and
in plain text it is what Python's `backslashreplace` shows on a terminal. One case cannot round-trip,
because JSON itself cannot express it: a high surrogate followed by a low one (`"\\ud83d" + "\\ude00"`)
reads back as the one character they encode (😀), as in JavaScript.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def escape_surrogates(text: str) -> str:
    """`text` with every surrogate code point written as `\\uXXXX`; the same object when there is none."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(_escape, text)


def surrogate_at(text: str) -> int | None:
    """The index of the first surrogate code point in `text`, or None: text that cannot be UTF-8."""
    if text.isascii():
        return None
    m = _SURROGATE.search(text)
    return None if m is None else m.start()


def dumps(obj: Any, **kw: Any) -> str:
    """`json.dumps(obj, ensure_ascii=False, **kw)`, with lone surrogates escaped: text that encodes as
    UTF-8 and that `json.loads` reads back as `obj`. (In the output of json.dumps a raw surrogate can only
    be inside a string, where `\\uXXXX` is its escape.)"""
    return escape_surrogates(json.dumps(obj, ensure_ascii=False, **kw))
