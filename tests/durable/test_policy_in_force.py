"""The policy in force is fixed when an operation starts (docs/policy.md, "The policy in force"): a script
that rewrites dal.toml to allow `sh` and then waits for approval gets no `sh` when the operator approves
and resumes it, by `dal resume`, by the same `--key`, by `operation("K")` again, or on a new attempt after a
failure. Executed for real next to a canary (`pwned.txt`, which `sh` would create); the store is checked."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

ORIGINAL = """\
[run]
require_approval = ["tee"]   # each line tee appends to outbox.txt is one message sent
"""
WIDENED = '[run]\nallow = ["sh"]\n'

# The script tries to rewrite its own policy, then sends (held for approval), then tries sh.
SEND = """\
let w = run("printf '%s\\\\n' '[run]' 'allow = [\\"sh\\"]' > dal.toml")
let s = run("echo hi | tee -a outbox.txt")
let x = run("sh -c 'echo pwned > pwned.txt'")
print("rewrite:", w.status, "send:", s.status, "sh:", x.status)
"""


def widen(d) -> None:
    """The file on disk now allows sh: written by the script, or, where a wall stopped that write (the
    protected paths), by the test, as if a wall had missed it."""
    if "sh" not in d.lines("dal.toml")[-1]:
        d.write("dal.toml", WIDENED)
    assert d.lines("dal.toml")[-1] == 'allow = ["sh"]'


def sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def d(durable):
    durable.write("dal.toml", ORIGINAL)
    durable.write("send.dal", SEND)
    return durable


def assert_held_to_the_original(d, receipt: dict, first_id: str) -> None:
    assert not (d.ws / "pwned.txt").exists()  # sh never ran
    assert d.lines("outbox.txt") == ["hi"]  # the approved send ran once
    items = {i["seq"]: i for i in receipt["effects"]["items"]}
    assert items[3]["status"] == "denied" and "sh" in items[3]["reason"]
    policy = receipt["policy"]
    assert policy["sha256"] == sha(ORIGINAL) and policy["source"] == str(d.ws.resolve() / "dal.toml")
    assert "sh" not in policy["allowed"] and "tee" in policy["approval"]
    assert policy["adopted_from"] == first_id
    assert policy["notices"] == [
        "dal.toml changed since this operation started; the stored policy is used; start a new operation "
        "to use the new file"
    ]
    d.check_store()


def test_dal_resume_uses_the_stored_policy_not_the_rewritten_file(d) -> None:
    first = d.run("run", "--key", "send:1", "send.dal")
    assert first.code == 3, first.err
    assert "workspace " + str(d.ws.resolve()) in first.err and "policy dal.toml" in first.err
    widen(d)
    waiting = d.latest()
    assert d.run("approve", "send:1").code == 0
    done = d.run("resume", "send:1")
    assert done.code == 0, done.err
    assert "dal: note: dal.toml changed since this operation started; the stored policy is used" in done.err
    assert done.out.endswith("send: completed sh: denied\n")
    assert_held_to_the_original(d, d.latest(), waiting["run_id"])


def test_the_same_key_again_uses_the_stored_policy(d) -> None:
    assert d.cli("run", "--key", "send:2", "send.dal").code == 3
    widen(d)
    waiting = d.latest()
    assert d.cli("approve", waiting["run_id"]).code == 0
    again = d.cli("run", "--key", "send:2", "send.dal")
    assert again.code == 0, again.err
    assert "dal.toml changed since this operation started" in again.err
    assert_held_to_the_original(d, d.latest(), waiting["run_id"])


def test_operation_in_the_script_uses_the_stored_policy(d) -> None:
    d.write("send.dal", 'operation("send:3")\n' + SEND)
    assert d.cli("run", "send.dal").code == 3
    widen(d)
    waiting = d.latest()
    assert d.cli("approve", "send:3").code == 0
    # No --key: the script names its operation, and its own policy (the rewritten file) is not the
    # operation's, so it stops before any effect of it (docs/policy.md, "Keys a script chooses").
    refused = d.cli("run", "send.dal")
    assert refused.code == 2, refused.err
    assert "a key the script chooses continues an operation only under the same policy" in refused.err
    assert not (d.ws / "pwned.txt").exists() and d.lines("outbox.txt") == []
    again = d.cli("run", "--key", "send:3", "send.dal")  # the operator asks for it
    assert again.code == 0, again.err
    assert_held_to_the_original(d, d.latest(), waiting["run_id"])


def test_a_keyless_run_resumes_under_its_stored_policy(d) -> None:
    assert d.cli("run", "send.dal").code == 3
    widen(d)
    waiting = d.latest()
    assert d.cli("approve", "latest").code == 0
    done = d.cli("resume", "latest")
    assert done.code == 0, done.err
    assert_held_to_the_original(d, d.latest(), waiting["run_id"])


def test_a_new_attempt_after_a_failure_keeps_the_operations_policy(d) -> None:
    d.write("retry.dal", """\
