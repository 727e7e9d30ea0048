"""dal/core/records.py's plain classes behave as the attrs classes they replaced on the start-up path: the same
repr, equality, hashing, immutability, copies and evolve()."""

from __future__ import annotations

import copy
import pickle

import attrs
import pytest

from dal.core.records import FrozenRecord, Record, ValueRecord
from dal.effects import EffectContext, Policy
from dal.eval.interpreter import Outcome
from dal.resolve.resolver import ModuleState


@attrs.define
class AttrsValue:
    a: int
    b: object = None


class PlainValue(ValueRecord):
    __slots__ = ("a", "b")

    def __init__(self, a: int, b: object = None) -> None:
        self.a = a
        self.b = b


@attrs.frozen
class AttrsFrozen:
    a: int
    b: tuple = ()


class PlainFrozen(FrozenRecord):
    __slots__ = ("a", "b")

    def __init__(self, a: int, b: tuple = ()) -> None:
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)


def same_repr(attrs_obj: object, plain: object) -> bool:
    return repr(attrs_obj).replace("Attrs", "") == repr(plain).replace("Plain", "")


def test_value_records_compare_and_show_like_attrs_define() -> None:
    for args in [(1,), (1, "x"), (2, [1, 2]), (1, float("nan"))]:
        assert same_repr(AttrsValue(*args), PlainValue(*args))
        assert (AttrsValue(*args) == AttrsValue(*args)) == (PlainValue(*args) == PlainValue(*args))
    assert PlainValue(1) != PlainValue(2) and PlainValue(1) != (1, None)
    looped_a, looped_p = AttrsValue(1), PlainValue(1)
    looped_a.b, looped_p.b = looped_a, looped_p
    assert same_repr(looped_a, looped_p)  # `b=...`
    with pytest.raises(TypeError):
        hash(PlainValue(1))
    assert copy.deepcopy(PlainValue(1, [2])) == PlainValue(1, [2])


def test_frozen_records_like_attrs_frozen() -> None:
    a, p = AttrsFrozen(1, (2,)), PlainFrozen(1, (2,))
    assert same_repr(a, p)
    assert p == PlainFrozen(1, (2,)) and hash(p) == hash(PlainFrozen(1, (2,))) and p != PlainFrozen(2)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.a = 3  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del p.a
    assert copy.copy(p) == p and pickle.loads(pickle.dumps(p)) == p
    assert p.evolve(a=5) == PlainFrozen(5, (2,)) and p == PlainFrozen(1, (2,))


def test_identity_records_compare_by_identity() -> None:
    class Plain(Record):
        __slots__ = ("a",)

        def __init__(self, a: int) -> None:
            self.a = a

    x = Plain(1)
    assert x != Plain(1) and x == x and {x: 1}[x] == 1 and repr(x) == "Plain(a=1)"


def test_the_effect_records(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = Policy.load(tmp_path)
    assert p == Policy.load(tmp_path) and hash(p) == hash(Policy.load(tmp_path))
    assert "_rule_index" not in repr(p) and repr(p).startswith(f"Policy(workspace={p.workspace!r}, allowed=")
    ctx = EffectContext(policy=p)
    later = ctx.evolve(cancel=lambda: True)
    assert later == ctx and later.cancel is not None and ctx.cancel is None  # cancel is not compared
    assert pickle.loads(pickle.dumps(p)) == p
    assert Outcome("completed") == Outcome("completed") and ModuleState() == ModuleState()
