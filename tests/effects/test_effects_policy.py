"""Policy sources (defaults, dal.toml, flags), decision order, and the `dal policy check` command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dal.effects import Policy, PolicyError, check_command

MAIN_CLI = Path(__file__).resolve().parents[2] / "dal" / "cli" / "main.py"


def write_toml(ws: Path, text: str) -> Path:
    path = ws / "dal.toml"
    path.write_text(text)
    return path


def test_default_policy_has_the_brief_toolset_and_no_network(tmp_path: Path) -> None:
    p = Policy.load(tmp_path)
    assert {"test", "echo", "printf", "mkdir", "cat", "ls", "grep", "wc", "touch", "cp", "mv"} <= p.allowed
    assert not p.allow_net and p.write_roots == (str(tmp_path.resolve()),)
    assert "sh" not in p.allowed and "curl" not in p.allowed


def test_the_policy_spelled_out_toolset_is_the_programs_with_a_model() -> None:
    # policy.py lists the names so that a policy is built without building every argument model.
    from dal.effects.classify.programs import DEFAULT_TOOLSET
    from dal.effects.policy import DEFAULT_TOOLSET_NAMES

    assert DEFAULT_TOOLSET_NAMES == DEFAULT_TOOLSET


def test_dal_toml_at_the_workspace_root_is_read(tmp_path: Path) -> None:
    write_toml(
        tmp_path,
        """
        [run]
        allow = ["git"]
        deny = ["rm"]
        require_approval = ["curl"]
        [paths]
        write = ["out"]
        [programs.git]
        class = "local"
        idempotent = false
        """,
    )
    p = Policy.load(tmp_path)
    assert p.source.endswith("dal.toml")
    assert check_command("git status", p).allowed
    assert "denied by" in check_command("rm -f x", p).reason
    curl = check_command("curl https://example.com", p)
    assert curl.allowed and curl.approval_required and not curl.idempotent
    assert check_command("touch out/x", p).allowed
    assert "outside the allowed roots" in check_command("touch x", p).reason


def test_deny_beats_approval_beats_allow(tmp_path: Path) -> None:
    write_toml(tmp_path, '[run]\ndeny = ["touch"]\nrequire_approval = ["touch", "mkdir"]\n')
    p = Policy.load(tmp_path)
    assert not check_command("touch x", p).allowed
    both = check_command("mkdir -p d && ls", p)
    assert both.allowed and both.approval_required
    assert not check_command("mkdir d && touch x", p).allowed


def test_flags_add_programs_roots_and_network(tmp_path: Path) -> None:
    ws, extra = tmp_path / "ws", tmp_path / "shared"
    ws.mkdir()
    extra.mkdir()
    (extra / "f").write_text("x")
    p = Policy.load(ws, allow_run=["sh,python3"], allow_read=["../shared"], allow_net=True)
    assert check_command("sh -c 'echo hi'", p).allowed  # an interpreter the policy names is allowed
    assert check_command("sh -c 'echo hi'", p).effect_class == "external"  # no model + network
    assert check_command("cat ../shared/f", p).allowed
    assert not check_command("touch ../shared/g", p).allowed
    assert check_command("/bin/sh -c x", p).allowed is False  # still bare names only


def test_allow_write_narrows_writes_to_the_named_roots(tmp_path: Path) -> None:
    p = Policy.load(tmp_path, allow_write=["out/"])
    assert check_command("mkdir -p out/a", p).allowed
    assert not check_command("echo x > top.txt", p).allowed
    assert check_command("cat top.txt", p).allowed  # reads still cover the workspace


def test_git_model_refuses_config_and_classifies_push(tmp_path: Path) -> None:
    p = Policy.load(tmp_path, allow_run=["git"])
    assert check_command("git status", p).effect_class == "local"
    assert check_command("git push origin main", p).effect_class == "external"
    assert "git -c" in check_command("git -c core.pager=sh log", p).reason
    assert "git config" in check_command("git config core.hooksPath x", p).reason


@pytest.mark.parametrize(
    ("toml", "where"),
    [
        ("[run\n", "invalid TOML"),
        ("[runn]\n", "runn: unknown section"),
        ("[run]\nallow = 'git'\n", "run.allow: expected a list of strings"),
        ("[run]\nallwo = []\n", "run.allwo: unknown key"),
        ("[programs.curl]\nclass = 'network'\n", "programs.curl.class"),
        ("[programs.curl]\napproval = 'yes'\n", "programs.curl.approval"),
        ("[limits]\ntimeout = -1\n", "limits.timeout"),
    ],
)
def test_bad_policy_file_names_file_and_key(tmp_path: Path, toml: str, where: str) -> None:
    path = write_toml(tmp_path, toml)
    with pytest.raises(PolicyError) as e:
        Policy.load(tmp_path)
    assert str(path) in str(e.value) and where in str(e.value)


def test_bad_flag_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="--allow-run"):
        Policy.load(tmp_path, allow_run=["/bin/sh"])
    with pytest.raises(PolicyError, match="--policy"):
        Policy.load(tmp_path, tmp_path / "missing.toml")


# --- the CLI -----------------------------------------------------------------------------------------

needs_main = pytest.mark.skipif(not MAIN_CLI.exists(), reason="dal/cli/main.py not there yet")


def dal(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


@needs_main
def test_policy_check_allows_and_explains(tmp_path: Path) -> None:
    r = dal("policy", "check", "test -e 'a b.md' && echo present || echo missing", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("allow: ")
    assert "class:      read" in r.stdout and "reads:      a b.md" in r.stdout


@needs_main
def test_policy_check_denies_with_reason_and_json(tmp_path: Path) -> None:
    r = dal("policy", "check", "cat /etc/passwd", cwd=tmp_path)
    lines = r.stdout.splitlines()
    assert r.returncode == 1 and lines[:3] == [
        "deny: reads outside the allowed roots: /etc/passwd",
        f"  workspace:  {tmp_path.resolve()} (current directory)",
        "  policy:     default policy",
    ]
    # The wall that would hold it, as this machine has one (bubblewrap, landlock or none, with why).
    assert len(lines) == 5 and re.match(r"  wall:       (bubblewrap|landlock|none) \(.+\)$", lines[3]), lines
    assert lines[4].startswith("  enforced:   "), lines  # what holds it (dal/effects/classify/explain.py)
    r = dal("policy", "check", "--json", "--workspace", str(tmp_path), "--allow-run=git,curl", "git log", cwd=tmp_path)
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["decision"] == "allow" and d["class"] == "local" and d["programs"] == ["git"]


@needs_main
def test_policy_check_usage_and_policy_errors_exit_2(tmp_path: Path) -> None:
    write_toml(tmp_path, "[bogus]\n")
    r = dal("policy", "check", "ls", cwd=tmp_path)
    assert r.returncode == 2 and "bogus" in r.stderr
    assert dal("policy", "check", cwd=tmp_path).returncode == 2


def test_protected_paths_cover_the_policy_the_store_and_git_internals(tmp_path: Path) -> None:
    ws = tmp_path.resolve()
    (ws / "rules.toml").write_text('[paths]\nprotect = ["keep"]\n')
    p = Policy.load(ws, ws / "rules.toml")
    for rel in ("dal.toml", "sub/dal.toml", ".dal/dal.db", "sub/.dal", ".git/config", ".git/hooks/pre-commit",
                "vendor/lib/.git/info/attributes", "rules.toml", "keep", "keep/x", ".git", "sub/.git",
                ".git/objects/ab/cd", ".git/HEAD", ".git/rebase-merge/git-rebase-todo", ".git/commondir"):
        assert p.protection(str(ws / rel)) is not None, rel
    for rel in ("notes.txt", "dal.toml.bak", "git/config", "keeper", ".gitignore", "sub/.github/x", "HEAD"):
        assert p.protection(str(ws / rel)) is None, rel


def test_paths_protect_must_be_a_list_of_strings(tmp_path: Path) -> None:
    write_toml(tmp_path, "[paths]\nprotect = 3\n")
    with pytest.raises(PolicyError, match="paths.protect: expected a list of strings"):
        Policy.load(tmp_path)
