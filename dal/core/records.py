"""Plain record classes for the modules every `dal run` imports.

attrs writes each class's methods with exec() when the class is defined, 0.3-1 ms a class, which every
`dal run` paid for some twenty classes before running a line. The records of the start-up path declare
their fields in `__slots__` and write their own `__init__`, and take from here the methods attrs gave
them, with the same results:

- `Record`: attrs's `__repr__` (`Name(field=value, ...)`); compared by identity (attrs's `eq=False`);
- `ValueRecord`: also `__eq__` as `attrs.define` (same class, then field by field); unhashable;
- `FrozenRecord`: as `attrs.frozen`: compared and hashed by value, assigning a field raises attrs's
  `FrozenInstanceError`, copy and pickle work; `evolve(**changes)` is `attrs.evolve`.

`_compared` and `_shown` name the fields that equality (and the hash) and the repr use, when not all of
them (attrs's `eq=False` and `repr=False` on a field).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["FrozenRecord", "Record", "ValueRecord"]

_repring = threading.local()  # ids of the records whose repr is being built, as attrs keeps them


class Record:
    """A record whose fields are its `__slots__`, with attrs's repr; compared by identity."""

    __slots__ = ()
    _shown: tuple[str, ...] | None = None  # the fields repr shows; None: every slot

    def __repr__(self) -> str:
        busy: set[int] = _repring.__dict__.setdefault("ids", set())
        if id(self) in busy:
            return "..."  # a record that contains itself, as attrs shows it
        busy.add(id(self))
        try:
            names = type(self)._shown or type(self).__slots__
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
            return f"{type(self).__qualname__.rsplit('>.', 1)[-1]}({shown})"
        finally:
            busy.discard(id(self))


class ValueRecord(Record):
    """A record compared by value, like a class of `attrs.define`: equal when it is of the same class and
    its fields are equal, compared in order; unhashable, since its fields can change."""

    __slots__ = ()
    _compared: tuple[str, ...] | None = None  # the fields equality compares; None: every slot

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in type(self)._compared or type(self).__slots__)

    def __eq__(self, other: object) -> Any:
        # attrs's __eq__: `self.a == other.a and self.b == other.b ...`, field by field
        if other.__class__ is not self.__class__:
            return NotImplemented
        result: Any = True
        for name in type(self)._compared or type(self).__slots__:
            result = getattr(self, name) == getattr(other, name)
            if not result:
                break
        return result

    def __ne__(self, other: object) -> Any:
        result = self.__eq__(other)
        return NotImplemented if result is NotImplemented else not result

    __hash__ = None  # type: ignore[assignment]


class FrozenRecord(ValueRecord):
    """A record like a class of `attrs.frozen`: compared and hashed by value; its fields cannot be assigned
    (its `__init__` sets them with `object.__setattr__`)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise _frozen()

    def __delattr__(self, name: str) -> None:
        raise _frozen()

    def __hash__(self) -> int:
        return hash((type(self).__qualname__, *self._values()))

    # copy and pickle set the fields the way __init__ does (as attrs's frozen classes do)
    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in type(self).__slots__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def evolve(self, **changes: Any) -> Any:
        """A copy with `changes` applied, made through `__init__` as `attrs.evolve` makes it (the fields
        `__init__` takes are the public slots)."""
        fields = {name: getattr(self, name) for name in type(self).__slots__ if not name.startswith("_")}
        return type(self)(**{**fields, **changes})


def _frozen() -> AttributeError:
    try:  # the error the attrs class raised; attrs is loaded only on this (rare) mistake
        from attr.exceptions import FrozenInstanceError
    except ImportError:  # pragma: no cover - attrs is a dependency
        return AttributeError("can't set attribute")
    return FrozenInstanceError()
