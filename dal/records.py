"""Plain record classes for the modules every `dal run` imports.

attrs writes each class's methods with exec() when the class is defined, 0.3-1 ms a class, which every
`dal run` paid for some twenty classes before running a line. The records of the start-up path declare
their fields in `__slots__` and write their own `__init__`; `Record` gives them attrs's `__repr__`
(`Name(field=value, ...)`), and `ValueRecord` attrs's `__eq__` too (same class and equal fields, as a
tuple; unhashable, like a mutable `attrs.define` class). A record compared by identity (attrs's
`eq=False`) is a `Record`.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["Record", "ValueRecord"]

_repring = threading.local()  # ids of the records whose repr is being built, as attrs keeps them


class Record:
    """A record whose fields are its `__slots__`, with attrs's repr; compared by identity."""

    __slots__ = ()

    def __repr__(self) -> str:
        busy: set[int] = _repring.__dict__.setdefault("ids", set())
        if id(self) in busy:
            return "..."  # a record that contains itself, as attrs shows it
        busy.add(id(self))
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__slots__)
            return f"{type(self).__qualname__}({shown})"
        finally:
            busy.discard(id(self))


class ValueRecord(Record):
    """A record compared by value, like a class of `attrs.define`: equal when it is of the same class and
    its fields are equal (compared as tuples, in order); unhashable, since its fields can change."""

    __slots__ = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in type(self).__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return not self == other

    __hash__ = None  # type: ignore[assignment]
