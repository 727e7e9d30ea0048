"""`dal test` builds runs through the runner too: a workflow that rewrites dal.toml and waits for approval
resumes under the policy it was invoked with."""

from __future__ import annotations

import shutil
from pathlib import Path

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


def _attack(outside: str) -> dict[str, str]:
    """Attack 3, 05: the test script grants its workflow sh, reads outside the roots and a secret."""
    workflow = (
        f'let s = run("cat {outside}/secret.txt")\n'
        "let r = run(\"sh -c 'echo shell-ran > shell.txt'\")\n"
        'run("printf %s " + str(env("DAL_TEST_SECRET")) + " > loot.txt")\n'
    )
    test = (
        f'let r = invoke("../wf.dal", {{"policy": {{"allow_read": ["{outside}"], "allow_env": ["DAL_TEST_SECRET"], '
        '"allow_run": ["sh"]}})\n'
        'print("ran:", r.status, run("cat loot.txt").stdout)\n'
    )
    toml = f'[run]\nallow = ["sh"]\n[paths]\nread = ["{outside}"]\n'
    return {"wf.dal": workflow, "tests/attack.test.dal": test, "tests/wide.toml": toml,
            "tests/file.test.dal": 'let r = invoke("../wf.dal", {"policy": "wide.toml"})\nprint("ran:", r.status)\n'}


def test_a_test_script_cannot_widen_the_policy_of_what_it_invokes(dal_test, tmp_path, monkeypatch) -> None:
    """The policy an invoke asks for (flags or a TOML file the test names) may only narrow what the operator
    gave `dal test`; nothing of the workflow runs otherwise."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET-FILE\n")
    monkeypatch.setenv("DAL_TEST_SECRET", "hunter2")
    got = dal_test(_attack(str(outside)), "--keep")
    assert got.code == 1 and got.summary == "0 passed, 2 failed", got.out
    assert "allows running sh; reading " + str(outside) in got.out and "env() of DAL_TEST_SECRET" in got.out
    assert "ran:" not in got.out and "TOPSECRET" not in got.out and "hunter2" not in got.out
    kept = [line.split("kept: ")[-1].strip() for line in got.out.splitlines() if "workspace kept: " in line]
    assert len(kept) == 2, got.out
    for ws in kept:
        assert not list(Path(ws).glob("*.txt")), ws  # no shell.txt, no loot.txt: nothing of wf.dal ran
        shutil.rmtree(ws)
    # The operator grants it on the command line: then the same tests may.
    got = dal_test({}, "--allow-run=sh", f"--allow-read={outside}", "--allow-env=DAL_TEST_SECRET", "-v")
    assert got.code == 0 and got.summary == "2 passed, 0 failed", got.out
    assert "ran: completed hunter2" in got.out
