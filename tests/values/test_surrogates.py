"""Lone surrogates (issue 13, item 3): every string a script can make round-trips through print, json,
the store, the receipt files, `--json`, the API and `dal test`; text that leaves DAL as itself (a
command, an operation key) is refused with a located error. See dal/core/jsontext.py for the representation.

A DAL string is a sequence of code points and may hold a lone surrogate (U+D800-U+DFFF). Written out it
is JSON's `\\uXXXX` escape; JSON cannot tell a high surrogate followed by a low one from the character
they encode, so `expected()` below combines such pairs (UTF-16 decoding) before comparing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dal as dalapi
from dal.core.jsontext import surrogate_at
from dal.receipts.schema import validate

pytestmark = pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")

SETTINGS = settings(deadline=None, max_examples=40,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

SPECIAL = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "\udc80", '"', "\\", "\n", "\x00",
           "é", "😀", "\u2028", "/"]
# Any code point, surrogates included (hypothesis leaves category Cs out by default), and often the ones
# that matter.
chars = st.one_of(st.characters(blacklist_categories=()), st.sampled_from(SPECIAL))
texts = st.lists(chars, max_size=12).map("".join)


def literal(s: str) -> str:
    """A DAL expression whose value is exactly `s`, code point for code point: one literal per code point,
    joined (a single literal would combine an escaped high and low surrogate into one character)."""
    if not s:
        return '""'
    return "join([" + ", ".join(json.dumps(c) for c in s) + '], "")'


def expected(v: Any) -> Any:
    """What JSON text of `v` reads back as: surrogate pairs combined (as JSON defines them)."""
    if isinstance(v, str):
        return v.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
    if isinstance(v, list):
        return [expected(x) for x in v]
    if isinstance(v, dict):
        return {expected(k): expected(x) for k, x in v.items()}
    return v


def utf8(text: str) -> bytes:
    return text.encode("utf-8")  # raises if a surrogate is left raw


@SETTINGS
@given(s=texts)
def test_print_str_json_and_parse_json(dal_engine, s: str) -> None:
    out = dal_engine(f"let s = {literal(s)}\nprint(s)\nprint(str([s]))\nlet m = {{}}\nm[s] = s\nprint(json(m))\n"
                     "print(parse_json(json(s)) == s, len(s))\n")
    lines = out.split("\n")
    first_nl = s.count("\n")
    assert "\n".join(lines[: first_nl + 1]) == s  # print writes a string raw, as it is
    rest = lines[first_nl + 1:]
    shown, as_json, same = rest[0], rest[1], rest[2]
    # the text of a value is valid Unicode, is JSON, and reads back as the value
    utf8(shown), utf8(as_json)
    assert json.loads(shown) == [expected(s)]
    assert json.loads(as_json) == {expected(s): expected(s)}
    assert same == f"{'true' if expected(s) == s else 'false'} {len(s)}"


@SETTINGS
@given(s=texts)
def test_receipts_store_and_files_round_trip(tmp_path: Path, s: str) -> None:
    ws = Path(tempfile.mkdtemp(dir=tmp_path))
    src = (f"let s = {literal(s)}\nlet m = {{\"k\": s, \"l\": [s]}}\nm[s] = 1\nprint(s)\n"
           "let i = 0\nwhile i < 1 and len(s) >= 0 { i = i + 1 record({\"attempt\": i, \"evidence\": []}, s, s) }\n"
           "finish(m)\n")
    r = dalapi.run(src, workspace=ws)
    value = {"k": s, "l": [s], s: 1}
    assert r.status == "completed", r.error
    assert r.output == s + "\n"
    assert r.result == value  # in memory: exactly the script's strings
    stored = dalapi.receipt(r.run_id, workspace=ws)  # read back from the store
    assert stored.result == expected(value)
    assert stored.loops[0]["evidence"][0]["outcome"] == expected(s)
    files = ws / ".dal" / "receipts"
    raw = (files / f"{r.run_id}.json").read_bytes()
    assert json.loads(raw.decode("utf-8"))["result"] == expected(value)
    validate(json.loads(raw))
    md = (files / f"{r.run_id}.md").read_text(encoding="utf-8")  # the markdown is UTF-8 too
    assert surrogate_at(md) is None
    utf8(r.render())  # what `dal receipt show` prints
    utf8(r.to_markdown())
    utf8(stored.render())


@SETTINGS
@given(s=texts)
def test_errors_that_quote_the_value(tmp_path: Path, s: str) -> None:
    ws = Path(tempfile.mkdtemp(dir=tmp_path))
    r = dalapi.run(f"let s = {literal(s)}\nprint(int(\"x\" + s))\n", workspace=ws)
    assert r.status == "failed" and r.error["kind"] == "runtime" and r.error["line"] == 2
    assert "cannot convert" in r.error["message"]
    utf8(r.error["message"])  # quoted with its escapes
    assert dalapi.receipt(r.run_id, workspace=ws).error == r.error
    r = dalapi.run(f"let s = {literal(s)}\nprint(float(\"x\" + s))\n", workspace=ws)
    assert r.status == "failed" and r.error["line"] == 2 and "to a float" in r.error["message"]
    utf8(r.error["message"])
    r = dalapi.run(f"let s = {literal(s)}\nlet m = {{}}\nm[s] = 1\nprint(m[s + \"!\"])\n", workspace=ws)
    assert r.status == "failed" and r.error["line"] == 4 and "has no key" in r.error["message"]
    utf8(r.error["message"] + r.error["help"])


@SETTINGS
@given(s=texts)
def test_fail_with_the_value_as_blocker(tmp_path: Path, s: str) -> None:
    ws = Path(tempfile.mkdtemp(dir=tmp_path))
    r = dalapi.run(f"fail({literal(s)})\n", workspace=ws)
    assert r.status == "failed" and r.result == s
    stored = dalapi.receipt(r.run_id, workspace=ws)
    assert stored.result == expected(s)
    assert [x.run_id for x in dalapi.list_receipts(workspace=ws, status="failed")] == [r.run_id]


@pytest.mark.parametrize("call, what", [
    ('operation("key-\\ud83d")', "the operation key"),
    ('run("echo \\ud800")', "the command"),
    ('run("echo " + parse_json("\\"\\\\udc80\\""))', "the command"),
    ('env("X\\udfff")', "the variable name"),
])
def test_text_that_leaves_as_itself_is_refused_at_the_call(tmp_path: Path, call: str, what: str) -> None:
    src = f'print("start")\n{call}\nprint("never")\n'
    r = dalapi.run(src, workspace=tmp_path)
    assert r.status == "failed" and r.output == "start\n"
    assert r.error["kind"] == "runtime" and r.error["line"] == 2 and r.error["column"] == 1
    assert r.error["message"].startswith(f"{what} holds a lone surrogate")
    assert r.effects["count"] == 0
    again = dalapi.run(src, workspace=tmp_path)  # and the next invocation is no different
    assert again.status == "failed"


def test_a_key_with_a_surrogate_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('run("touch made")\n')
    with pytest.raises(dalapi.DalUsageError, match="not valid Unicode"):
        dalapi.run(tmp_path / "s.dal", workspace=tmp_path, key="k\udcff")
    # argv that is not UTF-8 reaches Python as lone surrogates (surrogateescape)
    p = subprocess.run([sys.executable, "-m", "dal", "run", "--key", b"a\xffb", "s.dal"],
                       cwd=tmp_path, capture_output=True)
    assert p.returncode == 2, p.stderr
    assert b"not valid Unicode" in p.stderr and b"Traceback" not in p.stderr
    assert not (tmp_path / "made").exists()


def test_command_output_that_is_not_utf8_is_replaced_and_stored(tmp_path: Path) -> None:
    r = dalapi.run('let r = run("printf \'a\\\\377b\\\\n\'")\nfinish([r.stdout, r])\n', workspace=tmp_path)
    assert r.status == "completed", r.error
    assert r.result == ["a\ufffdb\n", "a\ufffdb"]
    assert dalapi.receipt(r.run_id, workspace=tmp_path).result == r.result


def test_the_reported_cases_complete_and_stay_completed(tmp_path: Path, dal) -> None:
    """The issue's reproductions: each one used to leave the run `died` with a traceback, forever."""
    cases = {
        "finish_parse.dal": 'finish(parse_json("[\\"\\\\ud83d\\"]"))\n',
        "finish_lit.dal": 'finish("\\ud800")\n',
        "map_key.dal": 'let m = {}\nm["\\ud800"] = 1\nfinish(m)\n',
    }
    for name, src in cases.items():
        (tmp_path / name).write_text(src)
        for _ in range(2):
            p = dal.cli("run", "--key", name, name, cwd=tmp_path)
            assert p.returncode == 0, p.stderr
            assert "Traceback" not in p.stderr
        p = dal.cli("run", "--json", name, cwd=tmp_path)
        assert p.returncode == 0 and "Traceback" not in p.stderr
        receipt = json.loads(p.stdout)
        assert receipt["status"] == "completed"
        shown = dal.cli("receipt", "show", receipt["run_id"], "--json", cwd=tmp_path)
        assert json.loads(shown.stdout)["result"] == receipt["result"]
        assert dal.cli("receipt", "show", receipt["run_id"], cwd=tmp_path).returncode == 0
    p = dal.cli("receipts", "--json", cwd=tmp_path)
    assert p.returncode == 0 and {r["status"] for r in json.loads(p.stdout)["runs"]} == {"completed", "skipped"}
    # print(int("\ud800")): a located error, the receipt stored
    (tmp_path / "int.dal").write_text('print(int("\\ud800"))\n')
    p = dal.cli("run", "int.dal", cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert 'cannot convert "\\ud800" to an integer' in p.stderr and "int.dal:1:7" in p.stderr
    # print() of a surrogate to a pipe: the terminal's backslashreplace
    (tmp_path / "p.dal").write_text('print("a\\ud800b", ["\\udc80"])\n')
    p = subprocess.run([sys.executable, "-m", "dal", "run", "-q", "p.dal"], cwd=tmp_path, capture_output=True)
    assert p.returncode == 0 and p.stdout == b'a\\ud800b ["\\udc80"]\n'


def test_api_run_of_a_surrogate_does_not_raise(tmp_path: Path) -> None:
    r = dalapi.run('finish("\\ud800")', workspace=tmp_path)
    assert r.status == "completed" and r.result == "\ud800"
    assert r.to_dict()["result"] == "\ud800"


def test_dal_test_with_surrogates(dal_test) -> None:
    wf = 'let s = parse_json("\\"\\\\ud83d\\"")\nprint(s)\nfinish({"s": s})\n'
    test = ('let r = invoke("wf.dal")\nassert_eq(r.status, "completed")\nassert_eq(r.result.s, "\\ud83d")\n'
            'assert_eq(r.output, "\\ud83d\\n")\n')
    got = dal_test({"tests/wf.dal": wf, "tests/s.test.dal": test})
    assert got.code == 0, got.out + got.err
    assert "1 passed" in got.summary


def test_api_source_text_holding_a_raw_surrogate_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(dalapi.DalUsageError, match=r"lone surrogate \(\\ud800\) on line 2"):
        dalapi.run('print(1)\nprint("\ud800")\n', workspace=tmp_path)
    assert dalapi.run('print(1)\nprint("\\ud800")\n', workspace=tmp_path).output == "1\n\ud800\n"


@settings(deadline=None, max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=texts)
def test_json_host_mode_and_receipt_show_round_trip(tmp_path: Path, dal, s: str) -> None:
    ws = Path(tempfile.mkdtemp(dir=tmp_path))
    (ws / "s.dal").write_text(f"let s = {literal(s)}\nprint(s)\nlet m = {{\"s\": s}}\nm[s] = [s]\nfinish(m)\n")
    p = subprocess.run([sys.executable, "-m", "dal", "run", "--json", "s.dal"], cwd=ws, capture_output=True)
    assert p.returncode == 0, p.stderr
    receipt = json.loads(p.stdout.decode("utf-8"))  # stdout is UTF-8 JSON
    validate(receipt)
    assert receipt["result"] == expected({"s": s, s: [s]})
    shown = subprocess.run([sys.executable, "-m", "dal", "receipt", "show", receipt["run_id"], "--json"], cwd=ws,
                           capture_output=True)
    assert json.loads(shown.stdout.decode("utf-8"))["result"] == receipt["result"]
    text = subprocess.run([sys.executable, "-m", "dal", "receipt", "show", receipt["run_id"]], cwd=ws,
                          capture_output=True)
    assert text.returncode == 0 and b"Traceback" not in text.stderr
    text.stdout.decode("utf-8")


def test_a_script_file_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """Operator-side text can hold surrogates too: a file name of bytes that are not UTF-8 (Python names
    it with surrogateescape). Its run is stored, its receipt shows the name escaped."""
    name = b"r\xff.dal"
    with open(os.path.join(os.fsencode(tmp_path), name), "wb") as f:
        f.write(b'print("ran")\n')
    for _ in range(2):
        p = subprocess.run([sys.executable, "-m", "dal", "run", name], cwd=tmp_path, capture_output=True)
        assert p.returncode == 0 and p.stdout == b"ran\n", p.stderr
    shown = subprocess.run([sys.executable, "-m", "dal", "receipt", "show", "latest"], cwd=tmp_path,
                           capture_output=True)
    assert shown.returncode == 0 and b"r\\udcff.dal" in shown.stdout
