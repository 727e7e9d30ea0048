"""`dal.run` and `dal.resume` keep the operation's policy: a script that rewrote dal.toml to allow `sh`
gets no `sh` on `dal.resume` or on `dal.run` with the same key; `dal.resume` may only add flags."""

from __future__ import annotations

from pathlib import Path

import pytest

import dal

ORIGINAL = '[run]\nrequire_approval = ["tee"]\n'
SEND = """\
let w = run("printf '%s\\\\n' '[run]' 'allow = [\\"sh\\"]' > dal.toml")
let s = run("echo hi | tee -a outbox.txt")
let x = run("sh -c 'echo pwned > pwned.txt'")
print("send:", s.status, "sh:", x.status)
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "dal.toml").write_text(ORIGINAL)
    (tmp_path / "send.dal").write_text(SEND)
    return tmp_path


def widen(ws: Path) -> None:
    if "sh" not in (ws / "dal.toml").read_text():  # the protected paths stopped the script: as if they had not
        (ws / "dal.toml").write_text('[run]\nallow = ["sh"]\n')


def test_resume_keeps_the_stored_policy(ws: Path) -> None:
    waiting = dal.run(ws / "send.dal", workspace=ws, key="api:1")
    assert waiting.status == "waiting" and waiting.policy["approval"] == ["tee"]
    widen(ws)
    dal.approve(waiting.run_id, workspace=ws)
    done = dal.resume(waiting.run_id, workspace=ws)
    assert done.status == "completed" and done.output == "send: completed sh: denied\n"
    assert not (ws / "pwned.txt").exists() and (ws / "outbox.txt").read_text() == "hi\n"
    assert done.policy["adopted_from"] == waiting.run_id and done.policy["sha256"] == waiting.policy["sha256"]
    assert "dal.toml changed since this operation started" in done.policy["notices"][0]


def test_run_with_the_same_key_keeps_the_stored_policy(ws: Path) -> None:
    waiting = dal.run(ws / "send.dal", workspace=ws, key="api:2")
    widen(ws)
    dal.approve(waiting.run_id, workspace=ws)
    again = dal.run(ws / "send.dal", workspace=ws, key="api:2", policy=str(ws / "dal.toml"))
    assert again.status == "completed" and again.output.endswith("sh: denied\n")
    assert not (ws / "pwned.txt").exists()


def test_resume_adds_flags_only(ws: Path) -> None:
    from dal.effects import Policy

    waiting = dal.run(ws / "send.dal", workspace=ws, key="api:3")
    dal.approve(waiting.run_id, workspace=ws)
    for bad in (Policy.load(ws, allow_run=["sh"]), str(ws / "dal.toml"), {"file": "dal.toml"}):
        with pytest.raises(dal.DalUsageError, match="may only add to it"):
            dal.resume(waiting.run_id, workspace=ws, policy=bad)
    done = dal.resume(waiting.run_id, workspace=ws, policy={"allow_run": ["sh"]})
    assert done.output.endswith("sh: completed\n") and (ws / "pwned.txt").exists()
    assert done.policy["added"] == {"allow_run": ["sh"]}


def test_run_finds_the_workspace_from_a_subfolder(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "sub").mkdir()
    (ws / "plain.dal").write_text('let s = run("echo hi | tee -a outbox.txt")\nprint(s.status)\n')
    monkeypatch.chdir(ws / "sub")
    r = dal.run(ws / "plain.dal")  # no workspace: found from the current directory, as `dal run` finds it
    assert r.status == "waiting" and r.workspace == str(ws.resolve())
    assert [x.run_id for x in dal.list_receipts()] == [r.run_id]


def test_limits_come_from_the_policy_in_force(ws: Path) -> None:
    (ws / "dal.toml").write_text("[limits]\ntimeout = 1\n")
    r = dal.run('print(run("sleep 2").status)\n', workspace=ws)
    assert r.output == "timeout\n"  # [limits] timeout applies through the API too
