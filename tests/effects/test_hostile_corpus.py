"""The executed hostile corpus (issue 12): every attack is a DAL script run through the real runner, next to
canaries, twice -- inside the bubblewrap wall and with the wall turned off by the test hook.

The canaries, built fresh for every run:
- files outside the workspace (`outside/canary.txt`, `outside/secret.txt`, an empty `outside/dir/`) and the
  folder above it: none may change, appear or disappear;
- a secret in the DAL process's own environment (the test process is the DAL process): it may appear in no
  output, no receipt, no file;
- marker files a forbidden program would create (`pwned`, in the workspace, above it and outside);
- the content of /etc/passwd and of `outside/secret.txt`: in no output, receipt or file either;
- the files that decide or record what a script may do (`dal.toml`, `.git/config`, `.git/hooks/`, the run
  store): unchanged, and the run's receipt is in the store afterwards.

Without the wall, the static check alone must hold every case except those marked `needs={"wall"}`, which
docs/policy.md names ("What the static check alone does not hold"). Some cases need a part of the wall or
of the runtime that other work in issue 12 adds (a read wall, no capabilities, protected files read-only
inside the wall, env() limited to the policy's variables): a probe checks whether this build has it, and a
case that needs what is missing is an expected failure naming it.

A control run executes a few attacks with bash and no DAL in a copy of the same workspace: each must really
break a canary there, so that the corpus tests attacks that work.

Last, the legitimate side: at least 95% of the everyday commands (the decision corpus' ALLOW list, and what
agents run in a git workspace) still run, through the same runner, in both modes.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import attrs
import pytest
from effects_workspace import build_workspace
from test_effects_corpus import ALLOW

from dal.effects import Decision, EffectContext, Policy, execute_checked, sandbox_status
from dal.effects.classify.check import find_program
from dal.effects.exec import executor
from dal.effects.plan.shell import parse_command
from dal.runner.build import build_spec
from dal.runner.runner import execute
from dal.runner.spec import RunHooks

HAVE_BWRAP = sandbox_status()[0]
HAVE_GIT = find_program("git") is not None
SECRET_VAR = "DAL_HOSTILE_SECRET"
PASSWD_MARK = "root:x:0:0:"
MARKERS = ("ws/pwned", "pwned", "outside/pwned", "ws/sub/pwned")


@attrs.frozen
class Case:
    """One attack: the commands a script runs (the last is the attack the check must deny without the
    wall), the programs the policy allows, what it needs from the wall or runtime, and its setup."""

    id: str
    commands: tuple[str, ...]
    allow: tuple[str, ...] = ()
    needs: frozenset[str] = frozenset()  # "wall" | "read_wall" | "no_caps" | "protected_ro" | "env_allowlist"
    setup: Callable[[Path], None] | None = None
    dal: str | None = None  # extra DAL source run after the commands
    control: bool = False  # the same commands under bash, without DAL, must break a canary
    repo: bool = True  # the workspace is a git repository
    denies: bool = True  # the check denies the attack (False: it is held otherwise, e.g. by the environment)
    keep: tuple[str, ...] = ()  # more paths of the workspace that must not change (files, or folders whole)
    later: str | None = None  # a folder of the workspace where a later `dal run` starts, discovering its policy


def _sh(ws: Path, *argv: str) -> None:
    subprocess.run(argv, cwd=ws, check=True, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(ws), "LC_ALL": "C.UTF-8"})  # fmt: skip


_TEMPLATE: list[Path] = []


def _template_git() -> Path:
    """The `.git` of every case's repository, made once a process: five git processes a case cost more than
    the case under load. Its index's stat data then differ from the case's files, so git compares their
    content (as for any copied repository) and finds them unchanged."""
    if not _TEMPLATE:
        top = Path(tempfile.mkdtemp(prefix="dal-corpus-git-"))
        atexit.register(shutil.rmtree, top, ignore_errors=True)
        (top / "docs").mkdir()
        (top / "notes.txt").write_text("beta\nalpha\nTODO: gamma\n")
        (top / "docs" / "a.md").write_text("# A\n")
        _sh(top, "git", "init", "-q", "-b", "main", ".")
        _sh(top, "git", "config", "user.email", "agent@example.com")
        _sh(top, "git", "config", "user.name", "agent")
        _sh(top, "git", "add", "notes.txt", "docs")
        _sh(top, "git", "commit", "-q", "-m", "init")
        _TEMPLATE.append(top / ".git")
    return _TEMPLATE[0]


def _build(root: Path, case: Case) -> Path:
    """The canaries and the workspace: a git repository with a policy file, the kinds of symlinks a cloned
    repository can bring (one that points inside where it is and out once moved up, one that points out,
    one into the DAL process's /proc), and a hook-like script a template could ship."""
    outside = root / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "canary.txt").write_text("canary: must never change\n")
    (outside / "secret.txt").write_text(f"TOPSECRET-{root.name}\n")
    ws = root / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "notes.txt").write_text("beta\nalpha\nTODO: gamma\n")
    (ws / "docs" / "a.md").write_text("# A\n")
    (ws / "dal.toml").write_text("[run]\ndefaults = true\n")
    (ws / "sub" / "deeper").mkdir(parents=True)
    os.symlink("../../outside/secret.txt", ws / "sub" / "deeper" / "secret.txt")  # inside here, out one level up
    (ws / "trap").mkdir()
    os.symlink("../../outside/secret.txt", ws / "trap" / "secret.txt")
    (ws / "trap_proc").mkdir()  # the DAL process links trap_proc/environ to its own environ (hostile_launcher.py)
    (ws / "tpl" / "hooks").mkdir(parents=True)
    hook = ws / "tpl" / "hooks" / "post-checkout"
    hook.write_text('#!/bin/sh\ntouch "$GIT_DIR/../../pwned" pwned\n')
    hook.chmod(0o755)
    if case.repo and HAVE_GIT:
        shutil.copytree(_template_git(), ws / ".git", symlinks=True)
    if case.setup is not None:
        case.setup(ws)
    return ws


def _files(top: Path, skip: Path | None = None) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        if skip is not None and Path(dirpath) == skip.parent:
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(top))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                out[rel] = p.read_bytes()
            else:
                out[rel] = "dir"
    return out


def _protected(ws: Path, more: tuple[str, ...] = ()) -> dict[str, bytes | str]:
    keep = {}
    for rel in ("dal.toml", ".gitconfig", "sub/dal.toml", ".git/commondir", "app/dal.toml", "vendor/lib/.git/config",
                "vendor/lib/.git/commondir", "sub/.dal", "sub/r/.git"):
        p = ws / rel
        keep[rel] = ("dir" if p.is_dir() else p.read_bytes()) if p.exists() else "absent"
    for rel in (".git/config", ".git/hooks", ".git/info", *more):
        p = ws / rel
        if p.is_dir():
            keep.update({f"{rel}/{k}": v for k, v in _files(p).items()})
        elif p.exists():
            keep[rel] = p.read_bytes()
    return keep


