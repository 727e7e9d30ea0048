"""The bubblewrap wall, attacked as the script's author would, executed next to canaries, as root.

`sh` is allowed on purpose in most of these: it runs whatever it is told, so only the wall stands between
it and the host. The same attacks without an interpreter, with the wall turned off by the test hook, show
that the static check alone still holds them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from effects_workspace import CANARY, build_workspace, snapshot

import dal
import dal.effects.exec.running
from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.result import EffectResult
from dal.effects.wall import kind

HAVE_BWRAP = sandbox_status()[0]
walled = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable")
SECRET = "dal-wall-secret-7f3a9c"


def sh(ws: Path, script: str, *, policy: Policy | None = None, **kw: object) -> EffectResult:
    """`sh -c SCRIPT` through run(), with sh allowed (and inside the wall unless the test says otherwise)."""
    policy = policy or Policy.load(ws, allow_run=["sh"])
    return run_effect("sh -c " + shlex.quote(script), EffectContext(policy=policy, **kw))  # type: ignore[arg-type]


@pytest.fixture()
def git_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wall as git alone gets it (`.git` writable but its held entries): `sh` stands in for what git
    might write there, so that the undo behind those entries is tested. With `sh` itself, `.git` is
    read-only as a whole (test_sh_cannot_write_anything_of_git)."""
    from dal.effects.exec import executor

    monkeypatch.setattr(executor, "locks_git", lambda pipeline: False)


@pytest.fixture()
def canaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The canary workspace, a secret in DAL's own environment, and a marker folder outside /tmp."""
    monkeypatch.setenv("DAL_TEST_SECRET", SECRET)
    ws, outside = build_workspace(tmp_path)
    return ws, outside


@walled
def test_programs_run_with_no_capabilities_even_as_root(canaries: tuple[Path, Path]) -> None:
    ws, _ = canaries
    r = sh(ws, "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status; id -u; "
               "mount -o remount,rw / && echo REMOUNTED; mount -t tmpfs none /usr && echo MOUNTED; "
               "unshare -U true && echo NESTED_USERNS; unshare -r true && echo ROOT_IN_USERNS; echo done")
    assert r.ok, r.stderr
    status = dict(line.split(":\t") for line in r.stdout.splitlines() if ":\t" in line)
    assert os.geteuid() != 0 or "0" in r.stdout.splitlines()  # root inside, as the user who started DAL
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[cap], 16) == 0, (cap, status[cap])
    assert status["NoNewPrivs"] == "1"
    for escaped in ("REMOUNTED", "MOUNTED", "NESTED_USERNS", "ROOT_IN_USERNS"):
        assert escaped not in r.stdout
    assert r.stdout.endswith("done\n")


@walled
def test_sh_cannot_write_outside_its_roots(canaries: tuple[Path, Path], tmp_path: Path) -> None:
    ws, outside = canaries
    markers = [Path("/var/tmp") / f"dal-wall-marker-{os.getpid()}", Path("/root") / f"dal-wall-marker-{os.getpid()}",
               Path("/etc") / f"dal-wall-marker-{os.getpid()}", tmp_path / "beside-the-workspace"]
    before = snapshot(outside)
    tries = " ; ".join(f"echo x > {shlex.quote(str(m))}" for m in markers)
    r = sh(ws, f"{tries}; echo x > ../outside/canary.txt; echo x > link_out/canary.txt; echo x >> file_link_out; "
               "echo x > dangling; touch /usr/dal-marker /x /dev/x; mkdir /tmp/ok && echo TMP_OK; echo end")
    assert r.stdout.endswith("TMP_OK\nend\n")  # its own /tmp works; nothing else outside does
    for m in markers:
        assert not m.exists(), m
    assert snapshot(outside) == before and (outside / "canary.txt").read_text() == CANARY
    assert not (outside / "created-by-dangling").exists()
    assert not Path("/usr/dal-marker").exists() and not Path("/x").exists()


@walled
def test_sh_sees_none_of_the_host_outside_its_roots(canaries: tuple[Path, Path]) -> None:
    ws, outside = canaries
    r = sh(ws, "cat ../outside/canary.txt link_out/canary.txt file_link_out; ls /root /home /var /opt /srv; "
               "cat /etc/shadow /etc/hostname; ls " + shlex.quote(str(outside)) + "; ls / ; echo ---; cat /etc/passwd")
    assert CANARY not in r.stdout
    top, passwd = r.stdout.split("---\n")
    assert set(top.split()) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr"}
    users = {line.split(":")[0] for line in passwd.splitlines()}
    assert users <= {"root", "nobody", os.environ.get("USER", "root")}  # not the host's list of users
    for missing in ("/root", "/home", "/var", "/etc/shadow", str(outside)):
        assert f"{missing}" in r.stderr and "No such file or directory" in r.stderr
    # The hard link to the canary is the one thing of the outside a workspace can show: it is the same
    # file. The check refuses it; the wall cannot (see docs/policy.md, "What the wall does not cover").


@walled
def test_no_secret_and_no_dal_process_in_the_wall(canaries: tuple[Path, Path]) -> None:
    ws, _ = canaries
    r = sh(ws, "ls /proc | grep -c '^[0-9]'; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline | tr '\\0' '\\n'; "
               "cat /proc/" + str(os.getpid()) + "/environ; echo end")
    assert SECRET not in r.stdout + r.stderr
    assert int(r.stdout.splitlines()[0]) <= 4  # bubblewrap's init, sh, ls/grep: its own PID namespace
    assert "python" not in r.stdout and "end" in r.stdout  # DAL's own command line is not there


