"""Lines of a script's source, as the parser counts them (by "\\n")."""

from __future__ import annotations

_lines_of: tuple[str | None, list[str]] = (None, [])  # the last source split, and its lines


def source_line(source: str | None, line: int) -> str | None:
    """Line `line` (1-based) of `source` as the parser counts lines (by "\\n"; a "\\r" before it is not
    shown), or None. The split is kept for the next call: `dal check` of a script with thousands of
    errors renders each against the same source, and splitting it every time made that quadratic."""
    global _lines_of
    if source is None or line <= 0:
        return None
    if _lines_of[0] is not source:
        _lines_of = (source, source.split("\n"))
    lines = _lines_of[1]
    if line > len(lines):
        return None
    return lines[line - 1].removesuffix("\r")
