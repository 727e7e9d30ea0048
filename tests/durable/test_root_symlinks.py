"""A relative root is not resolved through a symlink a script left in the workspace (docs/policy.md,
"Paths"). Executed: run 1 (`--allow-run=git`) `git apply`s a patch that makes
`out -> ../outside`; the operator's next `--allow-write=out` run (or `--allow-read=out`, `[paths] write`)
stops at policy load naming the link and its target, and nothing outside changes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PATCH = ("diff --git a/out b/out\\nnew file mode 120000\\n--- /dev/null\\n+++ b/out\\n@@ -0,0 +1 @@\\n"
         "+../outside\\n\\\\\\\\ No newline at end of file\\n")
RUN2 = 'print(run("cat out/canary.txt").stdout)\nprint(run(["cp", "run2.dal", "out/canary.txt"]).status)\n' \
       'print(run("touch out/PLANTED").status)\n'


@pytest.fixture
def ws(durable, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text("OUTSIDE-CANARY\n")
    durable.outside = outside
    return durable


def _untouched(d) -> None:
    assert sorted(p.name for p in d.outside.iterdir()) == ["canary.txt"]
    assert (d.outside / "canary.txt").read_text() == "OUTSIDE-CANARY\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="no git")
def test_a_symlink_git_apply_made_is_not_followed_by_the_next_runs_root(ws) -> None:
    d = ws
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=d.ws, check=True)
    d.write("run1.dal", f'print(run("printf \'{PATCH}\' > p.patch").status)\nprint(run("git apply p.patch").status)\n')
    r1 = d.cli("run", "--allow-run=git", "run1.dal")
    assert r1.code == 0, r1
    assert (d.ws / "out").is_symlink()  # the script made it: the attack's first half works
    d.write("run2.dal", RUN2)
    for flags in (["--allow-write=out"], ["--allow-read=out"]):
        r2 = d.cli("run", *flags, "run2.dal")
        assert r2.code == 2, r2
        flag = flags[0].split("=")[0]
        assert (f"{flag}: out: {d.ws.resolve()}/out is a symlink to {d.outside.resolve()}, outside the workspace"
                in r2.err)
        assert f"name {d.outside.resolve()} if you mean it" in r2.err
        assert "OUTSIDE-CANARY" not in r2.out
        _untouched(d)


def test_a_root_in_the_policy_file_through_a_planted_link_is_an_error(ws) -> None:
    d = ws
    (d.ws / "sub").mkdir()
    (d.ws / "sub" / "up").symlink_to(d.outside.parent)  # what `ln -s` in the wall would leave
    d.write("dal.toml", '[paths]\nwrite = ["sub/up/outside"]\n')
    d.write("run2.dal", RUN2.replace("out/", "sub/up/outside/"))
    r = d.cli("run", "run2.dal")
    assert r.code == 2
    assert f"paths.write: sub/up/outside: {d.ws.resolve()}/sub/up is a symlink to {d.outside.parent.resolve()}" \
        in r.err
    _untouched(d)


@pytest.mark.skipif(shutil.which("git") is None, reason="no git")
def test_a_link_to_the_workspace_itself_does_not_widen_a_narrowed_root(ws) -> None:
    # Run 1 makes `out -> .`; the operator's --allow-write=out must not become the whole workspace.
    d = ws
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=d.ws, check=True)
    patch = PATCH.replace("+../outside", "+.")
    d.write("run1.dal", f'print(run("printf \'{patch}\' > p.patch").status)\nprint(run("git apply p.patch").status)\n')
    assert d.cli("run", "--allow-run=git", "run1.dal").code == 0
    assert (d.ws / "out").is_symlink() and (d.ws / "out").resolve() == d.ws.resolve()
    d.write("build.sh", "the operator's build script\n")
    d.write("run2.dal", 'print(run("tee build.sh < /dev/null").status)\nprint(run("touch out/x").status)\n')
    r = d.cli("run", "--allow-write=out", "run2.dal")
    assert r.code == 2, r
    assert (f"--allow-write: out: {d.ws.resolve()}/out is a symlink to {d.ws.resolve()}, inside the workspace"
            in r.err)
    assert (d.ws / "build.sh").read_text() == "the operator's build script\n"
    assert not (d.ws / "x").exists()


def test_the_target_named_is_a_root_and_a_link_is_not_followed_even_inside_the_workspace(ws) -> None:
    d = ws
    (d.ws / "out").symlink_to(d.outside)
    (d.ws / "real").mkdir()
    (d.ws / "inside").symlink_to(d.ws / "real")
    d.write("s.dal", 'print(run("touch real/x").status)\n')
    r = d.cli("run", "--allow-write=inside", "s.dal")
    assert r.code == 2 and f"name {(d.ws / 'real').resolve()} if you mean it" in r.err, r
    assert d.cli("run", "--allow-write=real", "s.dal").out == "completed\n"  # the folder itself, by its name
    assert (d.ws / "real" / "x").exists()
    d.write("t.dal", f'print(run("touch {d.outside}/named").status)\n')
    assert d.cli("run", f"--allow-write={d.outside}", "t.dal").out == "completed\n"  # the operator means it
    assert (d.outside / "named").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="no git")
def test_a_symlink_to_another_place_inside_the_workspace_is_refused_too(ws) -> None:
    """`out -> .` (git apply of a mode 120000 file) turned the operator's narrowed
    `--allow-write=out` into the whole workspace: `tee build.sh` truncated the operator's script."""
    d = ws
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=d.ws, check=True)
    patch = PATCH.replace("../outside", ".")
    d.write("run1.dal", f'print(run("printf \'{patch}\' > p.patch").status)\nprint(run("git apply p.patch").status)\n')
    assert d.cli("run", "--allow-run=git", "run1.dal").code == 0
    assert (d.ws / "out").is_symlink()
    d.write("build.sh", "echo the operator's build\n")
    d.write("run2.dal", 'print(run("echo x | tee build.sh").status)\n')
    r2 = d.cli("run", "--allow-write=out", "run2.dal")
    assert r2.code == 2, r2
    assert f"--allow-write: out: {d.ws.resolve()}/out is a symlink to {d.ws.resolve()}, inside the workspace" in r2.err
    assert (d.ws / "build.sh").read_text() == "echo the operator's build\n"
    checked = d.cli("policy", "check", "tee build.sh", "--allow-write=out")
    assert checked.code == 2 and "is a symlink to" in checked.err
