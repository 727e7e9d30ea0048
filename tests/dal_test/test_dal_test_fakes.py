"""`fake(pattern, result)`: matching commands return the scripted result instead of executing, after the
policy and the approval gate; unmatched commands run for real; a denied command stays denied."""

from __future__ import annotations

WORKFLOW = """\
let a = run("echo hi there")
let b = run("echo other")
finish({"a": a.stdout, "a_status": a.status, "b": b.stdout})
"""


def _ok(got) -> None:
    assert got.code == 0, got.out
    assert got.summary == "1 passed, 0 failed"


def test_matched_commands_are_faked_and_unmatched_ones_run_for_real(dal_test) -> None:
    test = """\
fake("echo hi*", {"stdout": "faked\\n"})
let r = invoke("wf.dal")
assert_eq(r.result, {"a": "faked\\n", "a_status": "completed", "b": "other\\n"})
assert(contains(r.effects.items[0].reason, "faked by dal test (pattern \\"echo hi*\\")"), "marked as faked")
assert(not contains(r.effects.items[1].reason, "faked"), "the unmatched one was not")
"""
    _ok(dal_test({"wf.dal": WORKFLOW, "t.test.dal": test}, "t.test.dal"))


def test_failure_and_timeout_results_and_the_newest_fake_wins(dal_test) -> None:
    test = """\
fake("echo *", {"stdout": "old\\n"})
fake("echo hi*", {"code": 3, "stderr": "boom\\nmore"})
let r = invoke("wf.dal")
assert_eq(r.result.a_status, "failed")
assert_eq(r.effects.items[0].summary, "command failed (exit 3): boom")
assert_eq(r.effects.items[0].code, 3)
assert_eq(r.result.b, "old\\n")
fake("echo hi*", {"timeout": true})
let t = invoke("wf.dal")
assert_eq(t.result.a_status, "timeout")
assert_eq(t.effects.items[0].summary, "command timed out after 30s")
"""
    _ok(dal_test({"wf.dal": WORKFLOW, "t.test.dal": test}, "t.test.dal"))


def test_a_list_of_results_is_used_in_turn_and_its_last_one_repeats(dal_test) -> None:
    wf = ('let out = [] for i in range(4) {'
          ' out = append(out, run("test -e f && echo present || echo missing").stdout) }'
          " finish(out)\n")
    test = """\
fake("test -e f*", [{"stdout": "missing\\n"}, {"stdout": "present\\n"}])
assert_eq(invoke("wf.dal").result, ["missing\\n", "present\\n", "present\\n", "present\\n"])
"""
    _ok(dal_test({"wf.dal": wf, "t.test.dal": test}, "t.test.dal"))


def test_a_denied_command_stays_denied_even_when_faked(dal_test) -> None:
    wf = 'let r = run("curl -s https://example.com/send") finish({"status": r.status, "summary": str(r)})\n'
    test = """\
fake("curl *", [{"stdout": "sent"}])
let r = invoke("wf.dal")
assert_eq(r.result.status, "denied")
assert(startswith(r.result.summary, "denied: curl is not an allowed program"), r.result.summary)
assert_eq(r.external_effect, "none")
"""
    _ok(dal_test({"wf.dal": wf, "t.test.dal": test}, "t.test.dal"))


def test_a_faked_command_that_needs_approval_still_waits_for_it(dal_test) -> None:
    wf = 'let r = run("touch sent.txt") finish(r.status)\n'
    test = """\
fake("touch *", {"stdout": ""})
let r = invoke("wf.dal", {"key": "k", "policy": {"require_approval": ["touch"]}})
assert_eq(r.status, "waiting")
assert_eq(r.external_effect, "pending_approval")
approve(r.run_id)
let done = resume(r.run_id)
assert_eq(done.status, "completed")
assert_eq(done.result, "completed")
assert_eq(run("test -e sent.txt").code, 1)  # faked: the approved command did not really run
"""
    _ok(dal_test({"wf.dal": wf, "t.test.dal": test}, "t.test.dal"))


def test_a_faked_result_is_journaled_and_replayed_on_resume(dal_test) -> None:
    wf = 'let a = run("echo one") let b = run("echo two") finish([a.stdout, b.stdout])\n'
    test = """\
fake("echo *", [{"stdout": "first\\n"}, {"stdout": "second\\n"}, {"stdout": "third\\n"}])
let crashed = invoke("wf.dal", {"key": "k", "crash_after": 1})
let r = invoke("wf.dal", {"key": "k"})
# effect 1 comes back from the journal (the fake is not asked again); effect 2 takes the next result
assert_eq(r.result, ["first\\n", "second\\n"])
assert_eq(r.effects.items[0].replayed, true)
"""
    _ok(dal_test({"wf.dal": wf, "t.test.dal": test}, "t.test.dal"))


def test_the_test_scripts_own_run_calls_are_not_faked(dal_test) -> None:
    test = """\
fake("echo *", {"stdout": "faked\\n"})
assert_eq(run("echo real").stdout, "real\\n")
"""
    _ok(dal_test({"t.test.dal": test}, "t.test.dal"))


def test_a_write_file_is_faked_by_its_command_as_the_receipt_shows_it(dal_test) -> None:
    # docs/testing.md: the input is spelled out in front of the command a fake matches.
    test = """\
fake("printf %s * | cat > report.md", {"code": 1, "stderr": "disk full"})
let r = invoke("w.dal")
assert_eq(r.effects.items[0].status, "failed")
assert_eq(r.effects.items[0].summary, "command failed (exit 1): disk full")
assert_eq(r.effects.items[1].status, "completed")
"""
    workflow = 'write_file("report.md", "hello\\n")\nwrite_file("other.md", "x")\n'
    _ok(dal_test({"w.dal": workflow, "t.test.dal": test}, "t.test.dal"))