let again = run("test -e attempted.txt").ok
if not again {
    run("touch attempted.txt")
    run("printf '%s\\\\n' '[run]' 'allow = [\\"sh\\"]' > dal.toml")
    fail("the first attempt gives up")
}
let x = run("sh -c 'echo pwned > pwned.txt'")
print("sh:", x.status)
""")
    first = d.cli("run", "--key", "nightly", "retry.dal")
    assert first.code == 1, first.err
    widen(d)
    failed = d.latest()
    second = d.cli("run", "--key", "nightly", "retry.dal")  # a new attempt of the same operation
    assert second.code == 0, second.err
    assert second.out == "sh: denied\n" and not (d.ws / "pwned.txt").exists()
    receipt = d.latest()
    assert receipt["previous_run"] == failed["run_id"] and receipt["policy"]["adopted_from"] == failed["run_id"]
    assert receipt["policy"]["sha256"] == sha(ORIGINAL)
    assert "dal.toml changed since this operation started" in second.err
    # a new operation reads the file as it is now: the operator decides by choosing the key
    fresh = d.cli("run", "--key", "nightly-2", "retry.dal")
    assert fresh.code == 0 and (d.ws / "pwned.txt").exists()
    assert d.latest()["policy"]["sha256"] == sha(WIDENED) and d.latest()["policy"]["adopted_from"] is None


def test_flags_on_the_resume_command_add_and_are_recorded(d) -> None:
    assert d.cli("run", "--key", "send:4", "send.dal").code == 3
    assert d.cli("approve", "send:4").code == 0
    done = d.cli("resume", "send:4", "--allow-run=sh", "--allow-env=REGION")
    assert done.code == 0, done.err
    assert done.out.endswith("sh: completed\n") and (d.ws / "pwned.txt").exists()  # the operator allowed it
    policy = d.latest()["policy"]
    assert policy["added"] == {"allow_run": ["sh"], "allow_env": ["REGION"]}
    assert "sh" in policy["allowed"] and policy["env"] == ["REGION"]
    shown = d.cli("receipt", "show", "latest")
    assert "added here: --allow-run=sh --allow-env=REGION" in shown.out


def test_policy_flag_on_a_reinvocation_is_not_used(d, tmp_path: Path) -> None:
    wide = tmp_path / "wide.toml"  # outside the workspace: one inside is refused outright (test_policy_files.py)
    wide.write_text(WIDENED)
    assert d.cli("run", "--key", "send:5", "send.dal").code == 3
    (d.ws / "dal.toml").write_text(ORIGINAL)  # whatever the script did, the file is as it was
    assert d.cli("approve", "send:5").code == 0
    again = d.cli("run", "--key", "send:5", "--policy", str(wide), "send.dal")
    assert again.code == 0, again.err
    assert f"{wide} is not used: operation 'send:5' runs under the policy it started with (dal.toml)" in again.err
    assert not (d.ws / "pwned.txt").exists()
    assert d.latest()["policy"]["sha256"] == sha(ORIGINAL)


def test_a_key_is_continued_only_in_its_own_workspace(d, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    assert d.cli("run", "--key", "send:6", "send.dal").code == 3
    moved = d.cli("run", "--key", "send:6", "--workspace", str(other), "--store", str(d.db), "send.dal")
    assert moved.code == 2
    assert f"operation 'send:6' started in workspace {d.ws.resolve()}" in moved.err
    assert not (d.ws / "outbox.txt").exists()


def test_a_damaged_stored_policy_stops_the_resume(d) -> None:
    assert d.cli("run", "--key", "send:7", "send.dal").code == 3
    assert d.cli("approve", "send:7").code == 0
    with sqlite3.connect(d.db) as db:
        (raw,) = db.execute("select policy from runs order by started_at desc limit 1").fetchone()
        data = json.loads(raw)
        data["spec"]["policy"]["allowed"] = "sh"
        db.execute("update runs set policy = ? where policy = ?", (json.dumps(data), raw))
    done = d.cli("resume", "send:7")
    assert done.code == 2 and "the stored policy: allowed: expected a list of strings" in done.err
    again = d.cli("run", "--key", "send:7", "send.dal")
    assert again.code == 2 and "cannot continue under a policy DAL cannot read" in again.err
    assert not (d.ws / "outbox.txt").exists() and not (d.ws / "pwned.txt").exists()


def _as_an_older_dal(data: dict) -> dict:
    """A run row's start as a DAL before the run spec (and before the policy in force) stored it: the
    launch and the command line's flags only."""
    spec = data["spec"]
    launch = {k: spec[k] for k in ("cwd", "script", "workspace", "max_steps", "max_effects", "timeout", "max_memory")}
    args = {**spec["policy_flags"], "policy": spec["policy_file"], "workspace": None,
            "effect_timeout": spec["effect_timeout"], "require_sandbox": spec["require_sandbox"]}
    return {"launch": {**launch, "sha256": data["sha256"], "attempt": data["attempt"]}, "args": args}


def test_a_run_an_older_dal_started_resumes_under_its_flags(d) -> None:
    assert d.cli("run", "--key", "send:8", "send.dal").code == 3
    (d.ws / "dal.toml").write_text(ORIGINAL)
    with sqlite3.connect(d.db) as db:
        for rid, raw in db.execute("select run_id, policy from runs").fetchall():
            older = json.dumps(_as_an_older_dal(json.loads(raw)))
            db.execute("update runs set policy = ? where run_id = ?", (older, rid))
    assert d.cli("approve", "send:8").code == 0
    done = d.cli("resume", "send:8")
    assert done.code == 0, done.err
    assert "did not store its policy (an older DAL started it)" in done.err
    assert d.lines("outbox.txt") == ["hi"] and not (d.ws / "pwned.txt").exists()


def test_the_store_and_receipts_are_protected_wherever_they_are(d, tmp_path: Path) -> None:
    store, receipts = tmp_path / "elsewhere" / "runs.db", tmp_path / "receipts-out"
    store.parent.mkdir()
    r = d.cli("run", "--key", "send:9", "--store", str(store), "--receipts", str(receipts), "send.dal")
    assert r.code == 3
    with sqlite3.connect(store) as db:
        (raw,) = db.execute("select policy from runs").fetchone()
    from dal.effects import Policy

    policy = Policy.from_json(json.loads(raw)["spec"]["policy"])
    for path in (store, Path(f"{store}-wal"), store.parent / "locks" / "x", receipts / "run_x.json",
                 d.ws / "dal.toml"):
        assert policy.protection(str(path.resolve())) is not None, path