@attrs.define
class Ran:
    statuses: list[str]
    stdout: str
    receipt: dict


def _script(case: Case) -> str:
    lines = []
    for i, cmd in enumerate(case.commands):
        lines.append(f"let r{i} = run({json.dumps(cmd)})")
        lines.append(f'print("STATUS", r{i}.status)')
        lines.append(f"print(r{i}.stdout, r{i}.stderr)")
    if case.dal:
        lines.append(case.dal)
    return "\n".join(lines) + "\n"


LAUNCHER = Path(__file__).with_name("hostile_launcher.py")


def _run(root: Path, ws: Path, case: Case, wall: bool, secret_value: str) -> Ran:
    """The script through the real runner, in a fresh DAL process whose environment holds the secret."""
    script = root / "attack.dal"
    script.write_text(_script(case))
    job = root / "job.json"
    out = root / "ran.json"
    job.write_text(json.dumps({"workspace": str(ws), "script": str(script), "allow": list(case.allow),
                               "wall": wall, "out": str(out)}))  # fmt: skip
    env = {**os.environ, SECRET_VAR: secret_value}
    r = subprocess.run([sys.executable, str(LAUNCHER), str(job)], env=env, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = json.loads(out.read_text())
    for p in (job, out):
        p.unlink()
    text = got["stdout"]
    statuses = [line.split()[1] for line in text.splitlines() if line.startswith("STATUS ")]
    return Ran(statuses, text, got["receipt"])


def _bypass(command: str, policy: Policy) -> Decision:
    plan = parse_command(command)
    names = {c.argv[0] for c in plan.simple_commands()}
    return Decision(True, "bypassed in a test", "local", plan=plan,
                    executables=tuple((n, find_program(n) or n) for n in names))  # fmt: skip


def _walled(command: str, ws: Path) -> str:
    """Run `command` inside the wall with both checks bypassed (test-only): what the wall alone allows."""
    policy = Policy.load(ws, allow_run=["sh"])
    with mock.patch.object(executor, "recheck", lambda c, p: None):
        r = execute_checked(command, _bypass(command, policy), EffectContext(policy=policy, timeout=10))
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def features() -> dict[str, bool]:
    """What this build's wall and runtime provide, probed by executing what each feature must stop."""
    root = Path(tempfile.mkdtemp(prefix="dal-probe-", dir="/var/tmp"))
    try:
        ws = root / "ws"
        ws.mkdir()
        (root / "outside.txt").write_text("PROBE-SECRET\n")
        (ws / "dal.toml").write_text("[run]\ndefaults = true\n")
        have: dict[str, bool] = {"env_allowlist": True}
        if HAVE_BWRAP:
            have["read_wall"] = "PROBE-SECRET" not in _walled(f"cat {root}/outside.txt", ws)
            caps = _walled("cat /proc/self/status", ws)
            have["no_caps"] = any(line.split()[1:] == ["0000000000000000"] for line in caps.splitlines()
                                  if line.startswith("CapEff:"))  # fmt: skip
            _walled("cp dal.toml x && printf y > x && cp x dal.toml", ws)
            have["protected_ro"] = (ws / "dal.toml").read_text() == "[run]\ndefaults = true\n"
            (ws / "dal.toml").write_text("[run]\ndefaults = true\n")
        os.environ[SECRET_VAR] = "probe-value"
        try:
            script = root / "env.dal"
            script.write_text(f'print(env("{SECRET_VAR}"))\n')
            buf = io.StringIO()
            execute(build_spec(script, workspace=ws, use_sandbox=False),
                    RunHooks(write=buf.write, handle_signals=False))
            have["env_allowlist"] = "probe-value" not in buf.getvalue()
        finally:
            del os.environ[SECRET_VAR]
        return have
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- the corpus -------------------------------------------------------------------------------------


def _old_policy_committed(ws: Path) -> None:
    """The operator committed a looser policy, then tightened it without committing."""
    (ws / "dal.toml").write_text('[run]\nallow = ["sh"]\n')
    _sh(ws, "git", "add", "dal.toml")
    _sh(ws, "git", "commit", "-q", "-m", "policy")
    (ws / "dal.toml").write_text("[run]\ndefaults = true\n")


def _hard_link_out(ws: Path) -> None:
    os.link(ws.parent / "outside" / "secret.txt", ws / "docs" / "linked.txt")


def _patch_symlink_to_proc(ws: Path) -> None:
    target = "/proc/{DALPID}/environ"
    (ws / "p.patch").write_text(
        "diff --git a/d/environ b/d/environ\nnew file mode 120000\n--- /dev/null\n+++ b/d/environ\n"
        f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
    )


def _patch_policy(ws: Path) -> None:
    (ws / "p.patch").write_text(
        "diff --git a/sub/dal.toml b/sub/dal.toml\nnew file mode 100644\n--- /dev/null\n+++ b/sub/dal.toml\n"
        '@@ -0,0 +1,2 @@\n+[run]\n+allow = ["sh"]\n'
    )


def _patch_policy_traditional(ws: Path) -> None:
    """A traditional header whose name ends in a space-separated timestamp, which git apply drops."""
    (ws / "p.patch").write_text(
        "--- /dev/null\n+++ b/sub/dal.toml 2024-01-01 00:00:00.000000000 +0000\n"
        '@@ -0,0 +1,2 @@\n+[run]\n+allow = ["sh"]\n'
    )


def _outside_repo(ws: Path) -> Path:
    """A repository outside the roots, holding the outside secret."""
    repo = ws.parent / "outside" / "srepo"
    repo.mkdir()
    os.link(ws.parent / "outside" / "secret.txt", repo / "s.txt")  # the secret file itself (the leak scan knows it)
    _sh(repo, "git", "init", "-q", "-b", "main", ".")
    _sh(repo, "git", "add", "s.txt")
    _sh(repo, "git", "-c", "user.name=o", "-c", "user.email=o@e", "commit", "-q", "-m", "secret")
    return repo


def _legacy_remote(ws: Path) -> None:
    """A legacy remote file naming the outside repository (git reads it when the config names no remote x)."""
    repo = _outside_repo(ws)
    (ws / ".git" / "remotes").mkdir(exist_ok=True)
    (ws / ".git" / "remotes" / "x").write_text(f"URL: {repo}\nPull: refs/heads/main:refs/heads/stolen\n")


def _alternates(ws: Path) -> None:
    repo = _outside_repo(ws)
    (ws / ".git" / "objects" / "info" / "alternates").write_text(f"{repo}/.git/objects\n")


def _base64_mail(ws: Path) -> None:
    """A mail whose patch (rewriting dal.toml) is base64-encoded: no patch header in the raw text."""
    import base64

    patch = ('diff --git a/dal.toml b/dal.toml\n--- a/dal.toml\n+++ b/dal.toml\n@@ -1,2 +1,2 @@\n [run]\n'
             '-defaults = true\n+allow = ["sh"]\n-- \n2.39.5\n')
    body = base64.encodebytes(("evil\n---\n" + patch).encode()).decode()
    (ws / "evil.mbox").write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@e>\n"
        "Date: Mon, 1 Jan 2024 00:00:00 +0000\nSubject: [PATCH] evil\nMIME-Version: 1.0\n"
        "Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: base64\n\n" + body)
    _sh(ws, "git", "add", "dal.toml")
    _sh(ws, "git", "commit", "-q", "-m", "policy")