def test_without_the_wall_the_static_check_holds_the_same_attacks(canaries: tuple[Path, Path]) -> None:
    ws, outside = canaries
    before = snapshot(outside)
    ctx = EffectContext(policy=Policy.load(ws), use_sandbox=False)  # the test hook: no wall at all
    for command in (
        "cat /proc/1/environ", f"cat /proc/{os.getpid()}/environ", "cat ../outside/canary.txt",
        "cat link_out/canary.txt", "echo x > ../outside/canary.txt", "echo x >> file_link_out", "touch dangling",
        f"touch /var/tmp/dal-wall-marker-{os.getpid()}", "cat /etc/shadow", "ls /root", "sh -c id",
        "echo '[run]' > dal.toml",
    ):
        r = run_effect(command, ctx)
        # Denied by the check, or (a redirection) when DAL opens it: the command does not start either way.
        assert r.status == "denied" or (r.code == 126 and "denied at start" in r.stderr), (command, r.summary)
        assert SECRET not in r.stdout
    assert snapshot(outside) == before
    assert not Path(f"/var/tmp/dal-wall-marker-{os.getpid()}").exists() and not (ws / "dal.toml").exists()


@walled
def test_private_tmp_and_shm_are_capped_and_the_root_is_read_only(tmp_path: Path) -> None:
    (tmp_path / "dal.toml").write_text('[run]\nallow = ["sh"]\n[limits]\ntmp_size = "1M"\n')
    policy = Policy.load(tmp_path)
    r = sh(tmp_path, "head -c 2000000 /dev/zero > /tmp/big; echo tmp=$?; head -c 2000000 /dev/zero > /dev/shm/big; "
                     "echo shm=$?; touch /new /etc/new /dev/new; echo root=$?; ls -l /tmp/big | cut -d' ' -f5",
           policy=policy)
    assert "tmp=1" in r.stdout and "shm=1" in r.stdout and "root=1" in r.stdout
    assert r.stderr.count("No space left on device") == 2 and r.stderr.count("Read-only file system") == 3
    assert int(r.stdout.splitlines()[-1]) <= 1 << 20
    again = sh(tmp_path, "ls -A /tmp /dev/shm", policy=policy)  # a fresh /tmp for every command
    # (/tmp holds the programs' HOME, and only the folders down to the workspace, which is under /tmp here)
    top = [tmp_path.parts[2]] if tmp_path.parts[1] == "tmp" else []
    assert again.stdout.split() == ["/dev/shm:", "/tmp:", *sorted([".dal-home", *top])]


def _git_repo(ws: Path) -> None:
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (ws / ".git" / "info").mkdir()


@walled
def test_protected_paths_are_read_only_inside_the_wall(tmp_path: Path) -> None:
    ws = tmp_path
    policy_text = '[run]\nallow = ["sh"]\n'
    (ws / "dal.toml").write_text(policy_text)
    (ws / ".dal").mkdir()
    (ws / ".dal" / "dal.db").write_text("store")
    _git_repo(ws)
    policy = Policy.load(ws)
    before = snapshot(ws)
    attacks = [
        "printf '[run]\\nallow = [\"curl\"]\\n' > dal.toml", "echo >> dal.toml", "rm -f dal.toml", "mv dal.toml x",
        "rm -rf .dal", "echo x > .dal/dal.db", "touch .dal/new", "mv .dal .dal2",
        "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config", "touch .git/hooks/pre-commit",
        "mv .git .gitx", "rm -rf .git/info", "mv .git/config .git/config2",
    ]
    r = sh(ws, " ; ".join(attacks) + " ; echo end", policy=policy)
    assert r.stdout.endswith("end\n")
    assert snapshot(ws) == before
    assert (ws / "dal.toml").read_text() == policy_text
    # Other files of the workspace stay writable: the protection is exactly the protected paths.
    ok = sh(ws, "echo fine > notes.txt && cat notes.txt", policy=policy)
    assert ok.ok and ok.stdout == "fine\n"
    # ... but nothing of `.git` is, objects included, while a program other than git runs (locks_git)
    locked = sh(ws, "mkdir -p .git/objects/ab || echo locked", policy=policy)
    assert locked.stdout.endswith("locked\n") and not (ws / ".git" / "objects" / "ab").exists()


@walled
def test_a_missing_policy_file_cannot_be_created(tmp_path: Path) -> None:
    ws = tmp_path
    policy = Policy.load(ws, allow_run=["sh"])
    r = sh(ws, "printf '[run]\\nallow = [\"curl\"]\\n' > dal.toml; mkdir -p .dal/x; ls -a; echo end", policy=policy)
    assert "end" in r.stdout and "cannot create dal.toml" in r.stderr
    assert not (ws / "dal.toml").exists() and not (ws / ".dal").exists()  # the placeholders are gone too
    assert Policy.load(ws).source == "default policy"
    # A pipeline of the default toolset needs no placeholder (the check sees what it writes): `ls` shows none.
    listing = run_effect("ls -a", EffectContext(policy=policy))
    assert listing.stdout.split() == [".", ".."]


