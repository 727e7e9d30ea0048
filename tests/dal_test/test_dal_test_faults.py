"""Fault injection at every effect of a three-effect workflow, through `dal test`.

The workflow appends a line to a log (local, not idempotent), reads the log (read), then "sends" it
(`tee -a outbox.txt`, classed external by the policy file). For a crash after effect N's result, the second
invocation with the same key completes and every effect ran exactly once. For a crash after effect N's intent
(before it ran), the read is simply run again; the append and the send have an unknown outcome and are held
for a person (`waiting`, retry `escalate`) rather than repeated.
"""

from __future__ import annotations

import pytest

WORKFLOW = """\
run("printf 'line\\\\n' >> log.txt")
let seen = run("cat log.txt")
let sent = run("cat log.txt | tee -a outbox.txt")
finish({"seen": seen.stdout, "sent": sent.ok})
"""

POLICY = '[programs.tee]\nclass = "external"\n'

COMMON = """\
fn lines(path) {
    let r = run("cat " + path)
    if not r.ok { return 0 }
    return len(split(trim(r.stdout), "\\n"))
}
fn live(r) {
    let seqs = []
    for e in r.effects.items {
        if not e.replayed and e.status != "uncertain" { seqs = append(seqs, e.seq) }
    }
    return seqs
}
let opts = {"key": "op", "policy": "wf.toml"}
opts[CRASH] = N
let first = invoke("wf.dal", opts)
assert_eq(first.status, "crashed")
assert_eq(first.crash.effect, N)
let second = invoke("wf.dal", {"key": "op", "policy": "wf.toml"})
assert_eq(second.previous_run, first.run_id)
assert_eq(receipt(first.run_id).status, "interrupted")
"""

AFTER = COMMON + """\
assert_eq(second.status, "completed")
assert_eq(second.result, {"seen": "line\\n", "sent": true})
assert_eq(second.external_effect, EXTERNAL)
# effects 1..N came back from the journal; only the rest ran in the second invocation
assert_eq(live(second), LIVE)
# the world: one line appended, one message sent
assert_eq(lines("log.txt"), 1)
assert_eq(lines("outbox.txt"), 1)
"""

BEFORE_RERUN = COMMON + """\
assert_eq(second.status, "completed")
assert_eq(live(second), [2, 3])
assert_eq(lines("log.txt"), 1)
assert_eq(lines("outbox.txt"), 1)
"""

BEFORE_HELD = COMMON + """\
assert_eq(second.status, "waiting")
assert_eq(second.retry, "escalate")
assert_eq(second.external_effect, EXTERNAL)
let held = second.effects.items[len(second.effects.items) - 1]
assert_eq(held.seq, N)
assert_eq(held.status, "uncertain")
assert(contains(second.blocker, "may or may not have happened"), second.blocker)
# nothing ran twice, and the held effect did not run at all (crash_before: it never started)
assert_eq(lines("log.txt"), LOG)
assert_eq(lines("outbox.txt"), 0)
# asking again does not change that: still held
let third = invoke("wf.dal", {"key": "op", "policy": "wf.toml"})
assert_eq(third.status, "waiting")
assert_eq(lines("log.txt"), LOG)
assert_eq(lines("outbox.txt"), 0)
"""


def _script(template: str, **values: str) -> str:
    """The test script with its parameters bound as DAL names at the top (values are DAL literals)."""
    return "".join(f"let {k} = {v}\n" for k, v in values.items()) + template


@pytest.mark.parametrize("n", [1, 2, 3])
def test_crash_after_each_effect_then_the_same_key_completes_without_repeating(dal_test, n: int) -> None:
    live = str(list(range(n + 1, 4))).replace("'", "")
    test = _script(AFTER, CRASH='"crash_after"', N=str(n), LIVE=live, EXTERNAL='"performed"')
    got = dal_test({"wf.dal": WORKFLOW, "wf.toml": POLICY, "t.test.dal": test}, "t.test.dal")
    assert got.code == 0, got.out
    assert got.summary == "1 passed, 0 failed"


@pytest.mark.parametrize("n,log", [(1, "0"), (3, "1")])
def test_crash_before_a_non_idempotent_effect_holds_it_for_a_person(dal_test, n: int, log: str) -> None:
    # external_effect is `uncertain` for a held local effect too (design: every held effect is uncertain)
    test = _script(BEFORE_HELD, CRASH='"crash_before"', N=str(n), EXTERNAL='"uncertain"', LOG=log)
    got = dal_test({"wf.dal": WORKFLOW, "wf.toml": POLICY, "t.test.dal": test}, "t.test.dal")
    assert got.code == 0, got.out
    assert got.summary == "1 passed, 0 failed"


def test_crash_before_a_read_runs_the_read_again_and_completes(dal_test) -> None:
    test = _script(BEFORE_RERUN, CRASH='"crash_before"', N="2")
    got = dal_test({"wf.dal": WORKFLOW, "wf.toml": POLICY, "t.test.dal": test}, "t.test.dal")
    assert got.code == 0, got.out


def test_a_crash_in_a_resumed_run_resumes_again(dal_test) -> None:
    test = """\
let a = invoke("wf.dal", {"key": "op", "policy": "wf.toml", "crash_after": 1})
let b = resume(a.run_id, {"crash_after": 2})
assert_eq(b.status, "crashed")
let c = resume(b.run_id)
assert_eq(c.status, "completed")
assert_eq(run("cat outbox.txt").stdout, "line\\n")
assert_eq(run("cat log.txt").stdout, "line\\n")
"""
    got = dal_test({"wf.dal": WORKFLOW, "wf.toml": POLICY, "t.test.dal": test}, "t.test.dal")
    assert got.code == 0, got.out


def test_a_crash_that_is_never_reached_is_not_a_crash(dal_test) -> None:
    test = """\
let r = invoke("wf.dal", {"key": "op", "policy": "wf.toml", "crash_after": 4})
assert_eq(r.status, "completed")
"""
    got = dal_test({"wf.dal": WORKFLOW, "wf.toml": POLICY, "t.test.dal": test}, "t.test.dal")
    assert got.code == 0, got.out


def test_a_held_effect_resolved_by_a_person_continues_as_they_said(dal_test) -> None:
    test = """\
let first = invoke("wf.dal", {"key": "op", "policy": "wf.toml", "crash_before": 1})
let held = invoke("wf.dal", {"key": "op", "policy": "wf.toml"})
assert_eq(held.status, "waiting")
resolve(held.run_id, "retry")
let done = resume(held.run_id)
assert_eq(done.status, "completed")
assert_eq(run("cat log.txt").stdout, "line\\n")  # run once, on the person's say-so
assert_eq(run("cat outbox.txt").stdout, "line\\n")
"""
    got = dal_test({"wf.dal": WORKFLOW, "wf.toml": POLICY, "t.test.dal": test}, "t.test.dal")
    assert got.code == 0, got.out


def test_resolve_refuses_a_run_that_holds_nothing(dal_test) -> None:
    test = """\
let r = invoke("wf.dal", {"key": "op", "policy": "wf.toml"})
resolve(r.run_id, "done")
"""
    got = dal_test({"wf.dal": WORKFLOW, "wf.toml": POLICY, "t.test.dal": test}, "t.test.dal")
    assert got.code == 1
    assert "(completed) holds no effect of unknown outcome\n --> t.test.dal:2:1" in got.out
