"""The Landlock wall (dal/effects/wall/landlock_wall.py): the rules it renders, read without spawning, and
commands run through run() under it (DAL_WALL=landlock), attacked next to canaries."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from effects_workspace import CANARY, build_workspace

from dal.effects import EffectContext, Policy, run_effect
from dal.effects.exec.running import wall_in_force
from dal.effects.result import EffectResult
from dal.effects.wall import landlock, landlock_wall
from dal.effects.wall.landlock_wall import RO, RW, Mount, Rules, mounts_of, render

landlocked = pytest.mark.skipif(landlock_wall.missing() is not None, reason=f"{landlock_wall.missing()}")
LIST = landlock.READ_DIR


def granted(mounts: list[Mount], descend: bool = True) -> dict[str, int]:
    return dict(render(mounts, Rules(), descend).granted)


def test_a_hidden_folder_in_a_write_root_is_reached_entry_by_entry(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for d in ("ws/.dal", "ws/src", "ws/.git"):
        (tmp_path / d).mkdir(parents=True)
    (ws / "notes.txt").write_text("n")
    os.symlink("/etc", ws / "link")
    rules = granted([Mount(str(ws), RW), Mount(str(ws / ".dal"), None)])
    # the workspace lists only (its names, .dal's among them); each other entry has the root's rights
    assert rules == {str(ws): LIST, str(ws / "src"): RW, str(ws / ".git"): RW,
                     str(ws / "notes.txt"): RW & landlock.FILE_RIGHTS}
    # without descending (the default toolset's pipelines) the root is granted whole
    assert granted([Mount(str(ws), RW), Mount(str(ws / ".dal"), None)], descend=False) == {str(ws): RW}


def test_a_read_only_file_in_a_write_root_and_a_write_root_in_a_read_root(tmp_path: Path) -> None:
    (tmp_path / "ws" / "out").mkdir(parents=True)
    (tmp_path / "ws" / "dal.toml").write_text("")
    ws = tmp_path / "ws"
    # the folder around the read-only file reads (so the file needs no rule); its other entries write
    assert granted([Mount(str(ws), RW), Mount(str(ws / "dal.toml"), RO)]) == {str(ws): RO, str(ws / "out"): RW}
    assert granted([Mount(str(ws), RO), Mount(str(ws / "out"), RW)]) == {str(ws): RO, str(ws / "out"): RW}


def test_the_kernel_s_folders_are_carved_out_of_a_read_root_of_everything() -> None:
    rules = granted([Mount("/", RO)], descend=False)
    assert rules["/"] == LIST and rules["/usr"] == RO and rules["/etc"] == RO
    assert not {"/proc", "/sys", "/dev"} & set(rules)


def test_the_plan_becomes_mounts_in_bubblewrap_s_order(ws: Path) -> None:
    from dal.effects.wall.limits import CommandLimits
    from dal.effects.wall.sandbox import plan_of

    policy = Policy.load(ws, allow_run=["sh"], allow_read=["/opt"])
    plan = plan_of(policy, ["/bin/sh"], CommandLimits.of(policy, 10), True, True)
    got = [(m.path, m.rights) for m in mounts_of(plan)]
    assert ("/usr", RO) in got and ("/opt", RO) in got
    at = {p: i for i, (p, _) in enumerate(got)}
    assert at[str(ws)] < at[str(ws / "dal.toml")] < at[str(ws / ".dal")]  # the placeholder, then hidden
    assert dict(got)[str(ws / ".git")] == RO and got[at[str(ws / ".dal")]] == (str(ws / ".dal"), None)


def test_the_filter_refuses_sockets_offline_and_ipc_always() -> None:
    from test_seccomp_filter import ARCH, run_filter

    for machine, nrs in landlock_wall.REFUSED.items():
        offline, online = landlock_wall.program(machine, False, True), landlock_wall.program(machine, True, True)
        user = landlock_wall.program(machine, True)
        by_name, by_fd = landlock_wall.BY_NAME[machine].values(), landlock_wall.BY_DESCRIPTOR[machine].values()
        assert {run_filter(user, nr, ARCH[machine]) for nr in by_name} == {"EPERM"}  # chmod by name: any user
        assert {run_filter(user, nr, ARCH[machine]) for nr in by_fd} == {"allow"}  # fchmod: not root
        sock = landlock_wall.SOCKET[machine]
        assert run_filter(offline, sock, ARCH[machine]) == "EACCES"
        assert run_filter(online, sock, ARCH[machine]) == "allow"
        for nr in (*nrs.values(), *by_name, *by_fd):
            assert run_filter(online, nr, ARCH[machine]) == "EPERM"
        assert run_filter(offline, 0, ARCH[machine]) == run_filter(offline, 63, ARCH[machine]) == "allow"
        other = {"x86_64": ARCH["aarch64"], "aarch64": ARCH["x86_64"]}[machine]
        assert run_filter(online, landlock_wall.BY_DESCRIPTOR[machine]["fchmod"], other) == "allow"  # setuid's
        utimensat = landlock_wall.UTIMENSAT[machine]
        for code in (online, user):
            assert run_filter(code, utimensat, ARCH[machine], (3, 0, 0x7FFF0000, 0)) == "allow"  # futimens
            for name in (0x7FFF0000, 0x5500000000, 1):
                assert run_filter(code, utimensat, ARCH[machine], (-100 & 0xFFFFFFFF, name, 0, 0)) == "EPERM"


# --- executed, through run() ----------------------------------------------------------------------------------


@pytest.fixture()
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DAL_WALL", "landlock")
    monkeypatch.setenv("DAL_TEST_SECRET", "dal-landlock-secret-4b1e")
    workspace, outside = build_workspace(tmp_path)
    (outside / "secret.txt").write_text(SECRET)  # the canary has hard links in the workspace: this one none
    (outside / "secret.txt").chmod(0o644)
    return workspace


def sh(ws: Path, script: str, **kw: object) -> EffectResult:
    policy = Policy.load(ws, allow_run=["sh"])
    return run_effect("sh -c " + shlex.quote(script), EffectContext(policy=policy, **kw))  # type: ignore[arg-type]


SECRET = "outside secret: never read\n"


def canary_intact(ws: Path) -> None:
    assert (ws.parent / "outside" / "canary.txt").read_text() == CANARY
    assert (ws.parent / "outside" / "secret.txt").read_text() == SECRET
    st = (ws.parent / "outside" / "secret.txt").stat()
    assert st.st_mode & 0o777 == 0o644 and st.st_mtime > 1e9 + 3e8  # its mode and times too (not 2001)
    assert st.st_gid == os.getegid() and not os.listxattr(ws.parent / "outside" / "secret.txt")
    assert sorted(os.listdir(ws.parent / "outside")) == ["canary.txt", "secret.txt"]


@landlocked
def test_the_wall_in_force_is_landlock(ws: Path) -> None:
    how = wall_in_force(EffectContext(policy=Policy.load(ws)))
    assert how["wall"] == "landlock" and how["refused"] is None and "Landlock ABI" in how["reason"]


def test_an_unknown_wall_kind_refuses_every_command(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAL_WALL", "landlocked")
    r = run_effect("cat notes.txt", EffectContext(policy=Policy.load(ws)))
    assert r.status == "denied" and "DAL_WALL names no wall kind" in r.decision.reason


@landlocked
def test_sh_reads_and_writes_the_workspace_and_nothing_else(ws: Path) -> None:
    r = sh(ws, "cat notes.txt docs/a.md; echo new > docs/b.md; cat docs/b.md; mkdir sub/x && echo y > sub/x/y; "
               "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"; echo h > \"$HOME/h\" && cat \"$HOME/h\"")
    assert r.ok, r.stderr
    assert r.stdout == "beta\nalpha\nbeta\nTODO: gamma\n# A\nTODO one\nnew\nt\nh\n"
    assert (ws / "sub" / "x" / "y").read_text() == "y\n"
    canary_intact(ws)


ATTACKS = [
    "cat ../outside/secret.txt", "cat link_out/secret.txt", "cp link_out/secret.txt docs/", "cat /etc/shadow",
    "ln -s ../outside/secret.txt docs/s && cat docs/s", "echo x > file_link_out",
    "echo x > hard_canary", "echo x > dangling", "cp notes.txt ../outside/", "ln notes.txt ../outside/h",
    "cat .dal/dal.db", "cp .dal/dal.db docs/", "ln .dal/dal.db docs/db", "mv .dal gone", "rm -rf .dal",
    "echo 'allow = [\"sh\"]' > dal.toml", "rmdir dal.toml", "echo x > .git/config", "mkdir .git/hooks/x",
    "echo x > new.md", "cat /proc/1/environ", "ls /proc", "echo x > /tmp/dal-landlock-x",
    "cat /etc/passwd", "echo x > /dev/tcp/127.0.0.1/80",
    "chmod 666 ../outside/secret.txt", "touch -d 2001-01-01 ../outside/secret.txt",
    "chown :0 ../outside/secret.txt", "touch -h -d 2001-01-01 ../outside/secret.txt",
    "python3 -c 'import os; os.utime(\"../outside/secret.txt\", (1, 1))'",
    "setfattr -n user.x -v 1 ../outside/secret.txt 2>/dev/null || python3 -c 'import os; "
    "os.setxattr(\"../outside/secret.txt\", \"user.x\", b\"1\")'",
]


@landlocked
def test_a_file_in_a_system_read_root_keeps_its_mode(ws: Path) -> None:
    # A file of the test's own in /etc (a read root of every wall), so that a wall that failed changes the
    # mode of this file, never the host's /etc/hosts.
    import tempfile

    fd, name = tempfile.mkstemp(prefix="dal-landlock-mode-", dir="/etc") if os.access("/etc", os.W_OK) else (-1, "")
    if fd < 0:
        pytest.skip("/etc is not writable here: no file of the test's own can be put in a system read root")
    os.close(fd)
    try:
        os.chmod(name, 0o644)
        r = sh(ws, f"chmod 600 {name} && echo ESCAPED")
        assert "ESCAPED" not in r.stdout and os.stat(name).st_mode & 0o777 == 0o644, (r.stdout, r.stderr)
    finally:
        os.unlink(name)


@landlocked
@pytest.mark.parametrize("attack", ATTACKS)
def test_the_wall_holds_when_sh_attacks(ws: Path, attack: str) -> None:
    before = (ws / ".dal" / "dal.db").read_bytes()
    r = sh(ws, attack + " && echo ESCAPED")
    assert "ESCAPED" not in r.stdout and "secret" not in r.stdout, (attack, r.stdout, r.stderr)
    assert "SQLite" not in r.stdout
    canary_intact(ws)
    assert (ws / ".dal" / "dal.db").read_bytes() == before
    assert not (ws / "dal.toml").is_file() and not (ws / "new.md").exists()
    assert (ws / ".git" / "config").read_text() == "[core]\n\trepositoryformatversion = 0\n"
    assert not os.path.exists("/tmp/dal-landlock-x")


@landlocked
def test_no_network_no_ipc_no_signal_out(ws: Path) -> None:
    decoy = subprocess.Popen(["sleep", "60"])
    try:
        r = sh(ws, f"kill -TERM {decoy.pid} || echo unkillable; kill -TERM $PPID || echo parent-unkillable; "
                   "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)' 2>/dev/null "
                   "|| echo no-udp; python3 -c 'import socket; socket.socket(socket.AF_UNIX)' 2>/dev/null "
                   "|| echo no-unix; python3 -c 'import socket; socket.socketpair()' && echo pair")
        assert decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()
    assert r.stdout == "unkillable\nparent-unkillable\nno-udp\nno-unix\npair\n", r.stderr


@landlocked
def test_the_default_toolset_alone_keeps_the_workspace_top(ws: Path) -> None:
    r = run_effect("touch report.md", EffectContext(policy=Policy.load(ws)))
    assert r.ok, r.stderr
    assert (ws / "report.md").exists()
    assert run_effect("cat ../outside/canary.txt", EffectContext(policy=Policy.load(ws))).status == "denied"


@landlocked
def test_a_command_denied_for_lack_of_a_wall_runs_under_landlock(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dal.effects.wall import kind

    monkeypatch.delenv("DAL_WALL")  # the kind in force is chosen, not named
    monkeypatch.setitem(kind.PROBES, "bubblewrap", lambda: (False, "bubblewrap cannot make a user namespace (test)"))
    monkeypatch.setitem(kind.PROBES, "landlock", lambda: (False, "no Landlock (test)"))
    ctx = EffectContext(policy=Policy.load(ws, allow_run=["sh"]), unsandboxed_as_root=True, timeout=20)
    command = "sh -c 'mkdir sub/made && echo ran > sub/made/it'"
    denied = run_effect(command, ctx)
    assert denied.status == "denied" and "sh runs only inside a wall" in denied.decision.reason
    assert not (ws / "sub" / "made").exists()
    monkeypatch.setitem(kind.PROBES, "landlock", kind.landlock_status)  # the kernel's Landlock, as it is
    assert wall_in_force(ctx)["wall"] == "landlock"
    ran = run_effect(command, ctx)
    assert ran.ok, ran.stderr
    assert (ws / "sub" / "made" / "it").read_text() == "ran\n"


def lingering(marker: str) -> list[str]:
    """Processes whose command line holds `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


@landlocked
def test_nothing_of_a_stage_outlives_it(ws: Path) -> None:
    # A background process, one in a session of its own, and an attempt on the stage's init: the command
    # still ends when sh does (nothing holds its output open), and leaves no process behind.
    r = sh(ws, "setsid sleep 31.41 & sleep 31.42 & (sleep 31.43 &) ; echo started; kill -9 $PPID || echo kept",
           timeout=20)
    assert r.ok and r.stdout == "started\nkept\n", r.stderr
    assert r.duration_ms < 10_000
    assert lingering("31.4") == []
    assert sh(ws, "exit 3").code == 3 and sh(ws, "kill -TERM $$").code == 143


@landlocked
def test_a_timeout_leaves_nothing_behind(ws: Path) -> None:
    r = sh(ws, "setsid sleep 32.71 & exec sleep 32.72", timeout=1)
    assert r.status == "timeout"
    assert lingering("32.7") == []


@landlocked
def test_what_the_default_toolset_must_not_write_is_put_back(ws: Path) -> None:
    from unittest import mock

    from test_hostile_corpus import _bypass

    from dal.effects import execute_checked
    from dal.effects.exec import executor

    (ws / "dal.toml").write_text("[run]\ndefaults = true\n")
    (ws / ".git" / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    policy = Policy.load(ws)
    command = "sort -o dal.toml notes.txt && cp notes.txt .git/hooks/pre-commit && rm .git/hooks/pre-commit.sample"
    import attrs

    # the check bypassed: the wall alone. A command whose writes land at the workspace's top gets the roots
    # whole, so its protected paths are put back; one whose declared writes do not is carved as for sh.
    decision = attrs.evolve(_bypass(command, policy), writes=("dal.toml", ".git/hooks/pre-commit"))
    with mock.patch.object(executor, "recheck", lambda c, p: None):
        carved = execute_checked(command, _bypass(command, policy), EffectContext(policy=policy))
        assert carved.code != 0 and "Permission denied" in carved.stderr
        assert (ws / "dal.toml").read_text() == "[run]\ndefaults = true\n"
        r = execute_checked(command, decision, EffectContext(policy=policy))
    assert r.code == 126 and "undid what a program did to protected names" in r.stderr
    assert "dal.toml (changed inside the wall; put back as it was)" in r.stderr
    assert (ws / "dal.toml").read_text() == "[run]\ndefaults = true\n"
    assert sorted(os.listdir(ws / ".git" / "hooks")) == ["pre-commit.sample"]


@landlocked
def test_a_killed_dal_s_record_puts_back_what_was_kept(ws: Path) -> None:
    from dal.effects.wall.landlock_wall import LandlockWall
    from dal.effects.wall.limits import CommandLimits

    (ws / "dal.toml").write_text("# kept\n")
    policy = Policy.load(ws)
    wall = LandlockWall(policy, [], 1 << 20, False, True, limits=CommandLimits.of(policy, 10))
    state = wall.state()
    assert state is not None and state["kind"] == "landlock" and str(ws / "dal.toml") in state["kept"]
    (ws / "dal.toml").write_text("# changed\n")
    wall._kept = {}  # as if DAL were killed here: only the record knows
    wall.close()
    again = LandlockWall.from_state(policy, state)
    again.close()
    assert (ws / "dal.toml").read_text() == "# kept\n" and "dal.toml" in " ".join(again.undone)


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from dal.receipts.store import Store

    monkeypatch.setenv("DAL_WALL", "landlock")
    ws = tmp_path / "repo"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "notes.txt").write_text("hi\n")
    Store(ws / ".dal" / "dal.db").close()
    return ws


@landlocked
def test_git_writes_its_repository_under_landlock(repo: Path) -> None:
    policy = Policy.load(repo, allow_run=["git"])
    for command in ("git add -A", "git checkout -q -b feature", "git status --short --branch"):
        r = run_effect(command, EffectContext(policy=policy))
        assert r.ok, (command, r.stderr)
    assert r.stdout == "## No commits yet on feature\nA  notes.txt\n"  # the store's .gitignore is read


@landlocked
def test_what_git_must_not_change_in_its_repository_is_put_back(repo: Path) -> None:
    from unittest import mock

    from test_hostile_corpus import _bypass

    from dal.effects import execute_checked
    from dal.effects.exec import executor

    config = (repo / ".git" / "config").read_text()
    hooks = sorted(os.listdir(repo / ".git" / "hooks"))
    policy = Policy.load(repo, allow_run=["git"])
    command = "git config core.fsmonitor 'touch pwned'"
    with mock.patch.object(executor, "recheck", lambda c, p: None):  # the check bypassed: the wall alone
        r = execute_checked(command, _bypass(command, policy), EffectContext(policy=policy))
    # put back, or the chmod of its lock file by name is refused first (landlock_wall.BY_NAME)
    assert r.code == 126 and ".git/config (changed inside the wall; put back as it was)" in r.stderr or \
        r.code != 0 and "chmod on" in r.stderr
    assert (repo / ".git" / "config").read_text() == config
    assert sorted(os.listdir(repo / ".git" / "hooks")) == hooks


def test_the_plan_printed_for_landlock_says_how_landlock_holds_it(ws: Path) -> None:
    import attrs

    from dal.effects.wall.limits import CommandLimits
    from dal.effects.wall.sandbox import plan_of

    policy = Policy.load(ws, allow_run=["sh"])
    plan = attrs.evolve(plan_of(policy, ["/bin/sh"], CommandLimits.of(policy, 10), True, False), kind="landlock")
    lines = plan.describe()
    assert lines[0] == "wall:         landlock"
    assert "network:      off (no socket(2); TCP bind and connect refused)" in lines
    assert "identity:     /etc/passwd and /etc/group refused" in lines
    put_back = next(line for line in lines if line.startswith("put back:"))
    assert str(ws / ".git" / "config") in put_back  # git writes beside it: copied and put back
    read_only = next(line for line in lines if line.startswith("read-only:"))
    assert str(ws / "dal.toml") in read_only and ".git/" not in read_only


@landlocked
def test_the_default_toolset_reading_is_carved_as_other_programs_are(ws: Path) -> None:
    from unittest import mock

    from test_hostile_corpus import _bypass

    from dal.effects import execute_checked
    from dal.effects.exec import executor

    policy = Policy.load(ws)
    with mock.patch.object(executor, "recheck", lambda c, p: None):  # the check bypassed: the wall alone
        for command in ("cat .dal/dal.db", "head -c 16 .dal/dal.db", "cat notes.txt ../outside/secret.txt"):
            r = execute_checked(command, _bypass(command, policy), EffectContext(policy=policy))
            assert "SQLite" not in r.stdout and "secret" not in r.stdout and "Permission denied" in r.stderr
    assert run_effect("cat notes.txt", EffectContext(policy=policy)).stdout.startswith("beta\n")


@landlocked
def test_the_main_example_runs_under_landlock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dal

    monkeypatch.setenv("DAL_WALL", "landlock")
    source = (Path(__file__).parents[2] / "examples" / "article_loop.dal").read_text()
    r = dal.run(source, workspace=tmp_path)  # its mkdir -p makes a folder at the workspace's top
    assert "verified after 2 attempts" in r.output, r.output
    assert r.to_dict()["sandbox"]["wall"] == "landlock"
    assert (tmp_path / "COO-FILESYSTEM" / "articles" / "drafts" / "example.md").is_file()


@landlocked
@pytest.mark.skipif(os.geteuid() != 0, reason="root only")
def test_programs_keep_no_capability_even_as_root(ws: Path) -> None:
    r = sh(ws, "chown 65534 notes.txt || echo no-chown; mount -t tmpfs none sub 2>/dev/null || echo no-mount; "
               "cat /etc/shadow 2>/dev/null || echo no-shadow", unsandboxed_as_root=False)
    assert r.stdout == "no-chown\nno-mount\nno-shadow\n", r.stderr
    assert (ws / "notes.txt").stat().st_uid == 0 and not os.path.ismount(ws / "sub")


@landlocked
def test_a_killed_dal_s_temporary_folders_go_at_the_next_wall(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from dal.core import liveness
    from dal.effects.wall.landlock_wall import LandlockWall, _tmp_prefix
    from dal.effects.wall.limits import CommandLimits

    gone = subprocess.Popen(["true"])
    gone.wait()
    top = Path(tempfile.gettempdir())
    left = top / f"{_tmp_prefix()}{gone.pid}-1-abc"  # a DAL process that is no more
    live = top / f"{_tmp_prefix()}{os.getpid()}-{liveness.start_time(os.getpid())}-abc"  # this one's
    for folder in (left, live):
        (folder / "home").mkdir(parents=True)
    try:
        monkeypatch.setattr(landlock_wall, "_swept", False)
        policy = Policy.load(ws)
        with LandlockWall(policy, [], 1 << 20, False, True, limits=CommandLimits.of(policy, 10)) as wall:
            made = wall.tmpdir
            assert made is not None and os.path.basename(made).startswith(_tmp_prefix())
        assert not left.exists() and live.is_dir() and not os.path.exists(made)
    finally:
        for folder in (left, live):
            shutil.rmtree(folder, ignore_errors=True)


def test_a_path_of_the_plan_swapped_for_a_symlink_refuses_the_wall(tmp_path: Path) -> None:
    from dal.effects.wall.sandbox import WallRefused

    (tmp_path / "real" / "x").mkdir(parents=True)
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(WallRefused, match="symbolic link"):
        granted([Mount(str(tmp_path / "link" / "x"), RO)])
    assert granted([Mount(str(tmp_path / "real" / "x"), RO)]) == {str(tmp_path / "real" / "x"): RO}


NOBODY = 65534
BY_NAME_ATTACKS = [
    "chmod 666 ../outside/secret.txt", "touch -d 2001-01-01 ../outside/secret.txt",
    "python3 -c 'import os; os.utime(\"../outside/secret.txt\", (1, 1))'",
    "python3 -c 'import os; os.setxattr(\"../outside/secret.txt\", \"user.x\", b\"1\")'",
]


@landlocked
@pytest.mark.skipif(os.geteuid() != 0, reason="becoming an ordinary user needs root (run as one, ATTACKS are it)")
def test_an_ordinary_user_s_program_cannot_change_that_user_s_files_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import tempfile

    monkeypatch.setenv("DAL_WALL", "landlock")
    base = Path(tempfile.mkdtemp(prefix="dal-modes-"))  # not under pytest's root-only folder: the user walks it
    try:
        ws, outside = build_workspace(base)
        (outside / "secret.txt").write_text(SECRET)
        (outside / "secret.txt").chmod(0o644)
        for path in [base, *base.rglob("*")]:
            os.lchown(path, NOBODY, NOBODY)  # every file the user's own: without the wall each attack works
        assert sh(ws, "true").ok  # the wall's modules loaded before this process stops being root
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child becomes the ordinary user and runs the attacks behind the wall
            try:
                os.close(read)
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                got = [sh(ws, a + " && echo ESCAPED").stdout for a in BY_NAME_ATTACKS]
                got.append(sh(ws, "touch -d 2001-01-01 docs/a.md && cp -p notes.txt docs/n && echo fd-ok").stdout)
                os.write(write, json.dumps(got).encode())
            except BaseException as e:  # shown by the assertion below, not lost with the child
                os.write(write, json.dumps([repr(e)]).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as f:
            text = f.read()
        os.waitpid(pid, 0)
        assert json.loads(text) == [""] * len(BY_NAME_ATTACKS) + ["fd-ok\n"], text
        st = (outside / "secret.txt").stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (NOBODY, NOBODY, 0o644) and st.st_mtime > 1.3e9
        assert not os.listxattr(outside / "secret.txt") and (ws / "docs" / "n").is_file()
        assert (ws / "docs" / "a.md").stat().st_mtime < 1e9 + 3e8  # futimens: inside, the user's touch works
    finally:
        shutil.rmtree(base, ignore_errors=True)


@landlocked
def test_the_text_receipt_names_the_landlock_wall_that_held_each_command(ws: Path) -> None:
    import dal

    r = dal.run('print(run("cat notes.txt").status)\nprint(run("echo hi").status)\n', workspace=ws)
    assert r.output.split() == ["completed", "completed"]
    assert [e["wall"] for e in r.to_dict()["effects"]["items"]] == ["landlock", "landlock"]
    text = r.to_markdown()
    assert "2 commands inside the landlock wall" in text and "Landlock ABI" in text
