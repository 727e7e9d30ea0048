"""AST nodes: frozen attrs classes whose equality, hash and repr ignore the span, as attrs's own would.

Their eq/hash/repr come from one shared base instead of being generated per class (a start-up cost);
these tests pin that they behave as attrs generates them, against attrs classes built the usual way.
"""

from __future__ import annotations

import copy
import pickle

import attrs
import pytest

from dal.syntax import ast
from dal.syntax.parser import parse


@attrs.frozen
class AttrsName:
    id: str
    span: ast.Span = attrs.field(default=ast.NO_SPAN, eq=False, repr=False, kw_only=True)


def test_equality_and_hash_ignore_the_span() -> None:
    a = ast.Name("x", span=ast.Span(1, 1, 1, 2, 0, 1))
    b = ast.Name("x", span=ast.Span(7, 3, 7, 4, 40, 41))
    assert a == b and not (a != b) and hash(a) == hash(b)
    assert ast.Name("x") != ast.Name("y")
    assert {a: "found"}[b] == "found"


def test_nodes_of_different_classes_never_compare_equal() -> None:
    assert ast.Break() != ast.Continue()
    assert ast.Name("x") != AttrsName("x")
    assert (ast.Name("x") == "x") is False


def test_repr_reads_like_attrs_and_leaves_the_span_out() -> None:
    node = ast.Binary("+", ast.Name("a"), ast.Literal(1), span=ast.Span(1, 1, 1, 6, 0, 5))
    assert repr(node) == "Binary(op='+', left=Name(id='a'), right=Literal(value=1))"
    assert repr(ast.Name("x")) == repr(AttrsName("x")).replace("AttrsName", "Name")
    assert repr(ast.Span(1, 2, 3, 4, 5, 6)) == "Span(line=1, column=2, end_line=3, end_column=4, start=5, end=6)"


def test_nodes_are_frozen_and_work_with_attrs_helpers() -> None:
    node = ast.Let("x", ast.Literal(1))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        node.name = "y"  # type: ignore[misc]
    assert attrs.evolve(node, name="y") == ast.Let("y", ast.Literal(1))
    assert [f.name for f in attrs.fields(ast.Let)] == ["name", "value", "span"]


def test_a_parsed_tree_equals_a_hand_built_one_and_survives_copy_and_pickle() -> None:
    tree = parse("let x = f(1)\n")
    built = ast.Program((ast.Let("x", ast.Call(ast.Name("f"), (ast.Literal(1),))),))
    assert tree == built
    assert copy.deepcopy(tree) == tree and pickle.loads(pickle.dumps(tree)) == tree
    assert pickle.loads(pickle.dumps(tree)).body[0].span == tree.body[0].span
