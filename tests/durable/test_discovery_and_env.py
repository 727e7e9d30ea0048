"""Workspace discovery through the commands (`cd sub && dal run ../send.dal` waits for approval, and every
command finds the same workspace and store), and env(): a secret in DAL's own environment never reaches
the script's output, a workspace file, the store or the receipt unless the policy names it. Executed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
POLICY = '[run]\nrequire_approval = ["tee"]   # each line tee appends to outbox.txt is one message sent\n'
SEND = 'let s = run("echo hi | tee -a outbox.txt")\nprint("send:", s.status)\n'
SECRET = "s3cr3t-9f2c71d4e8"


def dal(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    full = {k: v for k, v in os.environ.items() if k not in ("DAL_STORE", "NO_COLOR")}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=cwd, capture_output=True, text=True,
                          env=full, timeout=60)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "job"
    (root / "sub").mkdir(parents=True)
    (root / "dal.toml").write_text(POLICY)
    (root / "send.dal").write_text(SEND)
    return root.resolve()


def test_a_run_from_a_subfolder_finds_the_workspace_and_its_approval_gate(ws: Path) -> None:
    sub = ws / "sub"
    r = dal("run", "../send.dal", cwd=sub)
    assert r.returncode == 3, r.stderr  # waits for approval instead of sending at once
    assert not (ws / "outbox.txt").exists() and not (sub / "outbox.txt").exists()
    assert f"· workspace {ws} · policy dal.toml" in r.stderr
    assert (ws / ".dal" / "dal.db").exists() and not (sub / ".dal").exists()  # the store follows the workspace
    listing = dal("receipts", "--waiting", cwd=sub)
    assert listing.returncode == 0 and "waiting" in listing.stdout
    shown = dal("receipt", "show", "latest", cwd=sub)
    assert f"workspace     {ws}" in shown.stdout or f"workspace  {ws}" in shown.stdout
    assert dal("approve", "latest", cwd=sub).returncode == 0
    done = dal("resume", "latest", cwd=sub)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "send: completed\n" and (ws / "outbox.txt").read_text() == "hi\n"


def test_policy_check_says_which_workspace_and_policy(ws: Path) -> None:
    r = dal("policy", "check", "echo hi | tee -a outbox.txt", cwd=ws / "sub")
    assert r.returncode == 0
    assert r.stdout.startswith("approval required: tee requires approval")
    assert f"  workspace:  {ws} (dal.toml)\n" in r.stdout
    assert "  policy:     dal.toml (sha256 " in r.stdout
    # --workspace overrides discovery
    r = dal("policy", "check", "--workspace", ".", "echo hi | tee -a outbox.txt", cwd=ws / "sub")
    assert r.stdout.startswith("allow: ") and f"  workspace:  {ws / 'sub'} (--workspace)" in r.stdout


def test_a_nested_workspace_is_used_and_said(ws: Path) -> None:
    inner = ws / "sub"
    (inner / "dal.toml").write_text("")  # the default toolset: tee without approval
    (inner / "send.dal").write_text(SEND)
    r = dal("run", "send.dal", cwd=inner)
    assert r.returncode == 0, r.stderr
    assert f"dal: note: workspace {inner} (dal.toml) is inside workspace {ws}: the nearest one is used" in r.stderr
    # Said once per workspace: once its first run made its .dal/, no command says it again.
    again = dal("run", "send.dal", cwd=inner)
    assert again.returncode == 0 and "is inside workspace" not in again.stderr, again.stderr
    assert "is inside workspace" not in dal("policy", "check", "true", cwd=inner).stderr


def secret_anywhere(root: Path) -> list[str]:
    """Every file under `root` (the store and receipts included) whose bytes contain the secret."""
    return [str(p) for p in root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


LEAK = """\
let s = env("DAL_TEST_SECRET")
print("secret:", s, "tz:", env("TZ"))
run("printf '%s' '" + str(s) + "' > leak.txt")
let tries = 0
while tries < 1 and s != "" {
    tries = tries + 1
}
finish({"secret": s})
"""


def test_env_does_not_hand_the_operators_secret_to_the_script(tmp_path: Path) -> None:
    (tmp_path / "leak.dal").write_text(LEAK)
    r = dal("run", "leak.dal", cwd=tmp_path, DAL_TEST_SECRET=SECRET, TZ="UTC")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "secret: null tz: UTC\n"  # TZ is in the harmless set
    assert SECRET not in r.stdout + r.stderr
    assert (tmp_path / "leak.txt").read_text() == "null"
    assert secret_anywhere(tmp_path) == []  # not in a workspace file, the store or the receipts
    assert "dal: note: env() returned null for DAL_TEST_SECRET: the policy does not let scripts read it" in r.stderr
    import json

    receipt = json.loads(next((tmp_path / ".dal" / "receipts").glob("*.json")).read_text())
    assert receipt["result"] == {"secret": None} and receipt["policy"]["env_withheld"] == ["DAL_TEST_SECRET"]


@pytest.mark.parametrize("how", ["flag", "toml"])
def test_env_reads_a_variable_the_policy_names(tmp_path: Path, how: str) -> None:
    (tmp_path / "leak.dal").write_text(LEAK)
    args = ["--allow-env=DAL_TEST_SECRET"] if how == "flag" else []
    if how == "toml":
        (tmp_path / "dal.toml").write_text('[env]\nallow = ["DAL_TEST_SECRET"]\n')
    r = dal("run", "leak.dal", *args, cwd=tmp_path, DAL_TEST_SECRET=SECRET)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"secret: {SECRET} ")  # the control: the test sees a leak when there is one
    assert (tmp_path / "leak.txt").read_text() == SECRET


def test_env_before_operation_cannot_use_a_wider_file_than_the_operation(tmp_path: Path) -> None:
    (tmp_path / "dal.toml").write_text(POLICY)
    (tmp_path / "op.dal").write_text('let early = env("DAL_TEST_SECRET")\noperation("op:1")\n' + SEND)
    assert dal("run", "op.dal", cwd=tmp_path, DAL_TEST_SECRET=SECRET).returncode == 3
    # the file now lets scripts read the secret (a wall that missed a write): the operation did not
    (tmp_path / "dal.toml").write_text(POLICY + '[env]\nallow = ["DAL_TEST_SECRET"]\n')
    assert dal("approve", "op:1", cwd=tmp_path).returncode == 0
    r = dal("run", "op.dal", cwd=tmp_path, DAL_TEST_SECRET=SECRET)
    # The script chose the key and its policy (the new file) is not the operation's: it stops there.
    assert r.returncode == 2
    assert "a key the script chooses continues an operation only under the same policy" in r.stderr
    assert SECRET not in r.stdout + r.stderr
    assert not (tmp_path / "outbox.txt").exists()  # nothing ran after it


def test_dal_api_withholds_the_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dal as api

    monkeypatch.setenv("DAL_TEST_SECRET", SECRET)
    (tmp_path / "leak.dal").write_text(LEAK)
    r = api.run(tmp_path / "leak.dal", workspace=tmp_path)
    assert r.status == "completed" and SECRET not in r.output and secret_anywhere(tmp_path) == []
    allowed = api.run(tmp_path / "leak.dal", workspace=tmp_path, policy={"allow_env": ["DAL_TEST_SECRET"]})
    assert SECRET in allowed.output and allowed.policy["env"] == ["DAL_TEST_SECRET"]


def test_dal_test_withholds_the_secret(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "leak.dal").write_text('print("workflow:", env("DAL_TEST_SECRET"))\n')
    (tmp_path / "tests" / "env.test.dal").write_text(
        'print("test:", env("DAL_TEST_SECRET"))\n'
        'let r = invoke("../leak.dal")\n'
        'print(r.output)\n'
        'print("withheld:", r.policy.env_withheld)\n'
        'let r2 = invoke("../leak.dal", {"policy": {"allow_env": ["DAL_TEST_SECRET"]}})\n'
        'assert(contains(r2.output, "workflow: s3cr3t"), "an invoke that names it reads it")\n'
    )
    r = dal("test", "-v", cwd=tmp_path, DAL_TEST_SECRET=SECRET)
    # The test script may not grant its workflows what the operator did not give `dal test`.
    assert r.returncode == 1 and "env() of DAL_TEST_SECRET, which `dal test` was not given" in r.stdout, r.stdout
    assert "test: null" in r.stdout and "workflow: null" in r.stdout
    assert 'withheld: ["DAL_TEST_SECRET"]' in r.stdout
    assert f"test: {SECRET}" not in r.stdout
    flagged = dal("test", "-v", "--allow-env=DAL_TEST_SECRET", cwd=tmp_path, DAL_TEST_SECRET=SECRET)
    assert flagged.returncode == 0 and f"test: {SECRET}" in flagged.stdout and f"workflow: {SECRET}" in flagged.stdout
    bad = dal("test", "--allow-env=NOT-A-NAME", cwd=tmp_path)
    assert bad.returncode == 2 and "is not an environment variable name" in bad.stderr
