"""One run specification (dal/runner/spec.py, built by dal/runner/build.py): the CLI, the API and resume
describe a run the same way, store it with the run and restore it — the two bugs of issue 14 included:
`[limits]` in dal.toml ignored by `dal.run()`, `dal.resume` restoring only some settings, and `~` in
`DAL_STORE` meaning one file for `dal run` and another for `dal receipts`."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import dal
from dal.core import defaults
from dal.receipts.location import StoreLocation, StoreLocationError
from dal.runner.build import SpecError, build_spec, resume_spec
from dal.runner.spec import RunSpec
from dal.runner.stored import StoredRun

LIMITS = '[limits]\ntimeout = 1\nmax_output = 1000\nmax_file_size = "64K"\n'
# Each line meets one limit of the policy file: the command timeout, the output kept, the file size.
LIMITED = """\
print(run("sleep 3").status)
print(len(run("seq 1 5000").stdout) < 2000)
print(run("seq 1 100000 > big.txt").status)
"""
LIMITED_OUT = "timeout\ntrue\nfailed\n"


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("DAL_STORE", "NO_COLOR")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=120)


def stored_spec(db: Path, run_id: str) -> RunSpec:
    with sqlite3.connect(db) as c:
        (raw,) = c.execute("select policy from runs where run_id = ?", (run_id,)).fetchone()
    spec = StoredRun.of({"policy": json.loads(raw)}).spec
    assert spec is not None
    return spec


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    monkeypatch.delenv("DAL_STORE", raising=False)
    monkeypatch.chdir(w)
    return w


# --- the spec itself -----------------------------------------------------------------------------------


def test_a_spec_round_trips_through_json_with_its_version(ws: Path) -> None:
    (ws / "p.toml").write_text('[run]\nallow = ["git"]\n')
    spec = build_spec("s.dal", policy_file="p.toml", policy_flags={"allow_run": ["sh"], "allow_net": True},
                      max_steps=7, max_effects=3, timeout=9.5, max_memory="512M", effect_timeout=2,
                      max_output=4096, require_sandbox=True, unsandboxed_as_root=True, key="k", new_attempt=True,
                      wait=1.5, receipts="out", store="runs.db")
    data = json.loads(json.dumps(spec.to_json()))
    assert data["version"] == 1
    assert RunSpec.from_json(data) == spec
    assert (spec.script, spec.workspace, spec.receipts, spec.store.path) == (
        str(ws / "s.dal"), str(ws), str(ws / "out"), str(ws / "runs.db"))
    assert spec.max_memory == 512 << 20 and spec.policy.allow_net and "sh" in spec.policy.allowed
    with pytest.raises(SpecError, match="version 2"):
        RunSpec.from_json({**data, "version": 2})
    with pytest.raises(SpecError, match="max_steps"):
        RunSpec.from_json({**data, "max_steps": "7"})


def test_the_defaults_are_written_once_and_every_front_end_uses_them(ws: Path) -> None:
    spec = build_spec("s.dal")
    assert (spec.max_steps, spec.max_memory, spec.effect_timeout, spec.max_output) == (
        defaults.MAX_STEPS, defaults.MAX_MEMORY, None, None)
    assert RunSpec.effective_effect_timeout(None, spec.policy) == defaults.EFFECT_TIMEOUT
    assert RunSpec.effective_max_output(None, spec.policy) == defaults.MAX_OUTPUT
    (ws / "s.dal").write_text('print("x")\n')
    assert dal.run(ws / "s.dal").steps["budget"] == defaults.MAX_STEPS
    shown = cli("run", "--json", "s.dal", cwd=ws)
    assert json.loads(shown.stdout)["steps"]["budget"] == defaults.MAX_STEPS
    assert f"default {defaults.MAX_STEPS:,}" in cli("run", "--help", cwd=ws).stdout


def test_bad_settings_are_named(ws: Path) -> None:
    for kw, named in (({"max_steps": 0}, "max_steps"), ({"max_steps": True}, "max_steps"),
                      ({"timeout": -1}, "timeout"), ({"max_memory": "1K"}, "max_memory"),
                      ({"policy_flags": {"allow_everything": True}}, "allow_everything"),
                      ({"store": "mysql://db/runs"}, "no mysql store")):
        with pytest.raises(SpecError, match=named):
            build_spec("s.dal", **kw)
    with pytest.raises(dal.DalUsageError, match="max_effects"):
        dal.run('print("x")', workspace=ws, max_effects=-2)


# --- bug 1: [limits] of the policy in force, through the CLI, the API and resume ------------------------


def test_policy_limits_apply_to_dal_run_and_to_the_api_alike(ws: Path) -> None:
    (ws / "dal.toml").write_text(LIMITS)
    (ws / "s.dal").write_text(LIMITED)
    by_cli = cli("run", "-q", "s.dal", cwd=ws)
    assert by_cli.returncode == 0, by_cli.stderr
    assert by_cli.stdout == LIMITED_OUT
    assert dal.run(ws / "s.dal").output == LIMITED_OUT
    assert dal.run(LIMITED, workspace=ws).output == LIMITED_OUT


def test_policy_limits_apply_after_a_resume(ws: Path) -> None:
    # The operation's stored policy (with its [limits]) governs the resumed run, not a changed file.
    (ws / "dal.toml").write_text(LIMITS + '[programs.tee]\napproval = true\n')
    (ws / "s.dal").write_text('run("echo go | tee -a log.txt")\n' + LIMITED)
    first = dal.run(ws / "s.dal", key="lim")
    assert first.status == "waiting"
    (ws / "dal.toml").write_text('[programs.tee]\napproval = true\n')  # the limits are gone from the file
    dal.approve(first.run_id)
    done = dal.resume(first.run_id)
    assert done.status == "completed" and done.output == LIMITED_OUT
    # and through the command line
    (ws / "dal.toml").write_text(LIMITS + '[programs.tee]\napproval = true\n')
    first = cli("run", "--key", "lim2", "s.dal", cwd=ws)
    assert first.returncode == 3, first.stderr
    (ws / "dal.toml").write_text('[programs.tee]\napproval = true\n')
    assert cli("approve", "lim2", cwd=ws).returncode == 0
    resumed = cli("resume", "-q", "lim2", cwd=ws)
    assert resumed.returncode == 0 and resumed.stdout == LIMITED_OUT, resumed.stderr


# --- bug 2: resume restores every stored setting ---------------------------------------------------------

WAITS_THEN_SLEEPS = 'run("echo go | tee -a log.txt")\nprint(run("sleep 3").status)\n'


def _ask_for_approval(ws: Path) -> None:
    (ws / "dal.toml").write_text('[programs.tee]\napproval = true\n')
    (ws / "s.dal").write_text(WAITS_THEN_SLEEPS)


def _check_restored(ws: Path, db: Path, receipt: dict, first_id: str) -> None:
    assert receipt["status"] == "completed"
    assert receipt["steps"]["budget"] == 5000 and receipt["effects"]["budget"] == 5
    assert (ws / "rc" / f"{receipt['run_id']}.json").is_file()  # the run's receipts folder
    spec = stored_spec(db, receipt["run_id"])
    first = stored_spec(db, first_id)
    for name in ("script", "workspace", "receipts", "max_steps", "max_effects", "timeout", "max_memory",
                 "effect_timeout", "require_sandbox", "key"):
        assert getattr(spec, name) == getattr(first, name), name
    assert (spec.timeout, spec.max_memory, spec.effect_timeout) == (60.0, 512 << 20, 1.0)
    assert spec.resume == first_id


def test_dal_resume_in_the_api_restores_every_setting(ws: Path) -> None:
    _ask_for_approval(ws)
    first = dal.run(ws / "s.dal", key="all", max_steps=5000, max_effects=5, timeout=60, max_memory="512M",
                    effect_timeout=1, receipts_dir=ws / "rc")
    assert first.status == "waiting"
    dal.approve(first.run_id)
    done = dal.resume(first.run_id)
    assert done.output.endswith("timeout\n")  # the run's --effect-timeout 1, not the default 30 s
    _check_restored(ws, ws / ".dal" / "dal.db", done.data, first.run_id)


def test_dal_resume_on_the_command_line_restores_every_setting(ws: Path) -> None:
    _ask_for_approval(ws)
    first = cli("run", "--json", "--key", "all", "--max-steps", "5000", "--max-effects", "5", "--timeout", "60",
                "--max-memory", "512M", "--effect-timeout", "1", "--receipts", "rc", "s.dal", cwd=ws)
    assert first.returncode == 3, first.stderr
    assert cli("approve", "all", cwd=ws).returncode == 0
    done = cli("resume", "--json", "all", cwd=ws)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "timeout"
    _check_restored(ws, ws / ".dal" / "dal.db", json.loads(done.stdout), json.loads(first.stdout)["run_id"])


def test_resume_overrides_budgets_and_only_narrows_the_sandbox(ws: Path) -> None:
    _ask_for_approval(ws)
    first = dal.run(ws / "s.dal", key="o", max_steps=5000, effect_timeout=1)
    dal.approve(first.run_id)
    with dal_store(ws) as db:
        row = db.run_row(first.run_id)
    spec = resume_spec(row, store=StoreLocation.parse(None, ws), max_steps=9000, require_sandbox=True,
                       policy_flags={"allow_run": ["git"]})
    assert (spec.max_steps, spec.effect_timeout, spec.require_sandbox) == (9000, 1.0, True)
    assert spec.policy_flags["allow_run"] == ["git"] and spec.resume == first.run_id and spec.key is None
    assert resume_spec(row, store=StoreLocation.parse(None, ws)).unsandboxed_as_root is False


def dal_store(ws: Path):  # noqa: ANN201 - a context manager
    from dal.receipts.store import Store

    return Store(ws / ".dal" / "dal.db", readonly=True)


# --- bug 3: one parser for the store's location -------------------------------------------------------


def test_a_tilde_in_dal_store_is_the_same_file_for_run_receipts_and_resume(ws: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "DAL_STORE": "~/s.db"}
    (ws / "dal.toml").write_text('[programs.tee]\napproval = true\n')
    (ws / "s.dal").write_text('run("echo go | tee -a log.txt")\n')
    ran = cli("run", "--key", "t", "s.dal", cwd=ws, env=env)
    assert ran.returncode == 3, ran.stderr
    assert (home / "s.db").is_file() and not (ws / "~").exists() and not (ws / ".dal" / "dal.db").exists()
    listed = cli("receipts", "--json", cwd=ws, env=env)
    assert [r["key"] for r in json.loads(listed.stdout)["runs"]] == ["t"], listed.stderr
    assert cli("approve", "t", cwd=ws, env=env).returncode == 0
    assert cli("resume", "t", cwd=ws, env=env).returncode == 0
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DAL_STORE", "~/s.db")
    assert [r.status for r in dal.list_receipts()] == ["completed", "waiting"]
    assert dal.run('print("api")').output == "api\n"
    assert len(dal.list_receipts()) == 3 and not (ws / "~").exists()
    assert StoreLocation.parse(None, ws).path == str(home / "s.db")
    assert StoreLocation.parse("sqlite:///srv/x.db", ws).path == "/srv/x.db"
    with pytest.raises(StoreLocationError, match="no mysql store"):
        StoreLocation.parse("mysql://host/db", ws)


# --- `next:` commands reproduce the run --------------------------------------------------------------


def test_the_next_command_reproduces_the_run_with_its_flags(ws: Path) -> None:
    (ws / "s.dal").write_text('let r = run("sh -c \\"exit 0\\"")\nlet x = 1 + "a"\n')
    failed = cli("run", "--key", "n", "--max-steps", "500", "--allow-run=sh", "--effect-timeout", "7",
                 "--receipts", "rc", "s.dal", cwd=ws)
    assert failed.returncode == 1, failed.stderr
    line = [x for x in failed.stderr.splitlines() if x.startswith("dal: next:")][0]
    command = line.rsplit("`", 2)[1]
    argv = shlex.split(command)
    assert argv == ["dal", "run", "--key", "n", "--allow-run=sh", "--max-steps", "500", "--effect-timeout", "7",
                    "--receipts", "rc", "s.dal"]
    (ws / "s.dal").write_text('let r = run("sh -c \\"exit 0\\"")\nprint(r.status)\n')
    again = cli(*argv[1:], cwd=ws)
    assert again.returncode == 0 and again.stdout == "completed\n", again.stderr
    shown = cli("receipt", "show", "n", "--json", cwd=ws)
    assert json.loads(shown.stdout)["steps"]["budget"] == 500
