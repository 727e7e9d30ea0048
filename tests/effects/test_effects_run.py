"""run_effect end to end: the article's commands, the executor's plumbing, limits, results, the wall."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import dal.effects
import dal.effects.exec.executor
from dal.effects import EffectContext, Policy, check_command, execute_checked, run_effect, sandbox_status
from dal.effects.classify.check import find_program
from dal.effects.plan.shell import parse_command
from dal.effects.wall import kind

ARTICLE_CHECK = "test -e 'COO-FILESYSTEM/articles/drafts/example.md' && echo present || echo missing"
ARTICLE_CREATE = (
    "mkdir -p 'COO-FILESYSTEM/articles/drafts' && "
    "printf '%s\\n' '# Draft' > 'COO-FILESYSTEM/articles/drafts/example.md'"
)

HAVE_BWRAP = sandbox_status()[0]
WALLS = [False, pytest.param(True, marks=pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable"))]


def ctx(ws: Path, sandbox: bool = False, **kw: object) -> EffectContext:
    policy = kw.pop("policy", None) or Policy.load(ws)
    return EffectContext(policy=policy, use_sandbox=sandbox, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("sandbox", WALLS)
def test_article_creates_the_draft_then_verifies_it(tmp_path: Path, sandbox: bool) -> None:
    c = ctx(tmp_path, sandbox)
    first = run_effect(ARTICLE_CHECK, c)
    assert (first.status, str(first)) == ("completed", "missing")
    created = run_effect(ARTICLE_CREATE, c)
    assert (created.status, str(created)) == ("completed", "command completed")
    assert (tmp_path / "COO-FILESYSTEM/articles/drafts/example.md").read_text() == "# Draft\n"
    again = run_effect(ARTICLE_CHECK, c)
    assert str(again) == "present" and again.ok and again.stdout == "present\n"


@pytest.mark.parametrize("sandbox", WALLS)
def test_article_exhausted_when_a_file_blocks_the_folder(tmp_path: Path, sandbox: bool) -> None:
    (tmp_path / "COO-FILESYSTEM/articles").mkdir(parents=True)
    (tmp_path / "COO-FILESYSTEM/articles/drafts").write_text("in the way")
    created = run_effect(ARTICLE_CREATE, ctx(tmp_path, sandbox))
    assert created.status == "failed" and created.code == 1 and not created.ok
    assert str(created).startswith("command failed (exit 1): mkdir: cannot create directory")
    assert "File exists" in str(created)


@pytest.mark.parametrize("sandbox", WALLS)
def test_pipes_lists_and_redirections(workspace: Path, sandbox: bool) -> None:
    c = ctx(workspace, sandbox)
    assert run_effect("sort notes.txt | uniq | head -2", c).stdout == "TODO: gamma\nalpha\n"
    assert str(run_effect("false && echo no || echo yes", c)) == "yes"
    assert str(run_effect("false; echo after", c)) == "after"
    assert run_effect("true && false", c).status == "failed"
    assert str(run_effect("echo one > f.txt && echo two >> f.txt && wc -l < f.txt", c)) == "2"
    assert (workspace / "f.txt").read_text() == "one\ntwo\n"
    r = run_effect("ls nope 2>&1", c)
    assert "nope" in r.stdout and r.stderr == ""
    r = run_effect("ls nope > out.txt 2>&1", c)
    assert r.stdout == r.stderr == "" and "nope" in (workspace / "out.txt").read_text()
    r = run_effect("ls nope 2>&1 > out2.txt", c)  # order matters, as in bash
    assert "nope" in r.stdout and (workspace / "out2.txt").read_text() == ""
    r = run_effect("ls nope notes.txt &> both.txt", c)
    text = (workspace / "both.txt").read_text()
    assert "nope" in text and "notes.txt" in text and r.stdout == ""
    assert run_effect("ls nope 2>/dev/null", c).stderr == ""
    assert str(run_effect("echo err >&2", c)) == "command completed"


def test_failure_summary_names_exit_code_and_first_stderr_line(workspace: Path) -> None:
    r = run_effect("ls nope", ctx(workspace))
    assert r.status == "failed" and r.code == 2
    assert str(r) == "command failed (exit 2): ls: cannot access 'nope': No such file or directory"


@pytest.mark.parametrize("sandbox", WALLS)
def test_timeout_kills_the_whole_process_group(workspace: Path, sandbox: bool) -> None:
    # Durations no other test (nor this one's other parameter, in another xdist worker) uses at the same time.
    a, b = f"7.{os.getpid()}{int(sandbox)}1", f"7.{os.getpid()}{int(sandbox)}2"
    started = time.monotonic()
    r = run_effect(f"sleep {a} | sleep {b}", ctx(workspace, sandbox, timeout=0.5))
    assert r.status == "timeout" and r.code is None and not r.ok
    assert str(r) == "command timed out after 0.5s"
    assert time.monotonic() - started < 3
    time.sleep(0.1)
    leftovers = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path("/proc", pid, "cmdline").read_bytes()
            except OSError:
                continue
            if cmdline in (f"sleep\x00{a}\x00".encode(), f"sleep\x00{b}\x00".encode()):
                leftovers.append(pid)
    assert leftovers == []


def test_output_is_capped_and_marked(workspace: Path) -> None:
    r = run_effect("seq 1 100000", ctx(workspace, max_output=1000))
    assert r.ok and r.stdout_truncated and not r.stderr_truncated
    assert r.stdout.startswith("1\n2\n3\n")
    assert "output truncated" in r.stdout and len(r.stdout) < 1100


def test_environment_is_scrubbed(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    policy = Policy.load(workspace, allow_run=["env"])
    out = run_effect("env", ctx(workspace, policy=policy)).stdout
    env = dict(line.split("=", 1) for line in out.splitlines())
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    # HOME is a folder of the command's own, never the workspace (a script's dotfiles would configure
    # the programs), gone once the command ends
    assert env["HOME"] != str(workspace.resolve()) and not env["HOME"].startswith(str(workspace.resolve()))
    assert env["XDG_CONFIG_HOME"] == env["HOME"] + "/.config" and not os.path.exists(env["HOME"])
    assert not any(k.startswith(("LD_", "DYLD_")) for k in env) and "SECRET_TOKEN" not in env


def test_stdin_is_closed(workspace: Path) -> None:
    started = time.monotonic()
    r = run_effect("cat", ctx(workspace, timeout=5))
    assert r.ok and r.stdout == "" and time.monotonic() - started < 2


def test_denied_command_never_executes(workspace: Path) -> None:
    r = run_effect("touch made.txt && echo $(id)", ctx(workspace))
    assert r.status == "denied" and r.code is None and not r.ok
    assert str(r) == "denied: shell syntax not allowed: command substitution $(...)"
    assert not (workspace / "made.txt").exists()


def test_approval_holds_the_command_until_executed_explicitly(workspace: Path) -> None:
    policy = Policy.load(workspace, require_approval=["touch"])
    c = ctx(workspace, policy=policy)
    r = run_effect("touch made.txt", c)
    assert r.status == "pending_approval" and r.decision.approval_required
    assert not (workspace / "made.txt").exists()
    done = execute_checked("touch made.txt", r.decision, c)
    assert done.ok and (workspace / "made.txt").exists()


def test_require_sandbox_without_bwrap_is_a_denial(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(kind.PROBES, "bubblewrap", lambda: (False, "bubblewrap (bwrap) is not installed"))
    monkeypatch.setitem(kind.PROBES, "landlock", lambda: (False, ""))
    r = run_effect("touch made.txt", ctx(workspace, require_sandbox=True))
    assert r.status == "denied"
    assert str(r) == "denied: sandbox required but unavailable: bubblewrap (bwrap) is not installed"
    assert not (workspace / "made.txt").exists()
    # Not required: it runs without the wall; as root only when the operator says so (--unsandboxed-as-root).
    if os.geteuid() == 0:
        refused = run_effect("touch made.txt", ctx(workspace, True))
        assert refused.status == "denied" and "--unsandboxed-as-root" in str(refused)
        assert not (workspace / "made.txt").exists()
    assert run_effect("touch made.txt", ctx(workspace, True, unsandboxed_as_root=True)).ok


def test_result_fields_and_json(workspace: Path) -> None:
    r = run_effect("echo hi", ctx(workspace))
    assert [r.dal_field(f) for f in ("ok", "code", "stdout", "stderr", "status", "summary")] == [
        True, 0, "hi\n", "", "completed", "hi",
    ]  # fmt: skip
    with pytest.raises(KeyError):
        r.dal_field("decision")
    j = r.to_json()
    assert j["summary"] == "hi" and j["class"] == "read" and j["status"] == "completed"
    assert {"command", "code", "reason", "reads", "writes", "duration_ms"} <= set(j)


def _bypass(command: str, policy: Policy) -> dal.effects.Decision:
    """Test-only: an 'allowed' decision for a command the static gate would deny."""
    plan = parse_command(command)
    names = {c.argv[0] for c in plan.simple_commands()}
    return dal.effects.Decision(
        True, "bypassed in a test", "local", plan=plan, executables=tuple((n, find_program(n)) for n in names)
    )


@pytest.fixture()
def outside_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory outside the workspace and outside /tmp (which the wall replaces with a private tmpfs)."""
    base = Path(tempfile.mkdtemp(prefix="dal-wall-", dir="/var/tmp"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap unavailable")
def test_the_wall_alone_blocks_a_write_outside(
    tmp_path: Path, outside_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dal.effects.exec.executor, "recheck", lambda cmd, policy: None)  # no second check either
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = Policy.load(ws)
    command = f"touch {outside_dir}/escaped && mkdir {outside_dir}/dir"
    assert not check_command(command, policy).allowed  # the gate would have stopped it
    walled = execute_checked(command, _bypass(command, policy), EffectContext(policy=policy, use_sandbox=True))
    assert walled.status == "failed" and "No such file or directory" in walled.stderr  # not even there
    assert list(outside_dir.iterdir()) == []
    # The control: the same bypass without the wall does write outside, so the wall is what stopped it.
    bare = execute_checked(command, _bypass(command, policy), EffectContext(policy=policy, use_sandbox=False))
    assert bare.ok and (outside_dir / "escaped").exists()


def test_executor_rechecks_redirections_at_open_time(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    policy = Policy.load(ws)
    command = f"echo x > {outside}/escaped"
    r = execute_checked(command, _bypass(command, policy), EffectContext(policy=policy, use_sandbox=False))
    assert r.status == "failed" and "outside the allowed roots" in r.stderr
    assert list(outside.iterdir()) == []


def test_paths_are_checked_again_when_each_command_starts(workspace: Path) -> None:
    # `l3 -> d/a/..` leads to `d` while `d/a` does not exist; once `d/a` is a symlink to `..` (made from
    # `sub/up`, which points inside from either place), `l3` leads to the workspace's parent.
    (workspace / "d").mkdir()
    os.symlink("d/a/..", workspace / "l3")
    command = "cp -P sub/up d/a && touch l3/escaped"
    policy = Policy.load(workspace)
    assert check_command(command, policy).allowed  # nothing points out yet
    r = run_effect(command, ctx(workspace))
    assert r.status == "failed" and r.code == 126
    assert "denied at start: writes outside the allowed roots: l3/escaped" in r.stderr
    assert not (workspace.parent / "escaped").exists()


def test_moving_a_relative_symlink_so_that_it_points_out_is_denied(workspace: Path) -> None:
    # (This was the example above before symlinks that would point out were denied when made.)
    decision = check_command("mv sub/up up2 && touch up2/escaped", Policy.load(workspace))
    assert not decision.allowed
    assert decision.reason.startswith("would make a symlink that points outside the allowed roots: up2 -> ..")


def test_decision_plan_is_not_part_of_equality(workspace: Path) -> None:
    policy = Policy.load(workspace)
    a, b = check_command("ls", policy), check_command("ls", policy)
    assert a == b and attrs.evolve(a, plan=None) == a


@pytest.mark.skipif(not HAVE_BWRAP or find_program("curl") is None, reason="needs bubblewrap and curl")
def test_the_wall_keeps_programs_off_the_network(tmp_path: Path) -> None:
    policy = Policy.load(tmp_path, allow_run=["curl"])
    r = run_effect("curl -sS -m 5 http://1.1.1.1/", EffectContext(policy=policy, use_sandbox=True))
    assert r.status == "failed"
    assert r.decision.effect_class == "local"  # no model and no network: it can only change the workspace


def test_a_fifo_cannot_hang_the_executor(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    started = time.monotonic()
    r = run_effect("cat < pipe", ctx(workspace, timeout=5))  # no writer: end of file at once
    assert r.ok and r.stdout == "" and time.monotonic() - started < 3
    w = run_effect("echo x > pipe", ctx(workspace, timeout=0.5))  # no reader: fails at once
    assert w.status == "failed" and "No such device or address" in w.stderr