_REBASE_STATE = ("mkdir -p .git/rebase-merge", "printf 'exec touch pwned\\n' > .git/rebase-merge/git-rebase-todo",
                 "printf 'refs/heads/main\\n' > .git/rebase-merge/head-name",
                 "git rev-parse HEAD > .git/rebase-merge/onto", "git rev-parse HEAD > .git/rebase-merge/orig-head",
                 "touch .git/rebase-merge/interactive")  # fmt: skip
_FSMONITOR = "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch pwned; false\"\\n'"

def _nested_policy_and_repo(ws: Path) -> None:
    """A nested workspace's policy and a nested repository: neither is bound read-only by the wall (only the
    workspace's own protected entries are), so only the check protects them."""
    (ws / "app").mkdir()
    (ws / "app" / "dal.toml").write_text("[run]\ndefaults = true\n")
    if HAVE_GIT:
        (ws / "vendor" / "lib").mkdir(parents=True)
        _sh(ws / "vendor" / "lib", "git", "init", "-q", ".")


def _policy_in_a_cloned_folder(ws: Path) -> None:
    """A folder the agent cloned holds a `dal.toml` of the attacker's (a file like any other, there)."""
    (ws / "x").mkdir()
    (ws / "x" / "dal.toml").write_text('[run]\nallow = ["sh"]\n')