@walled
def test_a_protected_name_that_is_a_symlink_stops_the_command(tmp_path: Path) -> None:
    ws = tmp_path
    (ws / "real.toml").write_text('[run]\nallow = ["sh"]\n')
    os.symlink("real.toml", ws / "dal.toml")
    r = sh(ws, "echo ran > marker.txt", policy=Policy.load(ws))
    assert r.status == "failed" and r.code == 126
    assert "denied at start: the wall cannot be set up" in r.stderr and "symbolic link" in r.stderr
    assert not (ws / "marker.txt").exists()


@walled
def test_write_roots_and_read_roots_anywhere(tmp_path: Path) -> None:
    ws, shared = tmp_path / "ws", tmp_path / "shared"  # both under /tmp, which the wall replaces
    ws.mkdir()
    shared.mkdir()
    (shared / "data.txt").write_text("shared data\n")
    (ws / "in.txt").write_text("input\n")
    policy = Policy.load(ws, allow_read=[str(shared)], allow_write=["out"], allow_run=["sh"])
    ctx = EffectContext(policy=policy)
    assert run_effect(f"cat {shared}/data.txt in.txt", ctx).stdout == "shared data\ninput\n"
    assert run_effect("cp in.txt out/copy.txt", ctx).ok  # `out` did not exist: the wall made it
    assert (ws / "out" / "copy.txt").read_text() == "input\n"
    r = sh(ws, f"echo x > {shared}/new; echo x > in.txt; echo x > new.txt; echo end", policy=policy)
    assert r.stdout == "end\n" and r.stderr.count("Read-only file system") == 3
    assert sorted(p.name for p in shared.iterdir()) == ["data.txt"] and (ws / "in.txt").read_text() == "input\n"


