"""How much command output one run journals is the operator's to set: `--max-stored-output` on `dal run` (stored
with the run, so its resumes keep it), `$DAL_RUN_STORE_LIMIT`, or `[limits] max_stored_output` in dal.toml.
Past it the next effect does not start (exit 2) and a resume goes on; each case counts the appends that ran."""

from __future__ import annotations

import pytest

# Each seq journals about 169 KB: with a 200K limit the second one takes the run past it, so the append after it
# does not start.
SCRIPT = 'for i in range(4) {\n  let r = run("seq 1 30000")\n  run("echo " + str(i) + " >> done.txt")\n}\n'


def test_the_flag_is_stored_with_the_run_and_its_resume_keeps_it(durable) -> None:
    d = durable
    d.write("s.dal", SCRIPT)
    first = d.cli("run", "--max-stored-output", "200K", "s.dal")
    assert first.code == 2 and "more than one run may store (204,800 bytes" in first.err, first.err
    assert d.lines("done.txt") == ["0"]
    assert d.latest()["rerun"][2:4] == ["--max-stored-output", "204800"]
    again = d.cli("resume", "latest")  # no flag: the run's own limit, not the default 256M
    assert again.code == 2 and "204,800 bytes" in again.err, again.err
    assert d.lines("done.txt") == ["0", "1", "2"]
    done = d.cli("resume", "latest", "--max-stored-output", "10M")  # a resume may raise it
    assert done.code == 0, done.err
    assert d.lines("done.txt") == ["0", "1", "2", "3"]
    d.check_store()


def test_the_policy_sets_it_and_the_environment_and_the_flag_win_over_it(durable,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    d = durable
    d.write("dal.toml", '[limits]\nmax_stored_output = "200K"\n')
    d.write("s.dal", SCRIPT)
    assert d.cli("run", "--key", "a", "s.dal").code == 2
    assert d.lines("done.txt") == ["0"]
    monkeypatch.setenv("DAL_RUN_STORE_LIMIT", "10M")
    assert d.cli("run", "--key", "b", "s.dal").code == 0  # the environment over the policy
    assert d.lines("done.txt") == ["0", "0", "1", "2", "3"]
    assert d.cli("run", "--key", "c", "--max-stored-output", "200K", "s.dal").code == 2  # the flag over both
    assert d.lines("done.txt") == ["0", "0", "1", "2", "3", "0"]


@pytest.mark.parametrize("value", ['"lots"', "0", "-5", "true"])
def test_a_bad_limit_in_the_policy_is_refused_naming_the_key_and_nothing_runs(durable, value: str) -> None:
    d = durable
    d.write("dal.toml", f"[limits]\nmax_stored_output = {value}\n")
    d.write("s.dal", SCRIPT)
    got = d.cli("run", "s.dal")
    assert got.code == 2 and "limits.max_stored_output" in got.err, got.err
    assert d.lines("done.txt") == []


@pytest.mark.parametrize(("value", "allowed"), [("1T", 1 << 40), ("512MB", 512 << 20), ("1.5G", 3 << 29),
                                                ("200KiB", 200 << 10), ("4096", 4096)])
def test_every_size_reads_the_same_wherever_it_is_given(monkeypatch: pytest.MonkeyPatch, tmp_path, value: str,
                                                        allowed: int) -> None:
    """One grammar (dal/core/sizes.py) for the variable, the flag and the policy: `1T`, `512MB` and `1.5G`
    used to make $DAL_RUN_STORE_LIMIT the default 256 MiB without a word."""
    from dal.effects.policy import Policy
    from dal.runner.build import parse_memory
    from dal.runner.journal import run_store_limit

    monkeypatch.setenv("DAL_RUN_STORE_LIMIT", value)
    assert run_store_limit() == allowed
    assert parse_memory(value, minimum=1) == allowed
    (tmp_path / "dal.toml").write_text(f'[limits]\nmax_stored_output = "{value}"\n')
    assert Policy.load(tmp_path).limit("max_stored_output") == allowed


def test_an_unreadable_environment_limit_is_refused_and_nothing_runs(durable, monkeypatch: pytest.MonkeyPatch) -> None:
    d = durable
    d.write("s.dal", SCRIPT)
    monkeypatch.setenv("DAL_RUN_STORE_LIMIT", "lots")
    got = d.cli("run", "s.dal")
    assert got.code == 2 and "DAL_RUN_STORE_LIMIT=lots: expected a size such as 512M" in got.err, got.err
    assert "nothing ran" in got.err and d.lines("done.txt") == []
    assert d.cli("run", "--max-stored-output", "10M", "s.dal").code == 0  # the flag wins: the variable is unused
