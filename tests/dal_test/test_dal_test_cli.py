"""`dal test` as a user sees it: one line per test, a caret at the failing assertion, the summary line CI
reads, exit codes, discovery, and the test builtins staying out of `dal run`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PASSING = """\
let r = invoke("wf.dal")
assert_eq(r.status, "completed")
assert(r.output == "hello\\n", "the workflow printed hello")
"""

FAILING = """\
let r = invoke("wf.dal")
print("the run was", r.status)
assert_eq(r.effects.count, 2)
print("never reached")
"""

WORKFLOW = 'print(run("echo hello"))\n'


def _untimed(text: str) -> str:
    return re.sub(r" \(\d+\.\d\ds\)", " (T)", text)


def test_passing_and_failing_scripts_report_each_with_a_caret_and_the_summary(dal_test) -> None:
    got = dal_test({"tests/wf.dal": WORKFLOW, "tests/a_pass.test.dal": PASSING, "tests/b_fail.test.dal": FAILING})
    assert got.code == 1
    assert _untimed(got.out) == (
        "PASS tests/a_pass.test.dal (T)\n"
        "FAIL tests/b_fail.test.dal (T)\n"
        "error[assert]: assert_eq failed: actual 1, expected 2\n"
        " --> tests/b_fail.test.dal:3:1\n"
        "  |\n"
        "3 | assert_eq(r.effects.count, 2)\n"
        "  | ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "  output:\n"
        "    the run was completed\n"
        "\n"
        "1 passed, 1 failed\n"
    )


def test_workflow_paths_are_relative_to_the_test_file(dal_test) -> None:
    got = dal_test({"wf.dal": WORKFLOW, "tests/x.test.dal": PASSING.replace('"wf.dal"', '"../wf.dal"')})
    assert got.code == 0, got.out
    assert got.summary == "1 passed, 0 failed"


def test_all_passing_exits_0_and_passing_output_is_shown_only_with_verbose(dal_test) -> None:
    files = {"tests/wf.dal": WORKFLOW, "tests/ok.test.dal": 'print("note")\n' + PASSING}
    quiet = dal_test(files)
    assert quiet.code == 0
    assert "note" not in quiet.out
    assert quiet.summary == "1 passed, 0 failed"
    loud = dal_test(files, "-v")
    assert "  output:\n    note\n" in loud.out


def test_assert_message_and_assert_eq_show_values_in_dal_literal_form(dal_test) -> None:
    got = dal_test({
        "a.test.dal": 'assert(1 > 2, "one is not more than two")\n',
        "b.test.dal": 'assert_eq({"s": "x", "n": null}, {"s": "y", "n": null})\n',
        "c.test.dal": 'assert_eq([1, "2"], [1, "2"])\nassert_eq(1, 1.0)\n',
    }, "a.test.dal", "b.test.dal", "c.test.dal")
    assert got.code == 1
    assert "error[assert]: assertion failed: one is not more than two\n --> a.test.dal:1:1\n" in got.out
    assert 'assert_eq failed: actual {"s": "x", "n": null}, expected {"s": "y", "n": null}' in got.out
    assert "PASS c.test.dal" in got.out
    assert got.summary == "1 passed, 2 failed"


def test_a_broken_test_script_fails_with_its_diagnostic_and_the_others_still_run(dal_test) -> None:
    got = dal_test({
        "tests/broken.test.dal": "let x = \n",
        "tests/typo.test.dal": "asert(true)\n",
        "tests/runtime.test.dal": 'let m = {"a": 1}\nprint(m.b)\n',
        "tests/fine.test.dal": "assert(true)\n",
        "tests/gave_up.test.dal": 'fail("not written yet")\n',
    })
    assert got.code == 1
    assert "FAIL tests/broken.test.dal" in got.out and "error[syntax]" in got.out
    assert "error[name]" in got.out and "asert" in got.out
    assert " --> tests/runtime.test.dal:2:" in got.out
    assert "PASS tests/fine.test.dal" in got.out
    assert "  the test called fail(not written yet)\n" in got.out
    assert got.summary == "1 passed, 4 failed"


def test_misused_test_builtins_fail_at_the_call_with_a_clear_message(dal_test) -> None:
    got = dal_test({
        "tests/wf.dal": WORKFLOW,
        "tests/opt.test.dal": 'invoke("wf.dal", {"kye": "k"})\n',
        "tests/missing.test.dal": 'invoke("nope.dal")\n',
        "tests/cond.test.dal": 'assert("yes")\n',
        "tests/fake.test.dal": 'fake("echo *", {"exit": 1})\n',
        "tests/both.test.dal": 'invoke("../wf.dal", {"crash_after": 1, "crash_before": 1})\n',
        "tests/flag.test.dal": 'invoke("wf.dal", {"policy": {"require_aproval": ["tee"]}})\n',
        "tests/stranger.test.dal": 'resume("run_20260101T000000000Z_abcdef")\n',
    })
    assert got.code == 1
    assert ('`invoke` has no option "kye"; its options are: key, crash_after, crash_before, policy, max_steps, '
            "max_effects, args\n --> tests/opt.test.dal:1:1") in got.out
    assert "no such workflow script:" in got.out and "(paths are relative to the test file)" in got.out
    assert "`assert` needs a boolean condition, got string" in got.out
    assert 'a fake result has no field "exit"; its fields are: stdout, stderr, code, timeout' in got.out
    assert "give `crash_after` or `crash_before`, not both" in got.out
    assert ('unknown policy flag "require_aproval": use allow_env, allow_net, allow_read, allow_run, allow_write, '
            "file, require_approval") in got.out
    assert "run run_20260101T000000000Z_abcdef was not started by this test (invoke it first)" in got.out
    assert got.summary == "0 passed, 7 failed"


def test_default_discovery_skips_language_tests_and_plain_scripts(dal_test) -> None:
    got = dal_test({
        "tests/language/builtins.dal": 'assert(false)\n',  # not a *.test.dal: never run
        "tests/deep/er/one.test.dal": "assert(true)\n",
        "examples/tests/two.test.dal": "assert(true)\n",
        "examples/tests/helper.dal": "assert(false)\n",
        "elsewhere/three.test.dal": "assert(false)\n",
    })
    assert got.code == 0, got.out
    assert "tests/deep/er/one.test.dal" in got.out and "examples/tests/two.test.dal" in got.out
    assert got.summary == "2 passed, 0 failed"
    folder = dal_test({}, "elsewhere")
    assert folder.summary == "0 passed, 1 failed"


def test_usage_errors_exit_2(dal_test) -> None:
    none = dal_test({})
    assert none.code == 2
    assert "no test scripts found" in none.err and "NAME.test.dal" in none.err
    missing = dal_test({}, "no/such.test.dal")
    assert missing.code == 2
    assert "no such test script or folder: no/such.test.dal" in missing.err
    bad_flag = dal_test({}, "--frobnicate")
    assert bad_flag.code == 2


def test_each_test_gets_a_fresh_workspace(dal_test) -> None:
    writer = 'run("touch mark.txt")\nassert_eq(run("ls").stdout, "mark.txt\\n")\n'
    got = dal_test({"a.test.dal": writer, "b.test.dal": writer}, "a.test.dal", "b.test.dal")
    assert got.summary == "2 passed, 0 failed", got.out


def test_keep_prints_the_workspace_and_leaves_it(dal_test) -> None:
    got = dal_test({"a.test.dal": 'run("touch mark.txt")\n'}, "--keep", "a.test.dal")
    where = re.search(r"workspace kept: (\S+)", got.out)
    assert where, got.out
    kept = Path(where.group(1))
    try:
        assert (kept / "mark.txt").exists()
    finally:
        import shutil

        shutil.rmtree(kept, ignore_errors=True)


def test_cli_process_help_exit_codes_and_test_builtins_stay_out_of_dal_run(tmp_path: Path) -> None:
    def dal(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dal", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=60, env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"})

    helped = dal("test", "--help")
    assert helped.returncode == 0
    for word in ("assert_eq(actual, expected)", "fake(pattern, result)", "crash_after", "N passed, N failed",
                 "*.test.dal"):
        assert word in helped.stdout
    (tmp_path / "ok.test.dal").write_text("assert(true)\n")
    (tmp_path / "no.test.dal").write_text("assert(false)\n")
    assert dal("test", "ok.test.dal").returncode == 0
    failed = dal("test", "ok.test.dal", "no.test.dal")
    assert failed.returncode == 1
    assert failed.stdout.endswith("\n1 passed, 1 failed\n")
    # The test builtins exist only under `dal test`.
    ran = dal("run", "ok.test.dal")
    assert ran.returncode == 2
    assert "assert" in ran.stderr and "Traceback" not in ran.stderr


def test_the_shipped_example_tests_pass() -> None:
    proc = subprocess.run([sys.executable, "-m", "dal", "test", "examples/tests"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "7 passed, 0 failed"


def test_a_test_script_that_is_not_utf8_is_named_as_dal_run_names_it(dal_test, tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "bad.test.dal").write_bytes(b'print("caf\xe9")\n')
    got = dal_test({"tests/ok.test.dal": "assert(true)\n"})
    assert got.code == 1
    assert "  tests/bad.test.dal is not UTF-8 text (invalid byte at offset 10)\n" in got.out
    assert "codec" not in got.out and "PASS tests/ok.test.dal" in got.out
