"""The wall as data (dal/effects/wall/plan.py): plans read without spawning anything, the plan a real wall is
built from equals the one `dal policy check --wall` prints, and bubblewrap's command line follows the plan in
the order that keeps each carve-out on top of the root it is cut from."""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs
import pytest

from dal.cli.main import main
from dal.effects import Policy, check_command
from dal.effects.exec.executor import wall_plans
from dal.effects.wall import bwrap
from dal.effects.wall.limits import CommandLimits
from dal.effects.wall.plan import WallPlan
from dal.effects.wall.sandbox import Wall, plan_of

LIMITS = CommandLimits(processes=64, file_size=1 << 20, memory=1 << 30, tmp_size=1 << 20, cpu_seconds=5)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = (tmp_path / "ws").resolve()
    for d in ("src", ".git/objects", ".git/refs", "nested/deep"):
        (w / d).mkdir(parents=True)
    (w / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (w / "nested" / "deep" / "dal.toml").write_text("[run]\nallow = []\n")
    (w / "src" / "a.txt").write_text("a\n")
    return w


def test_a_dry_plan_is_the_plan_the_wall_is_built_from_and_makes_nothing(ws: Path) -> None:
    policy = Policy.load(ws, None, allow_run=["python3"], _skip_file=True)
    before = tree(ws)
    dry = plan_of(policy, ["/usr/bin/python3"], LIMITS, placeholders=True, lock_git=True)
    assert tree(ws) == before  # no placeholder made
    assert (str(ws / "dal.toml"), "folder") in dry.placeholders and str(ws / "dal.toml") in dry.protected
    assert str(ws / "nested" / "deep" / "dal.toml") in dry.protected and str(ws / ".git") in dry.protected
    with Wall(policy, ["/usr/bin/python3"], LIMITS.tmp_size, True, True, limits=LIMITS) as wall:
        assert wall.plan == dry
        assert (ws / "dal.toml").is_dir()  # made for the wall, as planned
    assert tree(ws) == before  # and gone with it


def test_a_write_root_not_there_yet_is_made_by_the_wall_not_by_the_plan(ws: Path) -> None:
    policy = Policy.load(ws, None, allow_write=["out"], _skip_file=True)
    dry = plan_of(policy, [], LIMITS, placeholders=False)
    assert dry.write == (str(ws / "out"),) and dry.make == (str(ws / "out"),) and str(ws) in dry.read
    assert not (ws / "out").exists()
    with Wall(policy, [], LIMITS.tmp_size, False, limits=LIMITS) as wall:
        assert wall.plan == dry
    assert (ws / "out").is_dir()


def test_the_default_toolset_gets_no_placeholders_and_the_network_is_off(ws: Path) -> None:
    policy = Policy.default(ws)
    plan = plan_of(policy, [], LIMITS, placeholders=False)
    assert plan.kind == "bubblewrap" and plan.write == (str(ws),) and not plan.network
    assert plan.placeholders == () and plan.make == ()
    assert dict(plan.env)["HOME"] == plan.home and dict(plan.env)["PATH"]
    head, tail = bwrap.view(plan)
    assert "--unshare-net" in tail
    net = plan_of(policy.evolve(allow_net=True), [], LIMITS, placeholders=False)
    assert net.network and "--unshare-net" not in bwrap.view(net)[1]
    if os.path.exists("/etc/resolv.conf"):
        assert "/etc/resolv.conf" in dict(net.system) and "/etc/resolv.conf" not in dict(plan.system)


def _plan(**changes: object) -> WallPlan:
    base = WallPlan(kind="bubblewrap", workspace="/w", network=False, read_all=False, system=(("/usr", "/usr"),),
                    links=(("/bin", "usr/bin"),), identity=True, home="/tmp/.dal-home", tmp_size=1024,
                    read=("/data",), write=("/w",), make=(), protected=("/w/a/b/dal.toml",), placeholders=(),
                    hidden=(("/w/.dal", "folder"), ("/w/a/b/dal.toml", "file")), programs=("/opt/tool",),
                    seccomp=("setuid",), env=(("PATH", "/usr/bin"),), limits=LIMITS)
    return attrs.evolve(base, **changes)


def test_bubblewrap_mounts_each_carve_out_after_the_root_it_is_cut_from() -> None:
    argv = bwrap.command("/usr/bin/bwrap", _plan(), bwrap.view(_plan()), ["true"], identity_fds=(7, 8),
                         info_fd=9, block_fd=10, seccomp_fd=11)

    def at(*fragment: str) -> int:
        for i in range(len(argv)):
            if tuple(argv[i:i + len(fragment)]) == fragment:
                return i
        raise AssertionError(f"{fragment} not in {argv}")

    write = at("--bind", "/w", "/w")
    # the folders on the way are pinned (a mount point cannot be renamed), then the entry is read-only
    assert write < at("--bind", "/w/a", "/w/a") < at("--bind", "/w/a/b", "/w/a/b")
    assert at("--bind", "/w/a/b", "/w/a/b") < at("--ro-bind", "/w/a/b/dal.toml", "/w/a/b/dal.toml")
    assert at("--ro-bind", "/w/a/b/dal.toml", "/w/a/b/dal.toml") < at("--ro-bind", "/dev/null", "/w/a/b/dal.toml")
    assert write < at("--tmpfs", "/w/.dal", "--remount-ro", "/w/.dal")
    assert at("--ro-bind", "/data", "/data") < write
    assert at("--ro-bind-data", "7", "/etc/passwd") < at("--tmpfs", "/tmp")
    assert at("--remount-ro", "/") < at("--chdir", "/w") < at("--seccomp", "11") < at("--", "true")
    assert argv[-1] == "true" and "--unshare-net" in argv and "--ro-bind" in argv[at("/opt/tool") - 1]
    # by descriptor: every bind of a root names the descriptor the caller opened for it
    opened: list[str] = []
    head, tail = bwrap.view(_plan(), lambda path: opened.append(path) or 100 + len(opened))
    assert opened == ["/data", "/w", "/w/a", "/w/a/b", "/w/a/b/dal.toml"]
    assert "--bind-fd" in tail and "/w" not in tail[: tail.index("--bind-fd") + 1]


def test_a_read_everything_policy_shows_the_root_read_only_and_the_host_identity() -> None:
    plan = _plan(read_all=True, system=(), links=(), identity=False)
    argv = bwrap.command("/usr/bin/bwrap", plan, bwrap.view(plan), ["true"], identity_fds=(7, 8))
    assert argv[1:4] == ["--ro-bind", "/", "/"] and "/etc/passwd" not in argv and "--symlink" not in argv


def test_policy_check_prints_the_wall_of_each_pipeline(ws: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ws)
    before = tree(ws)
    assert main(["policy", "check", "--wall", "--allow-run=python3", "ls src | wc -l; python3 -c 1"]) == 0
    out = capsys.readouterr().out
    assert "wall of pipeline 1 (ls | wc):" in out and "wall of pipeline 2 (python3):" in out
    assert f"writes:       {ws}" in out and "network:      off" in out
    assert main(["policy", "check", "--wall", "--json", "--allow-run=python3", "python3 -c 1"]) == 0
    walls = json.loads(capsys.readouterr().out)["walls"]
    assert walls[0]["kind"] == "bubblewrap" and walls[0]["write"] == [str(ws)]
    assert [str(ws / "dal.toml"), "folder"] in walls[0]["placeholders"]
    assert tree(ws) == before
    assert main(["policy", "check", "--wall", "rm -rf /"]) == 1
    assert "wall of pipeline" not in capsys.readouterr().out  # denied: no wall is made for it


def test_wall_plans_follows_the_executor_per_pipeline(ws: Path) -> None:
    policy = Policy.load(ws, None, allow_run=["python3"], _skip_file=True)
    d = check_command("ls && python3 -c 1", policy)
    first, second = wall_plans(d, policy, 5.0)
    assert first.placeholders == () and (str(ws / "dal.toml"), "folder") in second.placeholders
    assert str(ws / ".git") in second.protected  # a program other than git: `.git` read-only as a whole
    assert str(ws / ".git") not in first.protected


def test_policy_check_shows_the_plan_of_the_kind_in_force(ws: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from dal.effects.wall import landlock_wall

    if landlock_wall.missing() is not None:
        pytest.skip(str(landlock_wall.missing()))
    monkeypatch.chdir(ws)
    monkeypatch.setenv("DAL_WALL", "landlock")
    assert main(["policy", "check", "--wall", "--json", "--allow-run=sh", "sh -c true"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["wall"]["kind"] == "landlock" and got["walls"][0]["kind"] == "landlock"
    assert {"setuid", "ipc-keyrings", "sockets"} <= set(got["walls"][0]["seccomp"])
