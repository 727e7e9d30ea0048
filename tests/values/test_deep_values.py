"""Deep values (issue 13, item 7): every operation on a value nested 100,000 deep (or containing itself)
works or gives a located DAL error, and the receipt of a run that made one is written and valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dal as dalapi
from dal.receipts.schema import validate

pytestmark = pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")

DEEP = "fn deep(n, leaf) {\n    let x = leaf\n    for i in range(n) { x = [x] }\n    return x\n}\n"  # lines 1-5


def test_equality_and_containment_at_any_depth(dal_engine) -> None:
    out = dal_engine(DEEP + 'let a = deep(100000, 1)\nlet b = deep(100000, 1)\nlet c = deep(100000, 2)\n'
                     'print(a == b, a != b, a == c, a != c, [a] == [b], contains([c, b], a), contains([c], a))\n'
                     'let m = {"v": 1}\nlet n = {"v": 1}\nfor i in range(100000) { m = {"v": m} n = {"v": n} }\n'
                     'print(m == n, len(a), len(m))\n', max_steps=5_000_000)
    assert out == "true false false true true true false\ntrue 1 1\n"


def test_text_of_deep_values_and_back(dal_engine) -> None:
    out = dal_engine(DEEP + 'let a = deep(100000, "x")\nlet t = json(a)\nlet s = str(a)\n'
                     'print(len(t), t == s, parse_json(t) == a, len(json({"a": deep(50000, {})})))\n'
                     'print(str(deep(3, null)))\n', max_steps=5_000_000)
    assert out == f"{200_003} true true {2 * 50_000 + 2 + 7}\n[[[null]]]\n"


def test_parse_json_refuses_deeper_than_100000_levels(tmp_path: Path) -> None:
    ok = dalapi.run('let t = "[" let e = "]"\nlet i = 1\nwhile i < 100000 { t = t + "[" e = e + "]" i = i + 1 }\n'
                    'print(len(parse_json(t + e)))\n', workspace=tmp_path, max_steps=5_000_000)
    assert ok.status == "completed" and ok.output == "1\n"
    r = dalapi.run('let t = "[" let e = "]"\nlet i = 0\nwhile i < 100000 { t = t + "[" e = e + "]" i = i + 1 }\n'
                   'print("start")\nlet v = parse_json("{\\"k\\": " + t + e + "}")\n',
                   workspace=tmp_path, max_steps=5_000_000)
    assert r.status == "failed" and r.output == "start\n"
    assert r.error["message"] == "cannot parse JSON nested 100,002 levels deep: DAL reads at most 100,000"
    assert r.error["line"] == 5 and r.error["column"] == 9
    # brackets inside strings are text, not nesting
    brackets = '"' + "[" * 200_000 + '"'
    r = dalapi.run(f'let v = parse_json("[{json.dumps(brackets)[1:-1]}]")\nprint(len(v[0]))\n', workspace=tmp_path)
    assert r.status == "completed" and r.output == "200000\n", r.error


def test_a_deep_result_gets_a_valid_bounded_receipt(tmp_path: Path, dal) -> None:
    """finish() of such a list used to end in a RecursionError traceback while writing the receipt."""
    (tmp_path / "d.dal").write_text(DEEP + "let x = deep(100000, 1)\nlet i = 0\n"
                                    'while i < 2 and len(x) > 0 {\n    i = i + 1\n'
                                    '    record({"attempt": x, "evidence": []}, x, x)\n}\nfinish(x)\n')
    p = dal.cli("run", "--max-steps", "5000000", "d.dal", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    shown = dal.cli("receipt", "show", "latest", "--json", cwd=tmp_path)
    receipt = json.loads(shown.stdout)
    validate(receipt)
    assert receipt["status"] == "completed"
    assert json.dumps(receipt["result"]) == "[" * 6 + '{"$elided": "list", "length": 1}' + "]" * 6
    loop = receipt["loops"][-1]
    assert loop["snapshot"]["x"] == [[[[{"$elided": "list", "length": 1}]]]]
    assert all(len(e["outcome"]) <= 401 for e in loop["evidence"])
    assert dal.cli("receipt", "show", "latest", cwd=tmp_path).returncode == 0
    files = sorted((tmp_path / ".dal" / "receipts").glob("*.json"))
    validate(json.loads(files[-1].read_text()))


def test_fail_of_a_deep_value_keeps_a_short_blocker(tmp_path: Path) -> None:
    r = dalapi.run(DEEP + "fail(deep(100000, 1))\n", workspace=tmp_path, max_steps=5_000_000)
    assert r.status == "failed"
    assert r.blocker.startswith("the script called fail([[[[") and len(r.blocker) < 500
    assert dalapi.receipt(r.run_id, workspace=tmp_path).blocker == r.blocker


def test_a_value_that_contains_itself(tmp_path: Path) -> None:
    base = 'let xs = [1]\nappend(xs, xs)\nlet m = {"a": 1}\nm.self = m\n'
    r = dalapi.run(base + "print(xs == xs, len(xs), contains(xs, xs), m == m)\nfinish([xs, m])\n", workspace=tmp_path)
    assert r.status == "completed" and r.output == "true 2 true true\n"
    stored = dalapi.receipt(r.run_id, workspace=tmp_path)
    assert stored.result == [[1, "<cycle>"], {"a": 1, "self": "<cycle>"}]
    for call, col in (("print(xs)", 1), ("let t = json(m)", 9), ("let t = str(xs)", 9)):
        r = dalapi.run(base + call + "\n", workspace=tmp_path)
        assert r.status == "failed" and r.error["line"] == 5 and r.error["column"] == col
        assert "contains itself" in r.error["message"]


def test_json_of_a_function_is_an_error_naming_its_type(tmp_path: Path) -> None:
    r = dalapi.run('fn f() { return 1 }\nprint(str([f, len]))\nprint(json({"n": [1, len]}))\n', workspace=tmp_path)
    assert r.output == "[<fn f>, <builtin len>]\n"  # print and str show it for people
    assert r.status == "failed" and r.error["kind"] == "type" and r.error["line"] == 3
    assert r.error["message"] == "json() cannot write a function (`<builtin len>`): JSON has no such value"
    r = dalapi.run('let r = run("echo hi")\nprint(json([r]), parse_json(json([r])) == ["hi"])\n', workspace=tmp_path)
    assert r.status == "completed" and r.output == '["hi"] true\n'
