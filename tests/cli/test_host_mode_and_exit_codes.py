"""Issue 15, points 3, 4 and 6: one JSON object with `kind` on stdout in every outcome, one exit-code table
and one message prefix, and the conventions of well-kept command lines."""

from __future__ import annotations

import json

import pytest
from dalshell import Shell

SCRIPT = 'print("hello")\n'


def _one_object(stdout: str) -> dict:
    obj = json.loads(stdout)  # exactly one JSON value, nothing else on stdout
    assert isinstance(obj, dict) and "kind" in obj
    return obj


def test_every_json_command_prints_one_object_with_kind(dal: Shell) -> None:
    dal.write("s.dal", SCRIPT)
    run = dal("run", "--json", "s.dal")
    receipt = _one_object(run.stdout)
    assert run.returncode == 0 and receipt["kind"] == "receipt" and receipt["status"] == "completed"
    assert receipt["output"] == {"stdout_tail": "hello\n"}  # the script's output, as the API's receipt.output
    assert run.stderr == "hello\n"
    rid = receipt["run_id"]
    assert _one_object(dal("receipt", "show", rid, "--json").stdout)["kind"] == "receipt"
    listed = _one_object(dal("receipts", "--json").stdout)
    assert listed["kind"] == "runs" and [r["run_id"] for r in listed["runs"]] == [rid]
    assert _one_object(dal("check", "--json", "s.dal").stdout) == {"kind": "diagnostics", "diagnostics": []}
    assert _one_object(dal("policy", "check", "--json", "ls").stdout)["kind"] == "policy_decision"


@pytest.mark.parametrize("argv", [
    ["resume", "--json", "nope"],
    ["receipt", "show", "--json", "nope"],
    ["approve", "--json", "nope"],
    ["deny", "--json", "nope"],
    ["resolve", "--json", "nope", "--as", "done"],
    ["run", "--json", "--jsn", "s.dal"],  # a mistyped flag next to --json
    ["run", "--json", "missing.dal"],
    ["receipts", "--json", "--status", "dide"],
    ["job", "show", "9", "--json"],
])
def test_every_failure_in_host_mode_is_one_error_object(dal: Shell, argv: list[str]) -> None:
    dal.write("s.dal", SCRIPT)
    dal("run", "-q", "s.dal")  # a store exists, so "unknown run" is what is tested
    p = dal(*argv)
    err = _one_object(p.stdout)
    assert err["kind"] == "error" and err["error"]["exit_code"] == p.returncode == 2
    assert f"dal: error: {err['error']['message']}" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("argv", [
    ["receipt", "show", "nope"],
    ["resume", "nope"],
    ["approve", "nope"],
    ["deny", "nope"],
    ["resolve", "nope", "--as", "done"],
    ["job", "show", "9"],
    ["schedule", "remove", "nope"],
])
def test_an_unknown_run_exits_2_with_one_prefix_for_every_command(dal: Shell, argv: list[str]) -> None:
    dal.write("s.dal", SCRIPT)
    dal("run", "-q", "s.dal")
    p = dal(*argv)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("dal: error: ")


def test_no_runs_yet_and_a_damaged_store(dal: Shell) -> None:
    assert dal("receipts").returncode == 0
    shown = dal("receipt", "show", "latest")
    assert shown.returncode == 2 and shown.stderr.startswith("dal: error: no runs yet")
    dal.write("bad.db", "junk")
    for argv in (["receipts"], ["receipt", "show"], ["approve", "latest"], ["resume", "latest"]):
        p = dal(*argv, "--store", "bad.db")
        assert p.returncode == 2 and p.stderr.startswith("dal: error: the run store"), argv


def test_mistyped_commands_and_flags_say_did_you_mean_with_their_own_usage(dal: Shell) -> None:
    dal.write("s.dal", SCRIPT)
    p = dal("rn", "s.dal")
    assert p.returncode == 2 and "(did you mean run?)" in p.stderr
    p = dal("run", "--jsn", "s.dal")
    assert p.returncode == 2 and p.stderr.startswith("usage: dal run ") and "(did you mean --json?)" in p.stderr
    p = dal("receipts", "--statsu", "failed")
    assert p.stderr.startswith("usage: dal receipts ") and "(did you mean --status?)" in p.stderr
    p = dal("receipts", "--status", "dide")
    assert "(did you mean died?)" in p.stderr