@walled
def test_dal_test_with_allow_write_in_a_workspace_under_tmp(tmp_path: Path) -> None:
    import sys

    (tmp_path / "job.dal").write_text('run("cp notes.txt out/copy.txt")\nprint(run("cat out/copy.txt"))\n')
    (tmp_path / "job.test.dal").write_text(
        'run("echo hello > notes.txt")\n'
        'let r = invoke("job.dal", {"policy": {"allow_write": ["out"]}})\n'
        'assert_eq(r.status, "completed")\n'
        'assert_eq(r.output, "hello\\n")\n'
    )
    p = subprocess.run([sys.executable, "-m", "dal", "test", "job.test.dal"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed, 0 failed" in p.stdout


# --- root without a working wall --------------------------------------------------------------------


@pytest.fixture()
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(kind.PROBES, "bubblewrap", lambda: (False, "bubblewrap (bwrap) is not installed"))
    monkeypatch.setitem(kind.PROBES, "landlock", lambda: (False, ""))


@pytest.mark.skipif(os.geteuid() != 0, reason="root only")
def test_root_without_a_wall_refuses_every_command_unless_the_operator_says_so(
    tmp_path: Path, no_bwrap: None
) -> None:
    script = 'let r = run("touch made.txt")\nprint(r.status)\nprint(r)\n'
    refused = dal.run(script, workspace=tmp_path)
    assert refused.output.splitlines()[0] == "denied" and "--unsandboxed-as-root" in refused.output
    assert not (tmp_path / "made.txt").exists()
    assert refused.to_dict()["sandbox"]["wall"] == "none" and refused.to_dict()["sandbox"]["refused"] is True
    assert "commands refused" in refused.to_markdown()
    allowed = dal.run(script, workspace=tmp_path, unsandboxed_as_root=True)
    assert allowed.output.splitlines()[0] == "completed" and (tmp_path / "made.txt").exists()
    box = allowed.to_dict()["sandbox"]
    assert box["wall"] == "none" and not box["refused"] and "--unsandboxed-as-root" in box["reason"]
    assert "commands ran without the bubblewrap wall" in allowed.to_markdown()


@walled
def test_the_receipt_says_the_wall_held(tmp_path: Path) -> None:
    r = dal.run('print(run("echo hi"))\n', workspace=tmp_path)
    assert r.to_dict()["sandbox"] == {"wall": "bubblewrap", "reason": sandbox_status()[1], "refused": False}
    assert "- wall:" not in r.to_markdown()  # a line only when commands ran without the wall
    assert dal.run('print("no commands")\n', workspace=tmp_path).to_dict()["sandbox"] is None


@pytest.mark.skipif(os.geteuid() != 0, reason="root only")
def test_the_cli_flag_reaches_the_commands(tmp_path: Path) -> None:
    import json
    import sys

    (tmp_path / "s.dal").write_text('print(run("echo hi").status)\n')
    p = subprocess.run([sys.executable, "-m", "dal", "run", "s.dal", "--json", "--unsandboxed-as-root"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    receipt = json.loads(p.stdout)
    assert receipt["sandbox"]["refused"] is False
    assert receipt["sandbox"]["wall"] == ("bubblewrap" if HAVE_BWRAP else "none")


@walled
def test_the_wall_binds_by_path_where_bubblewrap_cannot_bind_a_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dal.effects.wall.sandbox as sandbox

    monkeypatch.setattr(sandbox, "_BIND_BY_FD", False)  # as with a bubblewrap older than --bind-fd
    ws, outside = build_workspace(tmp_path)
    (ws / "dal.toml").write_text('[run]\nallow = ["sh"]\n')
    r = sh(ws, "cat notes.txt >/dev/null && echo ok; echo x > dal.toml; cat ../outside/canary.txt; echo y > new.txt",
           policy=Policy.load(ws))
    assert r.stdout == "ok\n" and (ws / "new.txt").read_text() == "y\n"
    assert (ws / "dal.toml").read_text() == '[run]\nallow = ["sh"]\n' and CANARY not in r.stdout


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_git_running_a_hook_from_its_config_runs_it_inside_the_wall(canaries: tuple[Path, Path]) -> None:
    """The issue's git vector: a `core.fsmonitor` line makes `git status` run a command. Wherever that line
    comes from (here the repository's own config, which a script cannot write but an operator may), the
    command runs inside the wall, with no capabilities and nothing of the host to write."""
    ws, outside = canaries
    marker = Path("/var/tmp") / f"dal-git-marker-{os.getpid()}"
    hook = (f"id -u > hook-ran.txt; mount -o remount,rw / 2>> hook-ran.txt; echo x > {marker}; "
            f"echo x > {outside}/canary.txt; grep CapEff /proc/self/status >> hook-ran.txt")
    shutil.rmtree(ws / ".git")  # the canary workspace's stand-in: a real repository here
    subprocess.run(["git", "init", "-q", str(ws)], check=True, env={"PATH": "/usr/bin:/bin", "HOME": str(outside)})
    with open(ws / ".git" / "config", "a") as f:
        f.write(f"[core]\n\tfsmonitor = \"{hook}\"\n")
    policy = Policy.load(ws, allow_run=["git"])
    run_effect("git status --short", EffectContext(policy=policy))
    ran = (ws / "hook-ran.txt").read_text()
    assert "permission denied" in ran and "CapEff:\t0000000000000000" in ran  # it ran, walled
    assert not marker.exists() and (outside / "canary.txt").read_text() == CANARY


@walled
def test_a_root_may_be_a_single_file(tmp_path: Path) -> None:
    ws, shared = tmp_path / "ws", tmp_path / "shared"
    ws.mkdir()
    shared.mkdir()
    (shared / "one.txt").write_text("readable\n")
    (shared / "other.txt").write_text("not readable\n")
    (ws / "log.txt").write_text("")
    policy = Policy.load(ws, allow_read=[str(shared / "one.txt")], allow_write=["log.txt"], allow_run=["sh"])
    assert run_effect(f"cat {shared}/one.txt", EffectContext(policy=policy)).stdout == "readable\n"
    r = sh(ws, f"cat {shared}/other.txt; echo line >> log.txt; echo x > new.txt; echo end", policy=policy)
    assert r.stdout == "end\n" and "No such file or directory" in r.stderr and "Read-only" in r.stderr
    assert (ws / "log.txt").read_text() == "line\n" and not (ws / "new.txt").exists()


@walled
def test_a_symlinked_git_folder_inside_the_workspace_is_protected_where_it_really_is(tmp_path: Path,
                                                                                    git_alone: None) -> None:
    ws = tmp_path
    (ws / "repo.git" / "hooks").mkdir(parents=True)
    (ws / "repo.git" / "config").write_text("[core]\n")
    os.symlink("repo.git", ws / ".git")
    r = sh(ws, "echo x >> .git/config; echo x >> repo.git/config; touch repo.git/hooks/h; echo ok > notes.txt; "
               "echo end")
    assert r.stdout == "end\n" and r.stderr.count("Read-only file system") == 3
    assert (ws / "repo.git" / "config").read_text() == "[core]\n" and (ws / "notes.txt").read_text() == "ok\n"


def _repo_with_branch(ws: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent), "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@e",
           "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@e"}
    for cmd in ("git init -q -b main .", "git commit -q --allow-empty -m one", "git checkout -q -b side",
                "git commit -q --allow-empty -m two", "git checkout -q main", "git commit -q --allow-empty -m three",
                "git checkout -q side", "git config user.name a", "git config user.email a@e"):
        subprocess.run(cmd.split(), cwd=ws, check=True, env=env, capture_output=True)


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_git_state_a_program_makes_inside_the_wall_does_not_outlive_it(tmp_path: Path, git_alone: None) -> None:
    """Finding 01: a rebase todo list or a commondir made inside the wall would make the person's own git
    run the script's commands later. Placeholders hold the entries an empty folder stands in for; those whose
    mere existence changes git are removed when the pipeline ends, and the command fails saying so."""
    ws = tmp_path / "ws"
    ws.mkdir()
    _repo_with_branch(ws)
    r = sh(ws, "mkdir -p .git/rebase-merge && echo 'exec touch pwned' > .git/rebase-merge/git-rebase-todo && "
               "git rev-parse HEAD > .git/rebase-merge/onto && echo ../x > .git/commondir && echo made",
           policy=Policy.load(ws, allow_run=["sh", "git"]))
    assert r.status == "failed" and r.code == 126 and "made" in r.stdout
    assert "dal: removed .git/commondir, .git/rebase-merge" in r.stderr
    assert not (ws / ".git" / "rebase-merge").exists() and not (ws / ".git" / "commondir").exists()
    r = sh(ws, "mkdir .git/modules/m; echo /x > .git/objects/info/alternates; echo URL: /x > .git/remotes/y; "
               "echo x > .git/branches/y; echo end")
    assert r.stdout == "end\n" and r.stderr.count("Read-only file system") == 4, r.stderr
    for rel in (".git/modules", ".git/objects/info/alternates", ".git/remotes"):
        assert not (ws / rel).exists(), rel  # the placeholders are gone again
    assert sorted(os.listdir(ws / ".git" / "branches")) == []
    # git's own multi-step operation, finished within the command, is untouched
    r = run_effect("git rebase main", EffectContext(policy=Policy.load(ws, allow_run=["git"])))
    assert r.ok and "removed" not in r.stderr, r.stderr
    log = subprocess.run(["git", "log", "--format=%s"], cwd=ws, capture_output=True, text=True).stdout
    assert log.split() == ["two", "three", "one"]
    assert subprocess.run(["git", "status"], cwd=ws, capture_output=True).returncode == 0
    assert not (ws / "pwned").exists()


@pytest.mark.parametrize("wall", [pytest.param(True, marks=walled), False], ids=["wall", "nowall"])
def test_programs_get_a_home_of_their_own_not_the_workspace(tmp_path: Path, wall: bool) -> None:
    """Finding 11: with HOME the workspace, a `.curlrc` (`.wgetrc`, `.netrc`, `.npmrc`, `.gitconfig`,
    `.local/` ...) the script wrote would configure the programs the policy allows. HOME is a folder of the
    command's own, empty when it starts, and gone afterwards."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".curlrc").write_text('output = "pwned"\n')
    ctx = {"use_sandbox": wall, "unsandboxed_as_root": True}
    r = sh(ws, 'echo "$HOME" "$XDG_CONFIG_HOME"; ls -A "$HOME" | wc -l; echo x > "$HOME/.curlrc"; echo ok', **ctx)
    home, xdg, count, ok = r.stdout.split()
    assert r.ok and ok == "ok" and count == "0" and xdg == home + "/.config"
    assert not home.startswith(str(ws)) and home != str(ws)
    if wall:
        assert home == "/tmp/.dal-home"
    else:
        assert not os.path.exists(home)  # removed with the command
    again = sh(ws, 'ls -A "$HOME" | wc -l', **ctx)
    assert again.stdout.strip() == "0"  # what one command leaves in its HOME, the next does not see
    if shutil.which("curl"):
        r = run_effect("curl -s file:///dev/null", EffectContext(policy=Policy.load(ws, allow_run=["curl"]), **ctx))
        assert r.ok and not (ws / "pwned").exists()


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_a_gitfile_or_git_directory_made_anywhere_inside_the_wall_is_undone(tmp_path: Path) -> None:
    """Finding 15: a `.git` file (`gitdir: ../x`) or a folder passing for a git directory, made by a program
    inside the wall anywhere in the write roots, would make a person's git there run its config later. What
    git makes itself (`git init`, `git clone`'s `.git` folder, `git worktree add`'s `.git` file) stays."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    _repo_with_branch(ws)
    policy = Policy.load(ws, allow_run=["sh", "git"])
    r = sh(ws, "mkdir -p x/objects x/refs deep/y/objects deep/y/refs && echo ref: refs/heads/main > x/HEAD && "
               "echo ref: refs/heads/main > deep/y/HEAD && echo 'gitdir: ../x' > sub/.git && ln -s ../x deep/.git && "
               "echo made", policy=policy)
    assert r.code == 126 and "made" in r.stdout, r.stderr
    assert "dal: removed" in r.stderr and "sub/.git" in r.stderr and "x/HEAD" in r.stderr
    for rel in ("sub/.git", "deep/.git", "x/HEAD", "deep/y/HEAD"):
        assert not os.path.lexists(ws / rel), rel
    assert (ws / "x" / "objects").is_dir()  # only what makes git take it for a repository is gone
    for cmd in ("git init -q fresh", "git clone -q . copy", "git worktree add -q wt"):
        r = run_effect(cmd, EffectContext(policy=policy))
        assert r.ok and "removed" not in r.stderr, (cmd, r.stderr)
    assert (ws / "fresh" / ".git").is_dir() and (ws / "copy" / ".git").is_dir() and (ws / "wt" / ".git").is_file()


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_a_gitfile_dressed_as_a_worktree_is_undone_unless_it_leads_back(tmp_path: Path, git_alone: None) -> None:
    """A `.git` file into .git/worktrees/NAME stays only when that worktree's commondir leads back to the
    repository (what `git worktree add` writes); one whose commondir names the script's folder goes."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    _repo_with_branch(ws)
    r = sh(ws, "mkdir -p evil/objects evil/refs .git/worktrees/w && echo ../../../evil > .git/worktrees/w/commondir "
               "&& echo ref: refs/heads/main > .git/worktrees/w/HEAD && echo 'gitdir: ../.git/worktrees/w' > sub/.git")
    assert r.code == 126 and "sub/.git" in r.stderr, r.stderr
    assert not os.path.lexists(ws / "sub" / ".git")


@walled
def test_a_config_missing_from_an_existing_git_folder_cannot_be_added_inside_the_wall(tmp_path: Path,
                                                                                     git_alone: None) -> None:
    ws = tmp_path / "ws"
    (ws / ".git" / "objects").mkdir(parents=True)
    (ws / ".git" / "refs").mkdir()
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    r = sh(ws, "printf '[core]\\n\\tfsmonitor = \"touch pwned\"\\n' > .git/config; echo end")
    assert r.code == 126 and "removed .git/config" in r.stderr and not (ws / ".git" / "config").exists()


@walled
def test_the_walk_for_git_lookalikes_fails_closed_past_its_limit(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The script chooses the tree's size. Past the walk's limit before the pipeline, no
    program outside the default toolset starts; a pipeline that grows the tree past it fails, names what it
    could not check (what the partial walk found new is still undone, but which part it walks is the
    filesystem's order, so this test does not count on it)."""
    import dal.effects.wall.sandbox as sandbox

    ws = tmp_path / "ws"
    (ws / "pad").mkdir(parents=True)
    (ws / "b").mkdir()
    monkeypatch.setattr(sandbox, "_GIT_SCAN_LIMIT", 40)
    monkeypatch.setattr(sandbox, "_UNDO_SCAN_LIMIT", 50)  # past the undo's own bound: fails closed, naming the roots
    r = sh(ws, "cd pad && for i in $(seq 60); do touch f$i; done && echo grown")
    assert r.code == 126 and "grown" in r.stdout, r.stderr
    assert "could not check what the program left for git" in r.stderr and str(ws) in r.stderr, r.stderr
    assert run_effect("rm -rf pad", EffectContext(policy=Policy.load(ws))).ok
    (ws / "pad").mkdir()
    monkeypatch.setattr(sandbox, "_UNDO_SCAN_LIMIT", 1000)
    # Padding past the limit kept a nested dal.toml out of the partial walk, and it stayed.
    # The undo walks on (up to _UNDO_SCAN_LIMIT): the policy file goes, whatever order the walk takes.
    r = sh(ws, "cd pad && for i in $(seq 60); do touch f$i; done && printf '[paths]\\nread = [\"/\"]\\n' "
               "> ../b/dal.toml && echo grown")
    assert r.code == 126 and "grown" in r.stdout, r.stderr
    assert "b/dal.toml (made inside the wall; removed)" in r.stderr and not (ws / "b" / "dal.toml").exists()
    assert "could not check" not in r.stderr
    r = sh(ws, "touch ../pwned")
    assert r.code == 126 and "the wall cannot be set up" in r.stderr and "more than 40 entries" in r.stderr
    assert not os.path.lexists(tmp_path / "pwned")
    r = run_effect("ls pad", EffectContext(policy=Policy.load(ws)))  # the default toolset still runs
    assert r.ok, r.stderr


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_a_gitfile_is_read_whole_as_git_reads_it(tmp_path: Path, git_alone: None) -> None:
    """git takes the whole `.git` file (trailing CR/LF stripped) as the path, so a second
    line leads through a folder named `w<newline>..` to a git directory the script made, while the first
    line alone names a worktree that leads back. The file must go, and the operator's git runs nothing."""
    ws = tmp_path / "ws"
    (ws / "wt").mkdir(parents=True)
    _repo_with_branch(ws)
    r = sh(ws, "mkdir -p .git/worktrees/w '.git/worktrees/w\n..' .git/worktrees/evil/objects .git/worktrees/evil/refs"
               " && echo ../.. > .git/worktrees/w/commondir && echo ref: refs/heads/main > .git/worktrees/w/HEAD"
               " && echo ref: refs/heads/main > .git/worktrees/evil/HEAD"
               f" && printf '[core]\\n\\tbare = false\\n\\tworktree = {ws}/wt\\n\\tfsmonitor = "
               f"\"touch {tmp_path}/pwned; false\"\\n' > .git/worktrees/evil/config"
               " && printf 'gitdir: ../.git/worktrees/w\\n../../evil\\n' > wt/.git")
    assert r.code == 126 and "wt/.git" in r.stderr, r.stderr
    assert not os.path.lexists(ws / "wt" / ".git")
    subprocess.run(["git", "status"], cwd=ws / "wt", capture_output=True, timeout=30)
    assert not os.path.lexists(tmp_path / "pwned")


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_an_existing_gitfile_rewritten_inside_the_wall_is_put_back(tmp_path: Path, git_alone: None) -> None:
    """A submodule's `.git` file rewritten to point at a git directory the script made
    (inside WS/.git, or a nested `.git` folder) is written back as it was; the operator's git runs nothing."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    _repo_with_branch(ws)
    (ws / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    r = sh(ws, "mkdir -p .git/evil/objects .git/evil/refs && echo ref: refs/heads/main > .git/evil/HEAD && "
               f"printf '[core]\\n\\tbare = false\\n\\tworktree = {ws}/sub\\n\\tfsmonitor = \"touch {tmp_path}/pwned;"
               " false\"\\n' > .git/evil/config && printf 'gitdir: ../.git/evil\\n' > sub/.git")
    assert r.code == 126 and "sub/.git" in r.stderr and "put back" in r.stderr, r.stderr
    assert (ws / "sub" / ".git").read_text() == "gitdir: ../.git/modules/sub\n"
    subprocess.run(["git", "status"], cwd=ws / "sub", capture_output=True, timeout=30)
    assert not os.path.lexists(tmp_path / "pwned")


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_a_forged_index_is_put_back_and_a_real_one_is_kept(tmp_path: Path, git_alone: None) -> None:
    """An index entry swapped to another object for the tracked dal.toml (or one
    with a `.git` component) would make the operator's `git checkout -- .` write it; the index from before
    the pipeline is put back. `git add` and `git commit` of a tracked, changed dal.toml are untouched."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "dal.toml").write_text("[run]\n")
    _repo_with_branch(ws)
    subprocess.run(["git", "add", "dal.toml"], cwd=ws, check=True)
    subprocess.run(["git", "commit", "-qm", "policy"], cwd=ws, check=True)
    (ws / "dal.toml").write_text("[run]\n# the operator's edit\n")
    policy = Policy.load(ws, allow_run=["sh", "git"])
    r = sh(ws, "git add -A && git commit -qm ok && echo committed", policy=policy)
    assert r.ok and "committed" in r.stdout and "index" not in r.stderr, r.stderr
    r = sh(ws, "printf '[run]\\nallow = [\"sh\"]\\n' > p && B=$(git hash-object -w p) && rm p && "
               "git update-index --cacheinfo 100644,$B,dal.toml", policy=policy)
    assert r.code == 126 and ".git/index (forged, an entry for dal.toml" in r.stderr, r.stderr
    subprocess.run(["git", "checkout", "--", "."], cwd=ws, capture_output=True, timeout=30)
    assert "sh" not in (ws / "dal.toml").read_text()


# --- protected names anywhere, `.git` read-only (issue 12, secwall) -------------------------------------


def _real_repo(ws: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent), "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@e",
           "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@e"}
    (ws / "notes.txt").write_text("notes\n")
    for cmd in ("git init -q -b main .", "git config user.name a", "git config user.email a@e", "git add notes.txt",
                "git commit -q -m one"):
        subprocess.run(cmd.split(), cwd=ws, check=True, env=env, capture_output=True)


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_sh_cannot_write_anything_of_git(tmp_path: Path) -> None:
    """With a program other than git in the pipeline, `.git` is read-only as a whole: no loose object, pack,
    ref, HEAD or index, however written -- and git run from sh cannot write either."""
    ws = tmp_path / "ws"
    ws.mkdir()
    _real_repo(ws)
    before = snapshot(ws / ".git")
    attempts = ["echo x > .git/objects/zz", "mkdir -p .git/objects/ab", "printf x > .git/objects/pack/pack-0.pack",
                "git rev-parse HEAD > .git/refs/heads/evil", "echo > .git/packed-refs", "echo ref: x > .git/HEAD",
                "printf DIRC > .git/index", "echo evil | git hash-object -w --stdin",
                "git commit -q --allow-empty -m x", "mv .git/objects .git/o", "rm -rf .git/refs"]
    r = sh(ws, " ; ".join(f"{{ {a}; }} 2>/dev/null || echo refused" for a in attempts) + " ; echo end")
    assert r.stdout.count("refused") == len(attempts), r.stdout
    assert snapshot(ws / ".git") == before


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_git_alone_still_adds_and_commits(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _real_repo(ws)
    policy = Policy.load(ws, allow_run=["git", "sh"])
    (ws / "notes.txt").write_text("changed\n")
    r = run_effect("git add notes.txt && git commit -q -m two && git log --oneline | wc -l",
                   EffectContext(policy=policy))
    assert r.ok and r.stdout.strip() == "2", r.stderr
    r = run_effect("git status --porcelain | sort", EffectContext(policy=policy))  # git and the default toolset
    assert r.ok, r.stderr


@walled
def test_a_policy_file_or_store_made_in_a_subfolder_is_removed_and_the_command_fails(tmp_path: Path) -> None:
    """A later `cd sub && dal run` would take sub/dal.toml as its policy and sub/.dal as its store."""
    ws = tmp_path / "ws"
    (ws / "sub" / "deep").mkdir(parents=True)
    r = sh(ws, "printf '[run]\\nallow = [\"sh\"]\\n' > sub/dal.toml && mkdir -p sub/deep/.dal && "
               "echo forged > sub/deep/.dal/dal.db && mkdir sub/deep/dal.toml && echo written")
    assert "written" in r.stdout and r.code == 126, r
    for rel in ("sub/dal.toml", "sub/deep/.dal", "sub/deep/dal.toml"):
        assert rel in r.stderr and not os.path.lexists(ws / rel), (rel, r.stderr)
    assert "undid what a program did to protected names" in r.stderr
    ok = sh(ws, "echo fine > sub/notes.txt && cat sub/notes.txt")  # everything else stays
    assert ok.ok and ok.stdout == "fine\n"


@walled
@pytest.mark.skipif(not shutil.which("git"), reason="git not installed")
def test_existing_nested_policy_files_stores_and_repositories_are_read_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "app" / ".dal").mkdir(parents=True)
    (ws / "app" / "dal.toml").write_text("[run]\n")
    (ws / "app" / ".dal" / "dal.db").write_text("the app's journal\n")
    (ws / "vendor" / "lib").mkdir(parents=True)
    _real_repo(ws / "vendor" / "lib")
    before = snapshot(ws)
    attempts = ["echo x >> app/dal.toml", "rm -f app/dal.toml", "mv app app2", "mv app/dal.toml app/x",
                "touch app/.dal/x", "cat app/.dal/dal.db", "echo x >> vendor/lib/.git/config",
                "mkdir vendor/lib/.git/hooks/x", "echo x > vendor/lib/.git/objects/zz", "mv vendor/lib vendor/l2"]
    r = sh(ws, " ; ".join(f"{{ {a}; }} 2>/dev/null || echo refused" for a in attempts) + " ; echo end")
    assert r.stdout.count("refused") == len(attempts), r.stdout
    assert "journal" not in r.stdout
    assert snapshot(ws) == before


@walled
def test_too_many_nested_policy_files_refuse_the_wall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dal.effects.wall.sandbox as sandbox

    ws = tmp_path / "ws"
    for i in range(5):
        (ws / f"p{i}").mkdir(parents=True)
        (ws / f"p{i}" / "dal.toml").write_text("[run]\n")
    monkeypatch.setattr(sandbox, "_NESTED_LIMIT", 3)
    r = sh(ws, "touch ../pwned")
    assert r.code == 126 and "the wall cannot be set up" in r.stderr and "more than 3 policy files" in r.stderr
    assert not os.path.lexists(tmp_path / "pwned")
    assert run_effect("ls p0", EffectContext(policy=Policy.load(ws))).ok  # the default toolset still runs


@walled
def test_a_protected_path_that_did_not_exist_is_held_while_the_pipeline_runs(tmp_path: Path) -> None:
    """`[paths] protect` names it, the check denies writing it; an interpreter cannot make it inside the wall
    either: while the pipeline runs it is an empty read-only folder, removed after it. Before, it could be
    made and used meanwhile, and was only removed afterwards."""
    ws = tmp_path / "ws"
    (ws / ".config").mkdir(parents=True)
    (ws / "dal.toml").write_text('[run]\nallow = ["sh"]\n[paths]\nprotect = ["Makefile", "secrets/"]\n')
    r = sh(ws, "echo 'all:; touch pwned' > Makefile; mkdir -p secrets; echo k > secrets/k; "
               "printf '[user]\\n' > .gitconfig; mkdir -p .config/git; touch .config/git/config; "
               "test -f Makefile || test -f .gitconfig || test -e secrets/k || test -e .config/git/config || echo held",
           policy=Policy.load(ws))
    assert r.stdout == "held\n", r
    assert "Read-only file system" in r.stderr and "Is a directory" in r.stderr, r.stderr
    for rel in ("Makefile", "secrets", ".gitconfig", ".config/git"):
        assert not os.path.lexists(ws / rel), (rel, r.stderr)  # the placeholders are gone too
    assert (ws / ".config").is_dir()


@walled
def test_a_protected_path_whose_folder_is_missing_is_removed_after_the_pipeline(tmp_path: Path) -> None:
    """Not held (its folder does not exist: a placeholder would need one made): made inside the wall, it is
    removed after the pipeline, and the command fails naming it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "dal.toml").write_text('[run]\nallow = ["sh"]\n[paths]\nprotect = ["build/Makefile"]\n')
    r = sh(ws, "mkdir -p build && echo 'all:; touch pwned' > build/Makefile && echo made", policy=Policy.load(ws))
    assert "made" in r.stdout and r.code == 126, r
    assert not os.path.lexists(ws / "build" / "Makefile") and "build/Makefile" in r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to another user in a child: needs root")
def test_a_folder_made_unlistable_does_not_hide_a_policy_file_from_the_walk(tmp_path: Path) -> None:
    """As an operator who is not root, a script's `chmod 311 sub` after writing `sub/dal.toml` kept the walk
    out (the file is still reachable by name: `cd sub && dal run` reads it). The walk, run as that user,
    gives the folder its owner's rwx back and finds it; a folder it cannot list is a walk that fails closed."""
    import tempfile

    import dal.effects.wall.sandbox as sandbox

    top = Path(tempfile.mkdtemp(prefix="dal-unlistable-", dir="/var/tmp"))  # pytest's tmp_path: root's 0700
    ws = top / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "dal.toml").write_text("[run]\n")
    (ws / "other").mkdir(mode=0o700)
    for p in (top, ws, ws / "sub", ws / "sub" / "dal.toml"):
        os.chown(p, 65534, 65534)
    os.chmod(ws / "sub", 0o311)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the operator's user, walking as the wall does
        try:
            os.close(read)
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            found, complete = sandbox._git_marks([str(ws / "sub")])
            also = sandbox._git_marks([str(ws)])[1]  # `other` is root's and not listable by this user
            os.write(write, repr((sorted(found), complete, also)).encode())
        finally:
            os._exit(0)
    os.close(write)
    out = os.read(read, 65536).decode()
    os.waitpid(pid, 0)
    found, complete, also = eval(out)  # noqa: S307 -- our own child's repr of plain values
    assert found == [str(ws / "sub" / "dal.toml")] and complete, out
    assert stat.S_IMODE(os.stat(ws / "sub").st_mode) & 0o700 == 0o700
    shutil.rmtree(top, ignore_errors=True)
    assert also is False  # fail closed: the wall is refused, or the command fails, rather than half checked


@walled
def test_a_nested_policy_file_below_a_name_that_is_not_utf8_is_undone_without_an_internal_error(
        tmp_path: Path) -> None:
    """The undo's message named `bad\\xff/dal.toml`, and encoding it raised: the run ended
    with an internal error and the effect's result was not journaled."""
    ws = tmp_path / "ws"
    ws.mkdir()
    r = sh(ws, 'd=$(printf "bad\\377"); mkdir "$d" && echo "[run]" > "$d/dal.toml" && echo made')
    assert r.code == 126 and "made" in r.stdout, r
    assert "dal.toml (made inside the wall; removed)" in r.stderr
    assert os.listdir(ws / os.fsdecode(b"bad\xff")) == []