_FSMONITOR_TO = "printf '[core]\\n\\tfsmonitor = \"touch pwned; false\"\\n' > "
_SH_POLICY = "printf '[run]\\nallow = [\"sh\"]\\n' > payload.txt"
SH = ("sh",)
GIT = ("git",)
NO_WALL = frozenset({"wall"})
CASES = [
    # 2. the policy, the store and git's internals are never written, removed or renamed
    Case("policy-rewrite", ("printf '[run]\\nallow = [\"sh\"]\\n' > dal.toml",), control=True),
    Case("policy-rewrite-then-sh", ("printf '[run]\\nallow = [\"sh\"]\\n' > dal.toml", "sh -c 'touch pwned'")),
    Case("policy-in-subfolder", ("printf '[run]\\nallow = [\"sh\"]\\n' > sub/dal.toml",)),
    Case("policy-by-uniq-obsolete-form", ("uniq +0 notes.txt dal.toml",), control=True),
    Case("policy-by-backup-suffix", ("rm dal.toml", "printf '[run]\\nallow = [\"sh\"]\\n' > dal",
                                     "cp -S .toml notes.txt dal"), control=True),  # fmt: skip
    Case("policy-by-mv", ("printf '[run]\\nallow = [\"sh\"]\\n' > x.toml", "mv x.toml dal.toml")),
    Case("policy-by-tee", ("tee dal.toml < notes.txt",)),
    Case("store-removed", ("rm -rf .dal",)),
    Case("store-renamed", ("mv .dal old-store",)),
    Case("git-config-fsmonitor", ("printf '[core]\\n\\tfsmonitor = \"touch pwned; false\"\\n' >> .git/config",
                                  "git status"), allow=GIT, control=True),  # fmt: skip
    Case("git-hook-written", ("cp tpl/hooks/post-checkout .git/hooks/post-checkout",), allow=GIT),
    Case("git-hooks-replaced", ("mv tpl/hooks .git/hooks2", "rm -rf .git/hooks")),
    Case("git-hooks-moved-in", ("rm -rf .git/hooks", "mv tpl/hooks .git/")),
    Case("git-info-attributes", ("echo '* diff=evil' > .git/info/attributes",)),
    Case("git-home-config", ("printf '[core]\\n\\thooksPath = tpl/hooks\\n' > .gitconfig",
                             "git checkout -b side"), allow=GIT),  # fmt: skip
    Case("git-xdg-config", ("mkdir -p .config/git", "printf '[core]\\n\\tfsmonitor = \"touch pwned; false\"\\n' > "
                            ".config/git/config", "git status"), allow=GIT),  # fmt: skip
    Case("git-clean-removes-store", ("git clean -fdx",), allow=GIT),
    # git runs only inside a wall (issue 27): the check no longer predicts what git writes; the wall holds it
    Case("git-stash-untracked", ("git stash -u",), allow=GIT, needs=NO_WALL),
    Case("git-checkout-old-policy", ("git checkout HEAD -- dal.toml",), allow=GIT, setup=_old_policy_committed,
         needs=NO_WALL),  # fmt: skip
    Case("git-checkout-dot-old-policy", ("git checkout .",), allow=GIT, setup=_old_policy_committed,
         needs=frozenset({"wall", "protected_ro"})),  # fmt: skip
    Case("git-mv-to-policy", ("printf '[run]\\nallow = [\"sh\"]\\n' > x.toml", "git add x.toml",
                              "git mv x.toml sub/dal.toml"), allow=GIT, needs=NO_WALL),  # fmt: skip
    Case("git-apply-policy", ("git apply p.patch",), allow=GIT, setup=_patch_policy),
    Case("git-apply-timestamp-header", ("git apply p.patch",), allow=GIT, setup=_patch_policy_traditional,
         control=True),  # fmt: skip
    # 3. directory operands: the paths diff derives, the trees grep -r and cp -r walk, links made
    Case("diff-file-dir-outward-link", ("touch secret.txt", "diff secret.txt trap"), control=True),
    Case("diff-from-file-outward-link", ("touch secret.txt", "diff --from-file=secret.txt trap"), control=True),
    Case("diff-dir-dir-outward-link", ("mkdir d", "touch d/secret.txt", "diff d trap"), control=True),
    Case("diff-to-proc-environ", ("touch environ", "diff -a environ trap_proc"), control=True),
    Case("cp-P-makes-outward-link", ("mkdir d", "cp -P sub/deeper/secret.txt d/", "touch secret.txt",
                                     "diff secret.txt d"), control=True),  # fmt: skip
    Case("mv-makes-outward-link", ("mv sub/deeper/secret.txt docs/", "cat docs/secret.txt")),
    Case("cp-r-copies-outward-link", ("cp -r sub moved", "cp -r sub/deeper top", "cat top/secret.txt")),
    Case("grep-r-through-hard-link", ("grep -r TOPSECRET docs",), setup=_hard_link_out, control=True),
    Case("cp-r-through-hard-link", ("cp -r docs copy",), setup=_hard_link_out, control=True),
    Case("git-apply-link-to-proc", ("git apply p.patch", "touch environ", "diff -a environ d"), allow=GIT,
         setup=_patch_symlink_to_proc),  # fmt: skip
    # cp's destination for --parents and for sources ending in `..`/`.`;
    # a link made by one pipeline stage and written through by another
    Case("cp-parents-absolute-source", ("mkdir -p a d{WS}/a", "cp -s {WS}/.git/config d{WS}/a/config",
                                        _FSMONITOR_TO + "a/config", "cp --parents {WS}/a/config d"),
         control=True),  # fmt: skip
    Case("cp-parents-nested-repo", ("mkdir -p a d{WS}/a", "cp -s {WS}/vendor/lib/.git/config d{WS}/a/config",
                                    _FSMONITOR_TO + "a/config", "cp --parents {WS}/a/config d"),
         setup=_nested_policy_and_repo, control=True),  # fmt: skip
    Case("cp-parents-dotdot", ("mkdir -p x/.git d", _FSMONITOR_TO + "x/.git/config",
                               "cp --parents x/.git/config/../config d/x/.git/..")),  # fmt: skip
    Case("cp-r-dotdot-into-git", ("mkdir -p t/sub", "printf '../.evil\\n' > t/commondir",
                                  "cp -r t/sub/.. vendor/lib/.git"), setup=_nested_policy_and_repo,
         control=True),  # fmt: skip
    Case("cp-r-dot-into-git", ("mkdir -p t", "printf '../.evil\\n' > t/commondir", "cp -r t/. vendor/lib/.git"),
         setup=_nested_policy_and_repo, control=True),  # fmt: skip
    # (no control for these: under bash they are a race -- sort creates its output when it starts -- that the
    # attacker wins often, not always; DAL's answer, a denial at check time, does not depend on it)
    Case("pipeline-hard-link-then-write", (_SH_POLICY, "cp -l app/dal.toml x | true | true | true | true | true | "
                                           "true | true | true | sort -o x - payload.txt"),
         setup=_nested_policy_and_repo),  # fmt: skip
    Case("pipeline-symlink-then-write", (_SH_POLICY, "cp -s {WS}/app/dal.toml x | true | true | true | true | "
                                         "true | true | true | true | sort -o x - payload.txt"),
         setup=_nested_policy_and_repo),  # fmt: skip
    Case("pipeline-mv-then-write", (_SH_POLICY, "cp -s {WS}/app/dal.toml y", "mv y z | true | true | true | true | "
                                    "true | true | true | sort -o z payload.txt"),
         setup=_nested_policy_and_repo),  # fmt: skip
    # 6. git options that run programs or take paths
    Case("git-grep-pager", ("git grep --open-files-in-pager='touch pwned' TODO",), allow=GIT, control=True),
    Case("git-grep-pager-abbreviated", ("git grep --open='touch pwned' TODO",), allow=GIT),
    Case("git-clone-upload-pack", ("git clone -u 'touch pwned; git-upload-pack' . c",), allow=GIT, control=True),
    Case("git-clone-template-hook", ("git clone --template=tpl . c",), allow=GIT, control=True),
    Case("git-clone-config", ("git clone -c core.fsmonitor='touch pwned; false' . c", "git -C c status"),
         allow=GIT),  # fmt: skip
    Case("git-dash-c", ("git -c core.fsmonitor='touch pwned; false' status",), allow=GIT, control=True),
    Case("git-diff-no-index-outside", ("git diff --no-index ../outside/secret.txt notes.txt",), allow=GIT,
         control=True, needs=NO_WALL),  # fmt: skip
    Case("git-diff-implicit-no-index", ("git diff ../outside/secret.txt notes.txt",), allow=GIT, needs=NO_WALL),
    Case("git-log-output-outside", ("git log --output=../outside/log.txt",), allow=GIT, control=True, needs=NO_WALL),
    Case("git-format-patch-outside", ("git format-patch -o ../outside/dir -1",), allow=GIT, control=True,
         needs=NO_WALL),  # fmt: skip
    Case("git-archive-outside", ("git archive -o ../outside/a.tar HEAD",), allow=GIT, control=True, needs=NO_WALL),
    Case("git-worktree-outside", ("git worktree add ../outside/wt",), allow=GIT, control=True, needs=NO_WALL),
    Case("git-rebase-exec", ("git rebase --exec 'touch pwned' --root",), allow=GIT, control=True),
    Case("git-bisect-run", ("git bisect start HEAD HEAD", "git bisect run touch pwned"), allow=GIT),
    Case("git-ext-transport", ("git clone 'ext::sh -c touch% pwned' c",), allow=GIT),
    Case("git-gitfile-redirect", ("mkdir -p x/objects x/refs", "printf 'ref: refs/heads/main\\n' > x/HEAD",
                                  "printf '[core]\\n\\tfsmonitor = \"touch pwned; false\"\\n' > x/config",
                                  "printf 'gitdir: x\\n' > .git", "git status"), allow=GIT, repo=False,
         control=True),  # fmt: skip
    Case("git-bare-workspace", ("mkdir objects refs", "printf 'ref: refs/heads/main\\n' > HEAD",
                                "printf '[core]\\n\\tbare = true\\n\\tpager = touch pwned\\n\\tfsmonitor = \"touch "
                                "pwned; false\"\\n' > config", "git log"), allow=GIT, repo=False),  # fmt: skip
    Case("git-push-to-hooked-bare-repo", ("mkdir -p b/objects b/refs b/hooks",
                                          "printf 'ref: refs/heads/main\\n' > b/HEAD",
                                          "printf '[core]\\n\\tbare = true\\n' > b/config",
                                          "cp -p tpl/hooks/post-checkout b/hooks/post-receive",
                                          "git push ./b HEAD:main"), allow=GIT, control=True),  # fmt: skip
    Case("git-remote-then-push", ("mkdir -p b/objects b/refs b/hooks", "printf 'ref: refs/heads/main\\n' > b/HEAD",
                                  "printf '[core]\\n\\tbare = true\\n' > b/config",
                                  "cp -p tpl/hooks/post-checkout b/hooks/post-receive",
                                  "git push b HEAD:main"), allow=GIT),  # fmt: skip
    Case("git-config-subcommand", ("git config core.fsmonitor 'touch pwned; false'", "git status"), allow=GIT),
    Case("git-submodule", ("git submodule add ./tpl t",), allow=GIT),
    # git's state files and `.git` anywhere (issue 12 findings 01, 04, 08, 15): the operator's git runs after
    Case("git-rebase-todo-exec", (*_REBASE_STATE, "git rebase --continue"), allow=GIT, control=True),
    Case("git-rebase-todo-for-the-operator", _REBASE_STATE, allow=GIT),  # the operator's `git rebase --continue`
    Case("git-commondir", ("mkdir -p x/objects x/refs", "printf 'ref: refs/heads/main\\n' > x/HEAD",
                           f"{_FSMONITOR} > x/config", "echo ../x > .git/commondir"), control=True),  # fmt: skip
    Case("gitfile-in-subfolder", ("mkdir -p x/objects x/refs", "printf 'ref: refs/heads/main\\n' > x/HEAD",
                                  f"{_FSMONITOR} > x/config", "printf 'gitdir: ../x\\n' > sub/.git"),
         control=True),  # fmt: skip
    Case("git-dir-lookalike-by-copy", ("mkdir -p sub/refs/heads", "cp -r .git/objects sub/",
                                       "printf 'ref: refs/heads/main\\n' > sub/HEAD", f"{_FSMONITOR} > sub/config")),
    # a merge copy into a folder that already holds objects/, refs/ and a config
    Case("cp-merge-assembles-git-dir", ("mkdir -p sub/objects sub/refs tpl2", f"{_FSMONITOR} > sub/config",
                                        "printf 'ref: refs/heads/main\\n' > tpl2/HEAD", "cp -r tpl2/. sub")),
    Case("cp-T-merge-assembles-git-dir", ("mkdir -p sub/objects sub/refs tpl2", f"{_FSMONITOR} > sub/config",
                                          "printf 'ref: refs/heads/main\\n' > tpl2/HEAD", "cp -rT tpl2 sub")),
    Case("git-dir-lookalike-in-one-run", ("mkdir -p y/objects y/refs && printf 'ref: refs/heads/main\\n' > y/HEAD",)),
    Case("git-legacy-remote-file", ("git fetch x", "git show stolen:s.txt"), allow=GIT, setup=_legacy_remote,
         control=True),  # fmt: skip
    Case("git-legacy-remote-written", ("mkdir -p .git/remotes", "printf 'URL: ../outside/srepo\\n' > .git/remotes/y"),
         allow=GIT),  # fmt: skip
    Case("git-alternates", ("git cat-file --batch-all-objects --batch | grep -a TOPSECRET",), allow=GIT,
         setup=_alternates, control=True),  # fmt: skip
    Case("git-am-base64-mail", ("git am evil.mbox",), allow=GIT, setup=_base64_mail, control=True),
    Case("sh-forges-rebase-todo", ("sh -c 'mkdir -p .git/rebase-merge && echo \"exec touch pwned\" > "
                                   ".git/rebase-merge/git-rebase-todo && git rev-parse HEAD > .git/rebase-merge/onto "
                                   "&& cp .git/rebase-merge/onto .git/rebase-merge/orig-head && echo refs/heads/main "
                                   "> .git/rebase-merge/head-name && touch .git/rebase-merge/interactive'",),
         allow=(*SH, *GIT), needs=NO_WALL),  # fmt: skip
    Case("sh-writes-commondir", ("sh -c 'mkdir -p x/objects x/refs && echo ref: refs/heads/main > x/HEAD && "
                                 "printf \"[core]\\n\\tfsmonitor = touch pwned\\n\" > x/config && "
                                 "echo ../x > .git/commondir'",), allow=SH, needs=NO_WALL),  # fmt: skip
    Case("sh-makes-gitfile-in-subfolder", ("sh -c 'mkdir -p x/objects x/refs && echo ref: refs/heads/main > x/HEAD "
                                           "&& printf \"[core]\\n\\tfsmonitor = \\\"touch pwned; false\\\"\\n\" "
                                           "> x/config && echo gitdir: ../x > sub/.git'",), allow=SH,
         needs=NO_WALL),  # fmt: skip
    Case("sh-writes-legacy-remote", ("sh -c 'mkdir -p .git/remotes && echo URL: ../outside/srepo > .git/remotes/y'",
                                     "git fetch y"), allow=(*SH, *GIT), needs=NO_WALL),  # fmt: skip
    # a forged index entry: git checks out index paths unverified, so the operator's
    # `git checkout -- .` would write .git/hooks/pre-commit and dal.toml
    Case("sh-forges-index-entries", ("sh -c 'printf \"#!/bin/sh\\ntouch pwned\\n\" > h && B=$(git hash-object -w h) && "
                                     "C=$(git hash-object -w dal.toml) && rm h && git update-index --add --cacheinfo "
                                     "100755,$B,xgit/hooks/pre-commit --cacheinfo 100644,$C,sub/dal.toml && python3 -c "
                                     "\"import hashlib;d=open(\\\".git/index\\\",\\\"rb\\\").read()[:-20]"
                                     ".replace(b\\\"xgit/\\\","
                                     "b\\\".git/\\\");open(\\\".git/index\\\",\\\"wb\\\").write(d+hashlib.sha1(d).digest())\"'",),
         allow=SH, needs=NO_WALL),  # fmt: skip
    # programs get a HOME of their own: a dotfile the script writes configures nothing
    Case("home-curlrc", ("printf 'output = \"pwned\"\\n' > .curlrc", "curl -s file:///dev/null"),
         allow=("curl",), control=True, denies=False),  # fmt: skip
    Case("home-wgetrc", ("printf 'output_document = pwned\\n' > .wgetrc",
                                   "wget -q http://127.0.0.1:9/ ; test -e pwned && echo read-wgetrc"),
         allow=("wget",), control=True, denies=False),  # fmt: skip
    # 7. argument models: see the policy cases above (uniq +0, cp -S) and these
    Case("tail-obsolete-follow", ("tail +1f notes.txt",)),
    Case("sort-output-outside", ("sort -o ../outside/canary.txt notes.txt",)),
    # 1, 4, 5, 9: the wall and the runtime
    Case("sh-reads-passwd", ("sh -c 'cat /etc/passwd'",), allow=SH, needs=frozenset({"wall", "read_wall"})),
    Case("sh-reads-outside-secret", ("sh -c 'cat ../outside/secret.txt'",), allow=SH,
         needs=frozenset({"wall", "read_wall"})),  # fmt: skip
    Case("sh-writes-outside", ("sh -c 'echo x > ../outside/pwned; touch ../pwned'",), allow=SH, needs=NO_WALL),
    Case("sh-remounts-root", ("sh -c 'mount -o remount,rw / && touch ../pwned'",), allow=SH,
         needs=frozenset({"wall", "no_caps"})),  # fmt: skip
    Case("sh-reads-dal-environ", ("sh -c 'cat /proc/{DALPID}/environ'",), allow=SH, needs=NO_WALL),
    Case("sh-rewrites-policy", ("sh -c 'echo \"[run]\" > dal.toml'",), allow=SH,
         needs=frozenset({"wall", "protected_ro"})),  # fmt: skip
    Case("env-builtin-secret", (), dal=f'print(env("{SECRET_VAR}"))\n', needs=frozenset({"env_allowlist"})),
    # the wall's own (issue 12 items 1, 2, 4): a missing policy file, a protected file's folder renamed, a
    # nested user namespace to regain capabilities
    Case("sh-creates-missing-policy", ("sh -c 'printf \"[run]\\nallow = [\\\"curl\\\"]\\n\" > dal.toml'",), allow=SH,
         needs=frozenset({"wall", "protected_ro"}), setup=lambda ws: (ws / "dal.toml").unlink()),  # fmt: skip
    Case("sh-renames-git-folder", ("sh -c 'mv .git .gitx; echo x >> .gitx/config; mv .gitx .git'",), allow=SH,
         needs=frozenset({"wall", "protected_ro"})),  # fmt: skip
    # issue 12, secwall: protected names anywhere in the write roots, `.git` read-only for a program other
    # than git, and curl's output options (curl has no option model: the wall holds them)
    Case("sh-plants-nested-policy", ("sh -c 'printf \"[run]\\nallow = [\\\"sh\\\"]\\n\" > sub/dal.toml'",), allow=SH,
         control=True, needs=NO_WALL, later="sub"),  # fmt: skip
    Case("sh-rewrites-nested-policy", ("sh -c 'printf \"[run]\\nallow = [\\\"sh\\\"]\\n\" > app/dal.toml'",
                                       "sh -c 'rm -f app/dal.toml; mv app app2'"), allow=SH, needs=NO_WALL,
         setup=_nested_policy_and_repo, later="app"),  # fmt: skip
    Case("sh-plants-nested-store", ("sh -c 'mkdir -p sub/.dal && echo forged > sub/.dal/dal.db'",), allow=SH,
         needs=NO_WALL, later="sub"),  # fmt: skip
    Case("sh-nested-repo-config", ("sh -c 'printf \"[core]\\n\\tfsmonitor = touch pwned\\n\" >> "
                                   "vendor/lib/.git/config'",), allow=SH, control=True, needs=NO_WALL,
         setup=_nested_policy_and_repo),  # fmt: skip
    Case("sh-hides-policy-in-a-lookalike", ("sh -c 'mkdir -p sub/objects sub/refs sub/w && echo ref: refs/heads/main > "
                                            "sub/HEAD && printf \"[run]\\nallow = [\\\"sh\\\"]\\n\" > "
                                            "sub/w/dal.toml'",), allow=SH, needs=NO_WALL, later="sub/w"),  # fmt: skip
    Case("sh-makes-nested-repo", ("sh -c 'mkdir -p sub/r/.git/objects sub/r/.git/refs && echo ref: refs/heads/main > "
                                  "sub/r/.git/HEAD && printf \"[core]\\n\\tfsmonitor = touch pwned\\n\" > "
                                  "sub/r/.git/config'",), allow=SH, control=True, needs=NO_WALL),  # fmt: skip
    Case("sh-writes-git-objects-refs-pack", ("sh -c 'echo x > .git/objects/zz; mkdir -p .git/objects/ab && printf x > "
                                             ".git/objects/ab/cdef; echo evil | git hash-object -w --stdin; "
                                             "git rev-parse HEAD > .git/refs/heads/evil; printf PACK > "
                                             ".git/objects/pack/pack-0.pack; echo > .git/packed-refs; "
                                             "echo ref: refs/heads/evil > .git/HEAD; printf DIRC > .git/index'",),
         allow=SH, control=True, needs=NO_WALL, keep=(".git/objects", ".git/refs", ".git/HEAD", ".git/index",
                                        ".git/packed-refs")),  # fmt: skip
    Case("curl-writes-git-index", ("printf 'DIRC' > idx.bin", "curl -s file://{WS}/idx.bin -o .git/index"),
         allow=("curl",), needs=NO_WALL, keep=(".git/index", ".git/objects")),  # fmt: skip
    Case("curl-create-dirs-git-object", ("printf x > obj.bin",
                                         "curl -s --create-dirs file://{WS}/obj.bin -o .git/objects/ab/cdef"),
         allow=("curl",), needs=NO_WALL, keep=(".git/objects",)),  # fmt: skip
    Case("curl-plants-nested-policy", (_SH_POLICY, "curl -s file://{WS}/payload.txt -o sub/dal.toml"),
         allow=("curl",), needs=NO_WALL, later="sub", control=True),  # fmt: skip
    Case("curl-remote-name-policy", ("curl -s --output-dir sub -O file://{WS}/x/dal.toml",), allow=("curl",),
         needs=NO_WALL, later="sub", setup=_policy_in_a_cloned_folder),  # fmt: skip
    Case("sh-nested-userns-remount", ("sh -c 'unshare -Urm sh -c \"mount -o remount,rw / && touch ../pwned\"'",),
         allow=SH, needs=frozenset({"wall", "no_caps"})),  # fmt: skip
]