def test_flags_are_never_abbreviated(dal: Shell) -> None:
    dal.write("s.dal", SCRIPT)
    p = dal("run", "--j", "s.dal")
    assert p.returncode == 2 and "unrecognized arguments: --j" in p.stderr and p.stdout == ""
    p = dal("receipts", "--wait")
    assert p.returncode == 2 and "(did you mean --waiting?)" in p.stderr


def test_version_help_and_colour(dal: Shell) -> None:
    for flag in ("-V", "--version"):
        p = dal(flag)
        assert p.returncode == 0 and p.stdout.startswith("dal ")
    assert dal("help").stdout == dal("--help").stdout
    p = dal("help", "receipt", "show")
    assert p.returncode == 0 and p.stdout.startswith("usage: dal receipt show")
    assert dal("help", "rn").returncode == 2
    dal.write("bad.dal", "let x = \n")
    always = dal("check", "--color", "always", "bad.dal")
    assert "\x1b[" in always.stderr  # NO_COLOR is set by the fixture: --color always wins
    never = dal("--color", "never", "check", "bad.dal", env={"FORCE_COLOR": "1"})
    assert "\x1b[" not in never.stderr and "error[" in never.stderr


def test_check_and_fmt_take_many_files_and_folders_and_go_on_after_a_missing_one(dal: Shell) -> None:
    dal.write("a.dal", "let x = 1\n")
    dal.write("b.dal", "let y = \n")
    dal.write("lib/c.dal", "print(1)\n")
    dal.write("lib/.hidden/d.dal", "let broken = \n")
    p = dal("check", "a.dal", "missing.dal", "b.dal", "lib")
    assert p.returncode == 2
    assert "a.dal: ok" in p.stderr and "dal: error: no such script: missing.dal" in p.stderr
    assert "b.dal: 1 error" in p.stderr and "lib/c.dal: ok" in p.stderr and "d.dal" not in p.stderr
    report = json.loads(dal("check", "--json", "missing.dal", "a.dal").stdout)
    assert report["kind"] == "diagnostics"
    assert [(d["file"], d["severity"]) for d in report["diagnostics"]] == [("missing.dal", "error")]
    dal.write("lib/ugly.dal", "if true {\n  print(1)\n}\n")
    f = dal("fmt", "--check", "lib", "missing.dal")
    assert f.returncode == 2 and "lib/ugly.dal: would reformat" in f.stderr and "missing.dal" in f.stderr


def test_run_reads_the_script_from_stdin(dal: Shell) -> None:
    p = dal("run", "-", input='print("from stdin")\n')
    assert p.returncode == 0 and p.stdout == "from stdin\n"
    kept = list((dal.cwd / ".dal" / "scripts").glob("*.dal"))  # kept, so that a resume runs the same text
    assert len(kept) == 1 and kept[0].read_text() == 'print("from stdin")\n'


def test_a_given_store_in_a_missing_folder_is_refused(dal: Shell) -> None:
    dal.write("s.dal", SCRIPT)
    p = dal("run", "--store", "no/such/folder/runs.db", "s.dal")
    assert p.returncode == 2 and "does not exist; DAL does not create it" in p.stderr and p.stdout == ""
    assert not (dal.cwd / "no").exists()
    p = dal("run", "s.dal", env={"DAL_STORE": str(dal.cwd / "typo" / "runs.db")})
    assert p.returncode == 2 and "($DAL_STORE)" in p.stderr and not (dal.cwd / "typo").exists()
    (dal.cwd / "there").mkdir()
    assert dal("run", "-q", "--store", "there/runs.db", "s.dal").returncode == 0


