"""Policy files are protected (docs/policy.md, "Policy files are protected"): a policy file the operator
names with --policy is not rewritten by a run under another policy. Executed: a
default-policy run rewrites `ci/strict.toml` in the workspace to allow `sh` and a read root outside; the
operator's next `dal run --policy ci/strict.toml` is refused before anything runs, and a policy file the
store recorded (outside the workspace, inside another run's write root) is not writable by any later run,
by the check or inside the wall."""

from __future__ import annotations

from pathlib import Path

import pytest

from dal.effects.wall.sandbox import sandbox_status

HAVE_BWRAP = sandbox_status()[0]
STRICT = '[paths]\nwrite = ["out"]\n'


@pytest.fixture
def ws(durable, tmp_path: Path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "canary.txt").write_text("OUTSIDE-CANARY\n")
    return durable


def test_a_policy_file_inside_the_workspace_is_refused_after_a_run_rewrote_it(ws, tmp_path: Path) -> None:
    d = ws
    (d.ws / "ci").mkdir()
    d.write("ci/strict.toml", STRICT)
    outside = tmp_path / "outside"
    # run 1, the default policy: the script rewrites the operator's other policy file
    evil = f'[run]\\\\nallow = [\\"sh\\"]\\\\n[paths]\\\\nread = [\\"{outside}\\"]\\\\n'
    d.write("quick.dal", f'print(run("printf \'{evil}\' > ci/strict.toml").status)\n')
    assert d.cli("run", "quick.dal").code == 0
    assert "sh" in (d.ws / "ci" / "strict.toml").read_text()  # the script did rewrite it
    # run 2, the operator's usual command: refused, nothing ran
    d.write("agent.dal", f'print(run(["sh", "-c", "cat {outside}/canary.txt; echo ran > marker"]).stdout)\n')
    before = len(d.receipts())
    r = d.cli("run", "--policy", "ci/strict.toml", "agent.dal")
    assert r.code == 2
    assert "ci/strict.toml: the policy file is inside the workspace" in r.err and "Nothing ran" in r.err
    assert "OUTSIDE-CANARY" not in r.out + r.err and not (d.ws / "marker").exists()
    assert len(d.receipts()) == before


def test_a_policy_file_named_dal_toml_or_outside_the_workspace_is_used(ws, tmp_path: Path) -> None:
    d = ws
    (d.ws / "ci" / "strict").mkdir(parents=True)
    d.write("ci/strict/dal.toml", STRICT)  # protected by name in every run
    d.write("s.dal", 'print(run("touch out/x").status)\n')
    (d.ws / "out").mkdir()
    r = d.cli("run", "--policy", "ci/strict/dal.toml", "s.dal")
    assert r.code == 0 and r.out == "completed\n", r.err
    shared = tmp_path / "shared.toml"
    shared.write_text(STRICT)
    assert d.cli("run", "--policy", str(shared), "s.dal").code == 0


def _recorded(d, tmp_path: Path) -> Path:
    """A policy file outside the workspace that a run of it started under (so the store recorded it)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    policy = shared / "strict.toml"
    policy.write_text(STRICT)
    (d.ws / "out").mkdir()
    d.write("s.dal", 'print(run("touch out/x").status)\n')
    assert d.cli("run", "--policy", str(policy), "s.dal").code == 0
    return policy


def test_a_recorded_policy_file_is_not_written_by_a_run_under_another_policy(ws, tmp_path: Path) -> None:
    d = ws
    policy = _recorded(d, tmp_path)
    d.write("w.dal", f'print(run(["tee", "{policy}"]).status)\n'
                     f'print(run("printf \'[run]\\\\nallow = [1]\\\\n\' > {policy}").status)\n')
    r = d.cli("run", f"--allow-write={d.ws},{policy.parent}", "w.dal")
    assert r.out.splitlines() == ["denied", "denied"], r
    assert "is protected" in d.latest()["effects"]["items"][0]["reason"]
    assert policy.read_text() == STRICT
    # `dal policy check` says what `dal run` does (it said allow, the run denied)
    c = d.cli("policy", "check", f"tee {policy}", f"--allow-write={d.ws},{policy.parent}")
    assert c.code == 1 and c.out.startswith("deny: writes a protected path:") and str(policy) in c.out, c
    c = d.cli("policy", "check", "tee .dal/dal.db")
    assert c.code == 1 and "protected" in c.out, c


@pytest.mark.skipif(not HAVE_BWRAP, reason="no bwrap")
def test_a_recorded_policy_file_is_read_only_in_the_wall(ws, tmp_path: Path) -> None:
    d = ws
    policy = _recorded(d, tmp_path)
    # sh has no argument model: only the wall stands between it and the file
    d.write("w.dal", f'let r = run(["sh", "-c", "echo HACKED > {policy}; echo wrote"])\nprint(r.status)\n')
    r = d.cli("run", "--require-sandbox", "--allow-run=sh", f"--allow-write={d.ws},{policy.parent}", "w.dal")
    assert r.code == 0, r
    assert policy.read_text() == STRICT
    (policy.parent / "other.txt").write_text("x")
    d.write("c.dal", f'print(run(["sh", "-c", "echo ok > {policy.parent}/other.txt"]).status)\n')
    assert d.cli("run", "--require-sandbox", "--allow-run=sh", f"--allow-write={d.ws},{policy.parent}",
                 "c.dal").out == "completed\n"  # control: the folder itself is writable
    assert (policy.parent / "other.txt").read_text() == "ok\n"
