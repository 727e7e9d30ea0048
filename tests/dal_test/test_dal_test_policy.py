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
    """The test script grants its workflow sh, reads outside the roots and a secret."""
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


def test_a_tests_own_toml_keeps_the_ceilings_protected_files_and_limits(dal_test, tmp_path) -> None:
    """Executed: the project's dal.toml (the ceiling) protects a file in its write
    root and sets `[limits] timeout = 1`; a test names its own TOML with the same write root, no `protect`
    and a bigger timeout. The workflow it invokes may not truncate the file, and its sleep is cut at 1 s."""
    outside = tmp_path.parent / f"{tmp_path.name}-out"
    outside.mkdir()
    keep = outside / "keep.txt"
    keep.write_text("KEEP-ORIGINAL\n")
    files = {
        "dal.toml": f'[paths]\nwrite = ["{outside}"]\nprotect = ["{keep}"]\n[limits]\ntimeout = 1\nmax_output = 64\n',
        "tests/evil.toml": f'[paths]\nwrite = ["{outside}"]\n[limits]\ntimeout = 30\nmax_output = 100000\n',
        "tests/wf.dal": f'print(run(["tee", "{keep}"]).status)\nprint("sleep:", run("sleep 3").status)\n'
                        'print("out:", len(run("seq 1000").stdout))\n',
        "tests/a.test.dal": 'let r = invoke("wf.dal", {"policy": "evil.toml"})\nprint(r.output)\n',
    }
    got = dal_test(files, "-v", "tests/a.test.dal")
    assert got.code == 0, got.out
    assert keep.read_text() == "KEEP-ORIGINAL\n"
    assert "denied" in got.out and "sleep: timeout" in got.out, got.out
    kept = int(got.out.split("out: ")[1].split()[0])
    assert kept < 200  # max_output 64 (plus the truncation note), not the test's 100000: seq 1000 is 3893 bytes


def test_an_invoked_policy_file_outside_the_project_is_not_read(dal_test, tmp_path) -> None:
    """A test names any file on disk as an invoke's policy, and the error named its
    keys or quoted a value. It is refused before it is read; a bad file inside is not quoted either."""
    outside = tmp_path.parent / f"{tmp_path.name}-secrets"
    outside.mkdir()
    (outside / ".env").write_text('API_TOKEN = "s3cr3t-1"\n')
    (outside / "p.toml").write_text('[run]\nallow = ["s3cr3t-2"]\n')
    files = {
        "dal.toml": "",
        "tests/wf.dal": "print(1)\n",
        "tests/d1.test.dal": f'invoke("wf.dal", {{"policy": "{outside}/.env"}})\n',
        "tests/d2.test.dal": f'invoke("wf.dal", {{"policy": {{"file": "{outside}/p.toml"}}}})\n',
        "tests/inside.toml": 'SECRET_KEY_NAME = 1\n',
        "tests/wide.toml": '[run]\nallow = ["s3cr3t-3"]\n',
        "tests/d3.test.dal": 'invoke("wf.dal", {"policy": "inside.toml"})\n',
        "tests/d4.test.dal": 'invoke("wf.dal", {"policy": "wide.toml"})\n',
    }
    got = dal_test(files)
    assert got.summary == "0 passed, 4 failed", got.out
    assert got.out.count("is outside the test's project") == 2 and "not read" in got.out
    assert "is not a valid policy" in got.out and "dal policy check --policy" in got.out
    for leak in ("API_TOKEN", "s3cr3t", "SECRET_KEY_NAME"):
        assert leak not in got.out + got.err, leak
