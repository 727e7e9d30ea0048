"""Snapshots stay small and cheap whatever the value: a person reads them, and the runtime takes many."""

from __future__ import annotations

import json
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from dal.receipts.compact import compact


def test_small_values_are_unchanged() -> None:
    value = {"attempt": 2, "path": "a.md", "ok": True, "none": None, "ratio": 0.5, "xs": [1, 2, 3]}
    assert compact(value) == value


def test_huge_list_shows_length_head_and_tail_quickly() -> None:
    xs = list(range(200_000))
    start = time.perf_counter()
    for _ in range(1000):
        out = compact(xs)
    elapsed = time.perf_counter() - start
    assert out == {
        "$elided": "list",
        "length": 200_000,
        "head": [0, 1, 2, 3],
        "tail": [199_996, 199_997, 199_998, 199_999],
    }
    assert elapsed < 0.5  # a thousand snapshots of it: proportional to what is shown, not to its length


def test_huge_map_shows_size_and_first_keys() -> None:
    m = {f"k{i}": i for i in range(100_000)}
    out = compact(m, max_items=4)
    assert out["$elided"] == "map" and out["size"] == 100_000
    assert out["keys"] == ["k0", "k1", "k2", "k3"] and out["head"] == {"k0": 0, "k1": 1}


def test_long_string_keeps_its_head() -> None:
    out = compact("x" * 10_000, max_string=10)
    assert out == {"$elided": "string", "length": 10_000, "head": "x" * 10}


def test_deep_nesting_is_cut_at_depth() -> None:
    value: list = []
    for _ in range(1000):
        value = [value]
    out = compact(value, depth=3)
    assert out == [[[{"$elided": "list", "length": 1}]]]


def test_self_referencing_list_terminates() -> None:
    xs: list = [1]
    xs.append(xs)
    json.dumps(compact(xs))


def test_run_results_and_functions_show_as_text() -> None:
    class Result:
        summary = "command completed"

    class Fn:
        def dal_repr(self) -> str:
            return "<fn record(state, operation, outcome)>"

    assert compact({"r": Result(), "f": Fn()}) == {
        "r": "command completed",
        "f": "<fn record(state, operation, outcome)>",
    }


def test_unprintable_numbers_stay_json() -> None:
    out = compact([10**5000, float("nan"), float("inf")])
    assert out[0] == {"$elided": "int", "digits": 5001, "negative": False}
    json.dumps(out, allow_nan=False)


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=600),
    lambda children: st.lists(children, max_size=30) | st.dictionaries(st.text(max_size=20), children, max_size=30),
    max_leaves=120,
)


@settings(max_examples=150, deadline=None)
@given(values)
def test_compact_is_always_json_and_bounded(value: object) -> None:
    out = compact(value, max_items=6, max_string=100, depth=3, max_nodes=60)
    text = json.dumps(out, allow_nan=False, ensure_ascii=False)
    # At most max_nodes values are shown, each at most a bounded string plus marker keys.
    assert len(text) <= 60 * (100 * 6 + 120) + 200
