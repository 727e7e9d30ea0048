"""Where something is in a script: a `Span` of lines, columns and character offsets."""

from __future__ import annotations

from dal.core.records import FrozenRecord


class Span(FrozenRecord):
    """A source region: 1-based lines and columns, 0-based character offsets (end exclusive)."""

    __slots__ = ("line", "column", "end_line", "end_column", "start", "end")

    def __init__(self, line: int, column: int, end_line: int, end_column: int, start: int, end: int) -> None:
        init = object.__setattr__
        init(self, "line", line)
        init(self, "column", column)
        init(self, "end_line", end_line)
        init(self, "end_column", end_column)
        init(self, "start", start)
        init(self, "end", end)


NO_SPAN = Span(0, 0, 0, 0, 0, 0)
