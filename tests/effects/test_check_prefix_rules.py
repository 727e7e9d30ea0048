"""Prefix rules (`[[rules]]` in dal.toml, issue 27): a decision on commands by their first words, with a
justification a person reads and examples checked when the policy loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dal.effects import Policy
from dal.effects.classify.check import check_command
from dal.effects.policy import PolicyError
from dal.effects.policy.narrowing import beyond, capped

RULES = '''
[run]
require_approval = ["rm"]

[[rules]]
prefix = ["git", ["push", "fetch"]]
decision = "approve"
justification = "it talks to a remote; a person says when"
match = ["git push origin main", "git fetch", "git -C . push"]
not_match = ["git status", "git pushx"]

[[rules]]
prefix = ["git", "status"]
decision = "allow"
justification = "git status only reads"
match = ["git status --short"]
not_match = ["git -C . status"]

[[rules]]
prefix = ["rm", "-rf"]
decision = "deny"
justification = "remove folders one by one"
match = ["rm -rf build"]

[[rules]]
prefix = ["rm", "-f"]
decision = "allow"
justification = "cleaning up files needs no person"
match = ["rm -f x.tmp"]
'''


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    (tmp_path / "dal.toml").write_text(RULES)
    (tmp_path / "x.tmp").write_text("")
    return Policy.load(tmp_path)


def test_a_deny_rule_refuses_with_its_justification(policy: Policy) -> None:
    d = check_command("rm -rf x.tmp", policy)
    assert not d.allowed
    assert d.reason.startswith("rm -rf is denied by the rule `rm -rf` (") and d.reason.endswith(
        "remove folders one by one")


def test_an_approve_rule_waits_for_a_person_and_says_why(policy: Policy) -> None:
    d = check_command("git push origin main", policy.extended(allow_run=["git"]))
    assert d.allowed and d.approval_required
    assert "`git {push,fetch}` requires approval" in d.reason and d.reason.endswith("a person says when")


def test_an_allow_rule_runs_its_prefix_alone(policy: Policy) -> None:
    """git is not allowed by name: `git status` runs by its rule, and nothing else of git does."""
    d = check_command("git status --short", policy)
    assert d.allowed and not d.approval_required, d.reason
    assert not check_command("git log", policy).allowed
    assert not check_command("git -C . status", policy).allowed  # a respelling gains nothing
    # An allow rule spares the approval the program needs; the program's other commands still need it.
    assert not check_command("rm -f x.tmp", policy).approval_required
    assert check_command("rm x.tmp", policy).approval_required


@pytest.mark.parametrize("command", ["git -C . push", "git -c user.name=x fetch", "git --no-pager push",
                                     "git --git-dir=.git push", "git --some-new-option push"])
def test_a_respelling_does_not_escape_an_approval(policy: Policy, command: str) -> None:
    d = check_command(command, policy.extended(allow_run=["git"]))
    assert d.approval_required or not d.allowed, d.reason


def test_the_most_severe_rule_of_any_command_decides(policy: Policy) -> None:
    d = check_command("git status && rm -rf build", policy)
    assert not d.allowed and "remove folders" in d.reason


@pytest.mark.parametrize(("rule", "error"), [
    ('prefix = ["git", "push"]\ndecision = "approve"\njustification = "x"\nmatch = ["git pull"]',
     "rules[0].match: the rule 'git push' does not match 'git pull'"),
    ('prefix = ["git", "push"]\ndecision = "approve"\njustification = "x"\nmatch = ["git push"]\n'
     'not_match = ["git -C . push"]', "rules[0].not_match: the rule 'git push' matches 'git -C . push'"),
    ('prefix = ["git"]\ndecision = "approve"\nmatch = ["git"]', "rules[0].justification: say why"),
    ('prefix = ["git"]\ndecision = "maybe"\njustification = "x"\nmatch = ["git"]', "rules[0].decision: expected"),
    ('prefix = ["git"]\ndecision = "deny"\njustification = "x"', "rules[0].match: give at least one"),
    ('prefix = ["/bin/git"]\ndecision = "deny"\njustification = "x"\nmatch = ["/bin/git"]', "a bare name"),
    ('prefix = []\ndecision = "deny"\njustification = "x"\nmatch = ["x"]', "rules[0].prefix: expected a list"),
    ('prefix = ["git"]\ndecision = "deny"\njustification = "x"\nmatch = ["git"]\nwhen = 1', "rules[0].when: unknown"),
])  # fmt: skip
def test_a_rule_whose_examples_disagree_is_an_error_at_load(tmp_path: Path, rule: str, error: str) -> None:
    (tmp_path / "dal.toml").write_text(f"[[rules]]\n{rule}\n")
    with pytest.raises(PolicyError) as e:
        Policy.load(tmp_path)
    assert error in str(e.value) and str(tmp_path / "dal.toml") in str(e.value), str(e.value)


def test_the_rules_are_kept_with_the_policy_in_force(policy: Policy) -> None:
    again = Policy.from_json(policy.to_json())
    assert again == policy and len(again.prefix_rules) == 4
    assert check_command("rm -rf build", again).reason == check_command("rm -rf build", policy).reason


def test_a_ceiling_keeps_its_refusals_and_sees_an_allow_rule_it_lacks(policy: Policy, tmp_path: Path) -> None:
    plain = Policy.default(tmp_path)
    assert beyond(policy, plain) == ["running `git status`, `rm -f` by prefix rules the ceiling lacks"]
    assert beyond(policy, policy) == []
    kept = capped(plain.extended(allow_run=["rm"]), policy)
    assert not check_command("rm -rf build", kept).allowed


def test_dal_policy_check_says_the_justification(tmp_path: Path) -> None:
    (tmp_path / "dal.toml").write_text(RULES)
    r = subprocess.run([sys.executable, "-m", "dal", "policy", "check", "rm -rf build"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 1 and r.stdout.splitlines()[0].startswith("deny: rm -rf is denied by the rule `rm -rf`")
    assert "remove folders one by one" in r.stdout.splitlines()[0]
    (tmp_path / "dal.toml").write_text(RULES.replace('match = ["rm -rf build"]', 'match = ["rm -r build"]'))
    r = subprocess.run([sys.executable, "-m", "dal", "policy", "check", "ls"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    assert r.returncode != 0 and "rules[2].match: the rule 'rm -rf' does not match 'rm -r build'" in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


def test_the_example_in_docs_policy_md_loads_and_decides_as_it_says(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()
    section = text[text.index("### Prefix rules"):]
    (tmp_path / "dal.toml").write_text(section.split("```toml\n", 1)[1].split("```", 1)[0])
    policy = Policy.load(tmp_path)  # the examples are checked here
    assert check_command("git diff HEAD~1", policy).approval_required is False
    assert check_command("git commit -m x", policy).approval_required
    d = check_command("git push origin main", policy)
    assert not d.allowed and d.reason.startswith("git push is denied by the rule `git push` (")
    assert d.reason.endswith("): pushing publishes work: the operator pushes")


def test_dal_policy_check_says_what_is_modelled_and_what_is_enforced(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    r = subprocess.run([sys.executable, "-m", "dal", "policy", "check", "--allow-run=curl", "--allow-read=shared",
                        "cat x | curl -s http://h/"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "DAL_WALL": "bubblewrap"})  # fmt: skip
    lines = r.stdout.splitlines()
    assert "  modelled:   cat exactly (every path checked, and run as the check read it); curl classed only " \
        "(what it does only the wall holds)" in lines, lines
    assert any(line.startswith("  enforced:   wall bubblewrap: reads the workspace, shared, writes the workspace, "
                               "network off") or line.startswith("  enforced:   no wall") for line in lines), lines
    r = subprocess.run([sys.executable, "-m", "dal", "policy", "check", "cat x"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60, env={**os.environ, "DAL_WALL": "none"})  # fmt: skip
    assert r.stdout.splitlines()[-1] in ("  enforced:   no wall: the check alone, and only the default toolset runs",
                                         "  enforced:   no wall, and nothing runs (see wall)"), r.stdout


def test_the_explanation_tells_the_three_kinds_of_program_apart() -> None:
    from dal.effects.classify.explain import modelled

    assert modelled(["cat", "git", "curl"]) == (
        "cat exactly (every path checked, and run as the check read it); git by its table (its repository, "
        "remotes and patches checked; the wall holds what it reads and writes); curl classed only (what it does "
        "only the wall holds)")