def test_check_warns_about_a_declared_but_unused_operation_key(dal: Shell) -> None:
    dal.write("unused.dal", 'let operation_key = "deploy:web"\nrun("true")\n')
    p = dal("check", "unused.dal")
    assert p.returncode == 0 and "warning[unused-operation-key]" in p.stderr
    assert " --> unused.dal:1:1" in p.stderr and "operation(operation_key)" in p.stderr
    dal.write("used.dal", 'let operation_key = "deploy:web"\noperation(operation_key)\nrun("true")\n')
    assert "warning" not in dal("check", "used.dal").stderr
    # the warning is right: run twice, the unkeyed script repeats; the keyed one is skipped
    assert dal("run", "-q", "unused.dal").returncode == 0 and dal("run", "-q", "unused.dal").returncode == 0
    assert [r["status"] for r in json.loads(dal("receipts", "--json").stdout)["runs"]] == ["completed"] * 2
    dal("run", "-q", "used.dal")
    again = dal("run", "--json", "used.dal")
    assert json.loads(again.stdout)["status"] == "skipped"


def _commands_and_json() -> dict[str, bool]:
    """Every command and subcommand of the parser, and whether it takes --json."""
    import argparse

    from dal.cli.main import build_parser

    found: dict[str, bool] = {}

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, [*prefix, name])
                return
        found[" ".join(prefix)] = any("--json" in a.option_strings for a in parser._actions)

    walk(build_parser(), [])
    return found


def test_the_docs_name_exactly_the_commands_without_json() -> None:
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    intro = (repo / "docs" / "cli.md").read_text().split("## Conventions", 1)[0]
    said = re.search(r"except these \w+, which print no\s+object: (.*?)\n\n", intro, re.S)
    assert said, intro
    documented = set(re.findall(r"`(\w+)` \(", said.group(1)))  # each named as `name` (why)
    without = {name for name, has in _commands_and_json().items() if not has}
    assert documented == without
    readme = (repo / "README.md").read_text()
    line = readme[readme.index("`--json` makes a command"):][:400]
    assert all(f"`{name}`" in line for name in without)


def test_fmt_and_test_print_one_object(dal: Shell) -> None:
    dal.write("ugly.dal", "let x = {\"a\":1}\nprint( x )\n")
    shown = _one_object(dal("fmt", "--json", "ugly.dal").stdout)
    assert shown["kind"] == "formatted" and shown["exit_code"] == 0
    assert shown["files"] == [{"path": "ugly.dal", "canonical": False, "written": False,
                               "text": 'let x = { "a": 1 }\nprint(x)\n'}]
    checked = dal("fmt", "--json", "--check", "ugly.dal", "missing.dal")
    body = _one_object(checked.stdout)
    assert checked.returncode == 2 and body["exit_code"] == 2
    assert body["files"][0] == {"path": "ugly.dal", "canonical": False, "written": False}
    assert body["files"][1]["path"] == "missing.dal" and "no such script" in body["files"][1]["error"]["message"]
    dal.write("t/ok.test.dal", "assert_eq(1 + 1, 2)\n")
    dal.write("t/bad.test.dal", 'print("why")\nassert_eq(1, 2)\n')
    tested = dal("test", "--json", "t")
    results = _one_object(tested.stdout)
    assert tested.returncode == 1 and results["kind"] == "test_results"
    assert (results["passed"], results["failed"]) == (1, 1)
    bad = next(t for t in results["tests"] if t["path"].endswith("bad.test.dal"))
    assert bad["passed"] is False and bad["output"] == "why\n" and bad["error"]["line"] == 2
    assert "1 passed, 1 failed" in tested.stderr  # the report a person reads
    none = dal("test", "--json", "nowhere")
    assert none.returncode == 2 and _one_object(none.stdout)["kind"] == "error"


def test_a_missing_argument_is_asked_for_with_the_command_it_was_missing_from(dal: Shell) -> None:
    dal.write("p.dal", "param to: str\nprint(to)\n")
    submitted = dal("submit", "p.dal")
    assert submitted.returncode == 2 and "give it: `dal submit p.dal to=VALUE`" in submitted.stderr
    assert "dal run" not in submitted.stderr
    ran = dal("run", "p.dal")
    assert "give it: `dal run p.dal to=VALUE`" in ran.stderr
