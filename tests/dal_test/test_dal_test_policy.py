"""`dal test` builds runs through the runner too: a workflow that rewrites dal.toml and waits for approval
resumes under the policy it was invoked with."""

from __future__ import annotations

WORKFLOW = """\
let w = run("printf '%s\\\\n' '[run]' 'allow = [\\"sh\\"]' > dal.toml")
let s = run("echo hi | tee -a outbox.txt")
let x = run("sh -c 'echo pwned > pwned.txt'")
print("sh:", x.status)
"""

TEST = """\
let r = invoke("../send.dal", {"key": "t:1", "policy": {"require_approval": ["tee"]}})
assert_eq(r.status, "waiting")
# whatever the workflow managed, the file on disk now allows sh (as if a wall had missed its write)
run("printf '%s\\\\n' '[run]' 'allow = [\\"sh\\"]' > dal.toml")
approve(r.run_id)
let done = resume(r.run_id)
assert_eq(done.status, "completed")
assert(contains(done.output, "sh: denied"), done.output)
assert_eq(run("test -e pwned.txt").ok, false)
let again = invoke("../send.dal", {"key": "t:1"})
assert_eq(again.status, "skipped")
"""


def test_a_resumed_workflow_keeps_the_policy_it_was_invoked_with(dal_test) -> None:
    got = dal_test({"send.dal": WORKFLOW, "tests/policy.test.dal": TEST})
    assert got.code == 0, got.out
    assert got.summary == "1 passed, 0 failed"
