"""Bounded JSON views of DAL values for snapshots and results in receipts.

A receipt is read by a person, so a 200,000-item list shows its length and its first and last few
items. The work done is proportional to what is shown, never to the size of the value: lists and
strings are sliced, maps are read through an iterator that stops early, and a node budget shared by
the whole walk caps the output of wide and deep values alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import islice
from typing import Any

CYCLE = "<cycle>"  # as dal.eval.values.CYCLE: a list or map inside itself

# Beyond this many bits an int would print with more digits than a person reads (and Python refuses to
# print ints past 4300 digits at all), so it is shown by size.
_MAX_INT_BITS = 256


def compact(
    value: Any,
    *,
    max_items: int = 8,
    max_string: int = 400,
    depth: int = 4,
    max_nodes: int = 200,
) -> Any:
    """Return a JSON-serialisable view of `value` whose size is bounded by the limits.

    Elided values become marker maps: `{"$elided": "list", "length": N, "head": [...], "tail": [...]}`,
    `{"$elided": "map", "size": N, "keys": [...], "head": {...}}`, `{"$elided": "string", "length": N,
    "head": "..."}`; a container below `depth` levels keeps only its size, and one met again inside
    itself shows as the string `<cycle>`. A value with a `summary` attribute (a run() result) shows as that
    string (its `evidence` text when it has one: DAL's words name the command), a value with `dal_repr()`
    (a function) as its repr. Takes DAL values as they are: its work is
    bounded by the limits, whatever the size, depth or sharing of `value`.
    """
    walker = _Walker(max(1, max_items), max(1, max_string), max(0, depth), max(1, max_nodes))
    return walker.walk(value, walker.depth)


class _Walker:
    def __init__(self, max_items: int, max_string: int, depth: int, max_nodes: int) -> None:
        self.max_items = max_items
        self.max_string = max_string
        self.depth = depth
        self.nodes_left = max_nodes
        self.open: set[int] = set()  # the lists and maps being walked: one met again is a cycle

    def walk(self, value: Any, depth: int) -> Any:
        self.nodes_left -= 1
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            if value.bit_length() > _MAX_INT_BITS:
                digits = int(value.bit_length() * math.log10(2)) + 1
                return {"$elided": "int", "digits": digits, "negative": value < 0}
            return value
        if isinstance(value, float):
            # NaN and infinities are not JSON; the strings match what DAL prints for them.
            return value if math.isfinite(value) else str(value)
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, list | tuple | Mapping):
            if id(value) in self.open:
                return CYCLE
            self.open.add(id(value))
            try:
                return self.sequence(value, depth) if isinstance(value, list | tuple) else self.mapping(value, depth)
            finally:
                self.open.discard(id(value))
        summary = getattr(value, "summary", None)
        if isinstance(summary, str):
            evidence = getattr(value, "evidence", None)  # a run() result: its summary naming its command
            return self.string(evidence if isinstance(evidence, str) else summary)
        dal_repr = getattr(value, "dal_repr", None)
        if callable(dal_repr):
            return self.string(str(dal_repr()))
        return {"$elided": "object", "type": type(value).__name__}

    def string(self, s: str) -> Any:
        if len(s) <= self.max_string:
            return s
        return {"$elided": "string", "length": len(s), "head": s[: self.max_string]}

    def sequence(self, seq: list[Any] | tuple[Any, ...], depth: int) -> Any:
        n = len(seq)
        if depth <= 0 or self.nodes_left <= 0:
            return {"$elided": "list", "length": n}
        if n <= self.max_items and n <= self.nodes_left:
            return [self.walk(item, depth - 1) for item in seq]
        shown = max(0, min(self.max_items, self.nodes_left, n))
        head_n = (shown + 1) // 2
        tail_n = shown - head_n
        head = [self.walk(item, depth - 1) for item in seq[:head_n]]
        tail = [self.walk(item, depth - 1) for item in seq[n - tail_n :]] if tail_n else []
        return {"$elided": "list", "length": n, "head": head, "tail": tail}

    def mapping(self, m: Mapping[Any, Any], depth: int) -> Any:
        n = len(m)
        if depth <= 0 or self.nodes_left <= 0:
            return {"$elided": "map", "size": n}
        if n <= self.max_items and n <= self.nodes_left:
            return {self.key(k): self.walk(v, depth - 1) for k, v in m.items()}
        shown = max(0, min(self.max_items, self.nodes_left, n))
        first = list(islice(m.items(), shown))
        return {
            "$elided": "map",
            "size": n,
            "keys": [self.key(k) for k, _ in first],
            "head": {self.key(k): self.walk(v, depth - 1) for k, v in first[: (shown + 1) // 2]},
        }

    def key(self, k: Any) -> str:
        s = k if isinstance(k, str) else str(k)
        return s if len(s) <= self.max_string else s[: self.max_string] + "…"
