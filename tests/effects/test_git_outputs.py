"""Files git writes that its arguments name only indirectly:

- `--output=FILE` is a diff option, and every subcommand that hands its options to git's revision and diff
  machinery takes it -- reflog, shortlog, rev-list, stash list/show, blame, annotate, cherry-pick, revert, the
  diff plumbing -- not only log/show/diff. `git reflog -1 --format=%B --output=.git/config` writes a commit
  message the script chose into the repository's configuration.
- `git format-patch` makes `[vN-]NNNN-SUBJECT.patch` files (or `N` with --numbered-files) in its folder;
  `--suffix=/../dal.toml` leaves it, and an entry there that is a symlink is written through.

Every case first runs the real git (outside DAL) to show that it writes the file, then runs the same command
through run() next to a canary outside the roots. git runs only inside a wall (issue 27): the check no longer
predicts these writes, the wall and the git guard hold them.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from test_git_guard import WALL_OR_NOT, hook, operator, walled

from dal.effects import EffectContext, Policy, run_effect
from dal.effects.result import EffectResult

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git not installed")

CANARY = "OUTSIDE-CANARY\n"


def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A repository with two commits, a branch, a stash entry, a reflog; and a canary outside it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for cmd in (("init", "-q", "-b", "main"), ("config", "user.name", "op"), ("config", "user.email", "op@e")):
        operator(ws, *cmd)
    (ws / ".gitignore").write_text(".dal/\n")
    (ws / "README").write_text("hello\n")
    operator(ws, "add", "README", ".gitignore")
    operator(ws, "commit", "-qm", "init")
    operator(ws, "branch", "side")
    (ws / "README").write_text("hello\nagain\n")
    operator(ws, "commit", "-qam", "s")
    (ws / "README").write_text("hello\nagain\nwip\n")
    operator(ws, "stash", "-q")
    (tmp_path / "outside").mkdir()
    canary = tmp_path / "outside" / "canary.txt"
    canary.write_text(CANARY)
    return ws, canary


def run(ws: Path, argv: list[str], wall: bool, policy: Policy | None = None) -> EffectResult:
    ctx = EffectContext(policy=policy or Policy.load(ws, allow_run=["git"]), **hook(wall))  # type: ignore[arg-type]
    return run_effect(shlex.join(argv), ctx)


def real_git_writes(ws: Path, tmp_path: Path, args: list[str], target: str) -> bytes | None:
    """What the operator's own git writes at `target` for `args`, in a copy of the workspace and of its
    outside (a symlink in the copy leads to the copy's canary); None when git makes no such file."""
    probe = tmp_path / "probe"
    shutil.rmtree(probe, ignore_errors=True)
    shutil.copytree(ws, probe / "ws", symlinks=True)
    shutil.copytree(tmp_path / "outside", probe / "outside")
    operator(probe / "ws", *args)
    written = probe / "ws" / target
    return written.read_bytes() if written.exists() else None


# {out} is where git writes
OUTPUT_FORMS = [
    ["reflog", "-1", "--format=%B", "--output={out}"],
    ["reflog", "show", "--output={out}"],
    ["shortlog", "--output={out}", "HEAD"],
    ["rev-list", "--output={out}", "HEAD"],
    ["stash", "list", "--output={out}"],
    ["stash", "show", "-p", "--output={out}"],
    ["blame", "--output={out}", "README"],
    ["annotate", "--output={out}", "README"],
    ["cherry-pick", "--output={out}", "side"],
    ["revert", "--no-edit", "--output={out}", "HEAD"],
    ["diff-tree", "-p", "--output={out}", "HEAD"],
    ["range-diff", "--output={out}", "HEAD~1", "HEAD~1", "HEAD"],
    ["log", "--output", "{out}"],
]


@pytest.mark.parametrize("form", OUTPUT_FORMS, ids=lambda f: " ".join(f[:2]))
def test_every_subcommand_taking_diff_options_writes_its_output_option(tmp_path: Path, form: list[str]) -> None:
    """Finding 09: the real git writes --output's file for each of these (so each is a write for the model)."""
    ws, _ = workspace(tmp_path)
    written = real_git_writes(ws, tmp_path, [a.format(out="written.txt") for a in form], "written.txt")
    assert written is not None  # rev-list, blame and annotate only create (or truncate) it


@walled
@pytest.mark.parametrize("form", OUTPUT_FORMS, ids=lambda f: " ".join(f[:2]))
def test_output_of_every_such_subcommand_is_held_by_the_wall(tmp_path: Path, form: list[str]) -> None:
    ws, canary = workspace(tmp_path)
    config = (ws / ".git" / "config").read_bytes()
    for target in ("dal.toml", ".git/config", str(canary), "../outside/new.txt"):
        r = run(ws, ["git", *(a.format(out=target) for a in form)], True)
        assert r.status in ("completed", "failed"), (target, r.summary)
        assert not (ws / "dal.toml").is_file() and (ws / ".git" / "config").read_bytes() == config, target
    assert canary.read_text() == CANARY and not (tmp_path / "outside" / "new.txt").exists()
    r = run(ws, ["git", *(a.format(out="out.txt") for a in form)], True)  # inside the roots: written
    assert r.status in ("completed", "failed") and (ws / "out.txt").exists(), r.summary


@walled
def test_reflog_output_would_have_planted_a_config(tmp_path: Path) -> None:
    """The attack's payload: the script's commit message as .git/config, held by the wall."""
    ws, _ = workspace(tmp_path)
    (ws / "m.txt").write_text("[core]\n\tfsmonitor = \"touch MARK; false\"\n")
    assert run(ws, ["git", "commit", "-q", "--allow-empty", "-F", "m.txt"], False).ok
    assert b"fsmonitor" in (real_git_writes(ws, tmp_path, ["reflog", "-1", "--format=%B", "--output=.git/config"],
                                            ".git/config") or b"")
    r = run(ws, ["git", "reflog", "-1", "--format=%B", "--output=.git/config"], True)
    assert r.status in ("completed", "failed"), r.summary
    assert "fsmonitor" not in (ws / ".git" / "config").read_text()


def _subject_s(ws: Path) -> None:
    """A commit whose subject is `s` (the patch file is 0001-s.patch) and the folder 0001-s."""
    (ws / "t").write_text("t\n")
    operator(ws, "add", "t")
    operator(ws, "commit", "-qm", "s")
    (ws / "0001-s").mkdir()


@walled
def test_format_patch_suffix_with_a_slash_is_held_by_the_wall(tmp_path: Path) -> None:
    """Finding 11: `--suffix=/../dal.toml` writes ./0001-s/../dal.toml = dal.toml."""
    ws, canary = workspace(tmp_path)
    _subject_s(ws)
    argv = ["format-patch", "-1", "--suffix=/../dal.toml"]
    assert (real_git_writes(ws, tmp_path, argv, "dal.toml") or b"").startswith(b"From ")
    for suffix in ("/../dal.toml", "/../../outside/canary.txt", "/x"):
        r = run(ws, ["git", "format-patch", "-1", f"--suffix={suffix}"], True)
        assert r.status in ("completed", "failed"), r.summary
    assert not (ws / "dal.toml").is_file() and canary.read_text() == CANARY


@walled
@pytest.mark.parametrize(("options", "entry"), [
    ([], "0001-s.patch"),
    (["-o", "out"], "out/0001-s.patch"),
    (["--numbered-files"], "1"),
    (["-v", "2"], "v2-0001-s.patch"),
    (["--start-number=7", "--suffix=.txt"], "0007-s.txt"),
    (["--cover-letter"], "0000-cover-letter.patch"),
], ids=["plain", "-o", "numbered", "reroll", "start-number", "cover"])
def test_format_patch_does_not_write_through_a_symlink_where_it_makes_a_file(
        tmp_path: Path, options: list[str], entry: str) -> None:
    """Each name format-patch makes, taken first by a symlink (left by an earlier program), to the canary
    outside and to an absent dal.toml: the real git writes through it; through run() the wall holds it."""
    ws, canary = workspace(tmp_path)
    _subject_s(ws)
    (ws / "out").mkdir()
    link = ws / entry
    depth = "../" * entry.count("/")
    for target in (f"{depth}../outside/canary.txt", f"{depth}dal.toml"):
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        argv = ["format-patch", "-1", *options]
        written = real_git_writes(ws, tmp_path, argv, entry) or b""
        assert written.startswith(b"From "), (argv, written[:80])
        r = run(ws, ["git", *argv], True)
        assert r.status in ("completed", "failed"), (argv, r.summary)
        assert canary.read_text() == CANARY and not (ws / "dal.toml").is_file()
    link.unlink()
    r = run(ws, ["git", "format-patch", "-1", *options], True)  # the same command with no link: it runs
    assert r.ok and (ws / entry).is_file() and not (ws / entry).is_symlink(), r.summary


@walled
def test_format_patch_does_not_make_a_protected_path(tmp_path: Path) -> None:
    """A `[paths] protect` entry that does not exist yet, with a name format-patch can make: the wall holds
    its place."""
    ws, _ = workspace(tmp_path)
    _subject_s(ws)
    (ws / "dal.toml").write_text('[paths]\nprotect = ["0001-s.patch"]\n')
    policy = Policy.load(ws, allow_run=["git"])
    r = run(ws, ["git", "format-patch", "-1"], True, policy)
    assert r.status in ("completed", "failed"), r.summary
    assert not (ws / "0001-s.patch").is_file()
    assert run(ws, ["git", "format-patch", "-1", "-o", "patches"], True, policy).ok
    assert (ws / "patches" / "0001-s.patch").is_file()


@walled
def test_format_patch_to_standard_output_writes_no_file(tmp_path: Path) -> None:
    ws, canary = workspace(tmp_path)
    _subject_s(ws)
    (ws / "0001-s.patch").symlink_to("../outside/canary.txt")
    r = run(ws, ["git", "format-patch", "-1", "--stdout"], False)
    assert r.ok and r.stdout.startswith("From ") and canary.read_text() == CANARY, r.summary
    r = run(ws, ["git", "format-patch", "-1", "--stdout", "--no-stdout"], True)
    assert r.status in ("completed", "failed") and canary.read_text() == CANARY, r.summary


@walled
def test_the_operators_format_output_directory_does_not_lead_out(tmp_path: Path) -> None:
    ws, canary = workspace(tmp_path)
    _subject_s(ws)
    operator(ws, "config", "format.outputDirectory", "pp")
    (ws / "pp").mkdir()
    (ws / "pp" / "0001-s.patch").symlink_to("../../outside/canary.txt")
    r = run(ws, ["git", "format-patch", "-1"], True)
    assert r.status in ("completed", "failed") and canary.read_text() == CANARY, r.summary


def test_plain_format_patch_still_runs(tmp_path: Path) -> None:
    ws, _ = workspace(tmp_path)
    _subject_s(ws)
    r = run(ws, ["git", "format-patch", "-q", "-1"], False)
    assert r.ok and (ws / "0001-s.patch").read_text().startswith("From "), r.summary
    applies = subprocess.run(["git", "apply", "--check", "-R", "0001-s.patch"], cwd=ws, capture_output=True)
    assert applies.returncode == 0


FAKE_GPG = """#!/bin/sh
touch "$(dirname "$0")/GPG-RAN"
case " $* " in *" -bsau "*) cat >/dev/null; echo "[GNUPG:] SIG_CREATED D 1 8 00 1 X" >&2
  printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nAAAA\\n-----END PGP SIGNATURE-----\\n';; esac
"""


@pytest.mark.parametrize("argv", [["log", "-1", "--format=%+G?"], ["log", "-1", "--pretty=format:%-GS"],
                                  ["reflog", "show", "-1", "--format=% GK"], ["reflog", "--show-signature"],
                                  ["rev-list", "-1", "--format=%G?", "HEAD"], ["stash", "list", "--format=%+G?"]],
                         ids=lambda a: " ".join(a[:2]))
@walled
def test_a_signature_placeholder_with_a_magic_sign_runs_no_gpg_outside(tmp_path: Path, argv: list[str]) -> None:
    """A sibling: `%+G?` (pretty.c's magic signs + - and space) verifies a signed commit's signature, which runs
    the configured gpg (the operator's gpg.program here is a stand-in that leaves a marker). Inside the wall it
    leaves none outside."""
    ws, _ = workspace(tmp_path)
    gpg = tmp_path / "fakegpg"
    gpg.write_text(FAKE_GPG)
    gpg.chmod(0o755)
    for cmd in (("config", "gpg.program", str(gpg)), ("config", "user.signingkey", "X"),
                ("commit", "-q", "--allow-empty", "-S", "-m", "signed")):
        operator(ws, *cmd)
    marker = tmp_path / "GPG-RAN"
    marker.unlink()
    if argv[0] == "log":  # the operator's own git runs gpg for it
        operator(ws, *argv)
        assert marker.exists()
        marker.unlink()
    r = run(ws, ["git", *argv], True)  # the wall: the operator's gpg.program is outside its roots
    assert r.status in ("completed", "failed"), r.summary
    assert not marker.exists()


@WALL_OR_NOT
def test_apply_reject_does_not_replace_a_protected_rej_file(tmp_path: Path, wall: bool) -> None:
    """A sibling: `git apply --reject` writes the hunks that do not apply to PATH.rej, unlinking one that
    exists: a name no argument gives. A protected `README.rej` is the operator's."""
    ws, _ = workspace(tmp_path)
    (ws / "README.rej").write_text("the operator's\n")
    (ws / "dal.toml").write_text('[paths]\nprotect = ["README.rej"]\n')
    (ws / "p.patch").write_text("diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n-nothing like\n"
                                "+this\n")
    probe = real_git_writes(ws, tmp_path, ["apply", "--reject", "p.patch"], "README.rej") or b""
    assert probe.startswith(b"diff a/README b/README")  # the real git replaced it
    r = run(ws, ["git", "apply", "--reject", "p.patch"], wall, Policy.load(ws, allow_run=["git"]))
    assert r.status == "denied" and "README.rej is protected" in r.summary, r.summary
    assert (ws / "README.rej").read_text() == "the operator's\n"
    r = run(ws, ["git", "apply", "p.patch"], wall, Policy.load(ws, allow_run=["git"]))  # without --reject: runs
    assert r.status == "failed" and (ws / "README.rej").read_text() == "the operator's\n", r.summary