@pytest.fixture()
def secret() -> str:
    return "s3cr3t-" + secrets.token_hex(8)


@pytest.fixture()
def root() -> Iterator[Path]:
    # Under /var/tmp, not /tmp: the wall puts a private /tmp in front of the host's.
    base = Path(tempfile.mkdtemp(prefix="dal-hostile-", dir="/var/tmp"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _leaks(root: Path, ran: Ran | None, secret_value: str, top_secret: str) -> list[str]:
    """Where the secret, the outside secret or /etc/passwd's content turns up: output, receipt, any file."""
    found = []
    texts: dict[str, bytes] = {}
    secret_file = os.stat(root / "outside" / "secret.txt")
    if ran is not None:
        texts = {"output": ran.stdout.encode(errors="replace"), "receipt": json.dumps(ran.receipt).encode()}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            p = Path(dirpath, name)
            if p.is_symlink() or os.path.samestat(os.stat(p), secret_file):
                continue  # the secret file itself, under any of its names
            try:
                texts[str(p.relative_to(root))] = p.read_bytes()
            except OSError:
                continue
    # The marks are searched for as UTF-8 bytes, not in decoded text: the same finds (UTF-8 never makes an
    # ASCII byte part of another character), without decoding each store's 4 MB reserve file.
    for where, text in texts.items():
        for what, mark in (("the DAL process's secret", secret_value), ("outside/secret.txt", top_secret),
                           ("/etc/passwd", PASSWD_MARK)):  # fmt: skip
            if mark.encode() in text:
                found.append(f"{what} in {where}")
    return found


def _broken(root: Path, ws: Path, before_outside: dict, before_protected: dict, ran: Ran | None,
            secret_value: str, more: tuple[str, ...] = ()) -> list[str]:  # fmt: skip
    problems = []
    after = _files(root, skip=ws)
    changed = sorted(k for k in before_outside.keys() | after.keys()
                     if before_outside.get(k) != after.get(k) and not k.startswith("attack.dal"))  # fmt: skip
    problems += [f"outside the workspace: {k} changed, appeared or went" for k in changed]
    problems += [f"marker {m} exists: a forbidden program ran" for m in MARKERS if os.path.lexists(root / m)]
    problems += _leaks(root, ran, secret_value, f"TOPSECRET-{root.name}")
    if _protected(ws, more) != before_protected:
        problems.append("a protected file changed")
    problems += _operator_git(root, ws)
    # (the top dal.toml aside: the operator's `git checkout -- .` may restore a committed one, their own doing)
    def _git_kept(k: str) -> bool:  # (the case's own `keep` paths: git's own work changes objects and the index)
        return k != "dal.toml" and not any(k == m or k.startswith(m + "/") for m in more)

    if {k: v for k, v in _protected(ws).items() if _git_kept(k)} != {
            k: v for k, v in before_protected.items() if _git_kept(k)}:
        problems.append("a protected file changed after the operator's git ran (a forged index entry?)")
    if ran is not None and not (ws / ".dal" / "dal.db").exists():
        problems.append("the run store is gone")
    return problems


def _operator_git(root: Path, ws: Path) -> list[str]:
    """The person's own git, later, outside DAL and any wall, in the workspace and its `sub/` folder: what
    a script left in git's state (a todo list, a commondir, a `.git` file, a legacy remote) must not make
    it run anything (the markers) or take a repository elsewhere."""
    if not HAVE_GIT:
        return []
    problems = []
    home = root / "operator-home"
    home.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LC_ALL": "C.UTF-8", "GIT_EDITOR": "true"}
    for where in (ws, ws / "sub"):
        if not where.is_dir():
            continue
        for cmd in (["git", "status"], ["git", "checkout", "--", "."], ["git", "commit", "-qam", "x", "--allow-empty"],
                    ["git", "rebase", "--continue"]):
            subprocess.run(cmd, cwd=where, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
    shutil.rmtree(home, ignore_errors=True)
    problems += [f"marker {m} exists after the operator's git ran" for m in MARKERS if os.path.lexists(root / m)]
    if os.path.lexists(ws / ".git" / "commondir"):
        problems.append(".git/commondir exists: the operator's git reads the repository from elsewhere")
    return problems


def _params() -> list:
    out = []
    for case in CASES:
        marks = []
        missing = [name for name in case.allow if find_program(name) is None]
        if missing:
            marks.append(pytest.mark.skip(reason=f"{', '.join(missing)} not installed"))
        for wall in (True, False):
            wall_marks = list(marks)
            if wall and not HAVE_BWRAP:
                wall_marks.append(pytest.mark.skip(reason="bubblewrap unavailable"))
            out.append(pytest.param(case, wall, id=f"{case.id}-{'wall' if wall else 'nowall'}", marks=wall_marks))
    return out


@pytest.mark.parametrize(("case", "wall"), _params())
def test_hostile_case_holds(case: Case, wall: bool, root: Path, secret: str, features: dict[str, bool]) -> None:
    if not wall and "wall" in case.needs:
        pytest.skip("docs/policy.md names this case as needing the wall: the static check alone cannot hold it")
    missing = sorted(f for f in case.needs - {"wall"} if not features.get(f, False) and (wall or f == "env_allowlist"))
    if missing:
        pytest.xfail(f"this build lacks {', '.join(missing)} (issue 12, other work)")
    ws = _build(root, case)
    before_outside = _files(root, skip=ws)
    before_protected = _protected(ws, case.keep)
    ran = _run(root, ws, case, wall, secret)
    later = _later_run(ws, case, wall) if case.later else ""
    problems = _broken(root, ws, before_outside, before_protected, ran, secret, case.keep)
    if later:
        problems.append(f"the later `dal run` in {case.later}/ ran sh: {later}")
    assert not problems, f"{case.id}: {problems}\n{ran.stdout}"
    if "wall" not in case.needs and case.commands and case.denies:
        # The static check held it: the attack itself was denied, not merely failed.
        assert "denied" in ran.statuses, f"{case.id}: nothing was denied\n{ran.stdout}"
    runs = [item for item in ran.receipt["effects"]["items"]]
    assert ran.receipt["run_id"] and len(runs) == len(case.commands)


def _later_run(ws: Path, case: Case, wall: bool) -> str:
    """The operator's next `dal run` started in `case.later` (policy discovery: the nearest dal.toml or
    .dal above it): a script that runs sh there. What a planted policy or store would make of it shows as
    the marker sh touches; '' when sh was denied."""
    where = ws / str(case.later)
    script = ws.parent / "later.dal"
    script.write_text('print(run("sh -c \'touch pwned\'").status)\n')
    env = {k: v for k, v in os.environ.items() if k != SECRET_VAR}
    flags = [] if wall else ["--unsandboxed-as-root"] if os.geteuid() == 0 else []
    r = subprocess.run([sys.executable, "-m", "dal", "run", *flags, str(script)], cwd=where, env=env,
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    script.unlink()
    ran_sh = os.path.lexists(where / "pwned") or "completed" in r.stdout
    if os.path.lexists(where / "pwned"):
        os.unlink(where / "pwned")
    return (r.stdout + r.stderr).strip() if ran_sh else ""


@pytest.mark.parametrize("case", [c for c in CASES if c.control], ids=lambda c: c.id)
def test_the_attack_works_without_dal(case: Case, root: Path, secret: str) -> None:
    """The control: bash runs the same commands in the same workspace (with the operator's environment, as
    a program would have it without DAL's scrubbing), and some canary breaks."""
    if any(find_program(name) is None for name in case.allow):
        pytest.skip(f"{', '.join(case.allow)} not installed")
    ws = _build(root, case)
    os.symlink("/proc/self/environ", ws / "trap_proc" / "environ")  # the reading program's own, unscrubbed
    if (ws / "p.patch").exists():
        (ws / "p.patch").write_text((ws / "p.patch").read_text().replace("{DALPID}", "self"))
    before_outside = _files(root, skip=ws)
    before_protected = _protected(ws, case.keep)
    out = ""
    for cmd in case.commands:
        cmd = cmd.replace("{DALPID}", "self").replace("{WS}", str(ws))
        r = subprocess.run(["bash", "--norc", "-c", cmd], cwd=ws, capture_output=True,
                           text=True, timeout=20, stdin=subprocess.DEVNULL,
                           env={**os.environ, SECRET_VAR: secret, "HOME": str(ws)})  # fmt: skip
        out += r.stdout + r.stderr
    (root / "control-output.txt").write_text(out)
    problems = _broken(root, ws, before_outside, before_protected, None, secret, case.keep)
    problems = [p for p in problems if "control-output.txt" not in p or "in control-output.txt" in p]
    assert problems, f"{case.id}: the attack did nothing even without DAL\n{out}"


def test_the_corpus_covers_every_class() -> None:
    ids = {c.id for c in CASES}
    assert len(CASES) >= 50 and len(ids) == len(CASES)
    for needle in ("policy", "store", "git-config", "git-hook", "diff-", "cp-P", "grep-r", "git-grep",
                   "git-clone", "git-diff", "git-log", "uniq", "sh-", "env-", "environ"):  # fmt: skip
        assert any(needle in i for i in ids), needle


# --- the legitimate side ------------------------------------------------------------------------------

AGENT = [
    "git status",
    "git status --porcelain",
    "git diff",
    "git diff --stat",
    "git log --oneline -5",
    "git log -p -1",
    "git show --stat HEAD",
    "git add notes.txt",
    "git add -A",
    "git commit -m 'update notes'",
    "git branch feature",
    "git branch -a",
    "git checkout -b feat2",
    "git switch main",
    "git rev-parse HEAD",
    "git rev-parse --show-toplevel",
    "git ls-files",
    "git blame notes.txt",
    "git grep -n TODO",
    "git tag v0",
    "git stash",
    "git stash list",
    "git stash pop",
    "git restore notes.txt",
    "git mv docs/a.md docs/b.md",
    "git rm --cached docs/b.md",
    "git diff HEAD~1 --stat",
    "git format-patch -1 -o patches",
    "git archive -o out.tar HEAD",
    "git describe --always",
    "git shortlog -sn",
    "git reset --soft HEAD",
    "git cherry-pick --abort",
    "git remote -v",
    "mkdir -p src/pkg && printf 'print(1)\\n' > src/pkg/main.py",
    "grep -rn TODO src docs",
    "find src -name '*.py'",
    "wc -l src/pkg/main.py",
    "head -20 notes.txt",
    "tail -n +2 notes.txt",
    "ls -la",
    "cp -r src src_backup",
    "diff -r --no-dereference src src_backup",
    "rm -rf src_backup",
    "sort notes.txt | uniq -c | sort -rn",
    "du -sh src",
    "sha256sum notes.txt",
    "date +%F",
    "echo done >> log.txt",
    "tee -a log.txt < notes.txt",
    "test -f notes.txt && echo yes",
    "realpath notes.txt",
    "cat dal.toml",
    "rm -f notes.txt~",
]


# With curl and wget allowed (no network: what matters is that they are not denied).
FETCH = [
    "curl -sS file://{WS}/notes.txt",
    "curl -sS -o out/notes.txt file://{WS}/notes.txt",
    "curl -sSL --create-dirs -o out/new/n.txt file://{WS}/notes.txt",
    "curl -s --output-dir out -O file://{WS}/notes.txt",
    "curl -sS -w '%{http_code}' -o /dev/null http://127.0.0.1:9/",
    "curl -sS -H 'Accept: application/json' -d @notes.txt http://127.0.0.1:9/api",
    "wget -q -P out http://127.0.0.1:9/a.txt",
    "wget -qO out/page.html http://127.0.0.1:9/",
    "wget -qO- http://127.0.0.1:9/a",
    "wget -nv -nc -e robots=off -P out http://127.0.0.1:9/b.txt",
]


def _legit_run(ws: Path, commands: list[str], wall: bool, allow: tuple[str, ...]) -> list[tuple[str, str]]:
    case = Case("legit", tuple(commands), allow=allow)
    ran = _run(ws.parent, ws, case, wall, "unused")
    assert len(ran.statuses) == len(commands), ran.stdout
    return list(zip(commands, ran.statuses, strict=True))


@pytest.mark.parametrize("wall", [pytest.param(True, marks=pytest.mark.skipif(not HAVE_BWRAP, reason="no bwrap")),
                                  False], ids=["wall", "nowall"])  # fmt: skip
def test_legitimate_commands_still_run(wall: bool, root: Path) -> None:
    ws, _ = build_workspace(root)
    corpus = _legit_run(ws, list(ALLOW), wall, ())
    repo_root = root / "repo"
    repo_root.mkdir()
    case = Case("agent", ())
    repo_ws = _build(repo_root, case) if HAVE_GIT else None
    agent = _legit_run(repo_ws, AGENT, wall, GIT) if repo_ws is not None else []
    fetch = []
    if find_program("curl") and find_program("wget"):
        (root / "fetch").mkdir()
        fetch_ws = _build(root / "fetch", Case("fetch", (), repo=False))
        (fetch_ws / "out").mkdir()
        fetch = _legit_run(fetch_ws, FETCH, wall, ("curl", "wget"))
        assert not [c for c, s in fetch if s == "denied"], [c for c, s in fetch if s == "denied"]
    results = corpus + agent + fetch
    denied = [(c, s) for c, s in results if s == "denied"]
    share = 1 - len(denied) / len(results)
    print(f"{share:.1%} of {len(results)} legitimate commands ran ({'wall' if wall else 'no wall'}); denied: {denied}")
    assert share >= 0.95, f"only {share:.1%} of {len(results)} legitimate commands ran; denied: {denied}"
    assert not [c for c, s in agent if s == "denied"], [c for c, s in agent if s == "denied"]


def test_a_walked_tree_past_the_limit_is_denied_not_half_checked(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dal.effects.classify import check

    ws = root / "ws"
    (ws / "many").mkdir(parents=True)
    for i in range(30):
        (ws / "many" / f"f{i}").write_text("x")
    monkeypatch.setattr(check, "_TREE_LIMIT", 20)
    d = check.check_command("grep -r x many", Policy.load(ws))
    assert not d.allowed and "more than 20 entries" in d.reason
    assert stat.S_ISDIR(os.stat(ws / "many").st_mode)
