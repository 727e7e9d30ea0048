"""Run a checked plan: argv lists spawned directly (no shell); `&&`, `||`, `;`, `|`, redirections done here.

Each pipeline runs in its own process group so a timeout kills all of it. Programs get a scrubbed
environment, /dev/null as stdin (or the text a script feeds it), the workspace as working directory,
resource limits that apply before they run, a cgroup of the command's own where DAL can make one, and,
when bubblewrap works, the wall around them. The timeout covers starting every process, not only waiting for them.
"""

from __future__ import annotations

import codecs
import os
import re
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from dal.effects.classify.check import Decision, recheck
from dal.effects.exec.safeopen import DeniedAtOpen, open_redirect
from dal.effects.plan.shell import Pipeline, SimpleCommand
from dal.effects.policy import DEFAULT_TOOLSET_NAMES, Policy
from dal.effects.wall import reaper, seccomp
from dal.effects.wall.limits import Cgroup, CommandLimits, describe_signal_limit, die_with_parent
from dal.effects.wall.plan import WallPlan, scrubbed_env
from dal.effects.wall.sandbox import _UNDO_SCAN_LIMIT, Wall, WallRefused, _identity, plan_of

if TYPE_CHECKING:  # imported when the Landlock wall is in force: it brings shutil and tempfile, a run's path does not
    from dal.effects.guard.gitguard import GitGuard
    from dal.effects.guard.held import Held
    from dal.effects.wall.landlock_wall import LandlockWall

__all__ = ["ExecOutcome", "execute_plan", "scrubbed_env", "EffectCancelled", "wall_plans"]


def _path_bytes(e: UnicodeError) -> tuple[str | bytes, int]:
    """DAL's messages name paths, which the OS gives as bytes (a program's `bad\\xff/
    dal.toml` is `bad\\udcff/dal.toml`): write those bytes back as they were, and any other character that
    is not UTF-8 as an escape, never an internal error."""
    assert isinstance(e, UnicodeEncodeError)
    bad = e.object[e.start:e.end]
    if all(0xDC80 <= ord(c) <= 0xDCFF for c in bad):
        return bytes(ord(c) - 0xDC00 for c in bad), e.end
    return bad.encode("ascii", "backslashreplace").decode(), e.end


_PATHS = "dal-paths"
_UTF8 = ("utf-8", _PATHS)
codecs.register_error(_PATHS, _path_bytes)


@attrs.frozen
class ExecOutcome:
    status: str  # completed | failed | timeout
    code: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    limit: str | None = None  # the limit the command ran into, as a sentence


class _Capture:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    def prepend(self, data: bytes) -> None:
        """Put DAL's own message first (it is kept whole, and what it pushes past the cap is dropped)."""
        self.buf[:0] = data
        over = len(self.buf) - max(self.cap, len(data))
        if over > 0:
            del self.buf[len(self.buf) - over :]
            self.dropped += over

    def text(self) -> str:
        s = self.buf.decode("utf-8", errors="replace")
        if self.dropped:
            s += f"\n[dal: output truncated, {self.dropped} more bytes]\n"
        return s


def _signal_code(code: int) -> int:
    return 128 - code if code < 0 else code


class EffectCancelled(Exception):
    """The command was stopped (its process group killed) because the run was interrupted."""


class _CommandRun:
    """What one command's pipelines share: limits, cgroup, captures, the deadline, the limits it hit."""

    def __init__(self, decision: Decision, policy: Policy, timeout: float, max_output: int, sandbox: bool,
                 cancel: Callable[[], bool] | None, kind: str = "bubblewrap",
                 on_start: Callable[[], None] | None = None) -> None:
        self.decision = decision
        self.on_start = on_start  # called once, before the command's first program may start (started())
        self.kind = kind  # the wall's kind when `sandbox`: "bubblewrap" or "landlock"
        self.policy = policy
        self.exes = dict(decision.executables)
        self.out, self.err = _Capture(max_output), _Capture(max_output)
        self.deadline = time.monotonic() + timeout
        self.home: str | None = None  # the bare programs' HOME, made when the first one starts
        self.sandbox = sandbox
        self.cancel = cancel
        self.limits = CommandLimits.of(policy, timeout)
        self.cgroup: Cgroup | None = None
        self.hit: list[str] = []
        self.held: list[_Held] = []  # walled stages of the pipeline being started, not yet released
        self._walled_setup: Callable[[], None] | None = None
        self._stdin = decision.stdin  # fed once, to the first program that starts

    def take_stdin(self) -> int | None:
        """A descriptor reading the command's input from its start (an anonymous file of DAL's, never a
        pipe DAL would have to keep writing while it drains the output), or None when it has none or the
        first program has had it."""
        text, self._stdin = self._stdin, None
        if text is None:
            return None
        data = text.encode("utf-8")
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("dal-input", os.MFD_CLOEXEC)
        else:  # pragma: no cover - not Linux
            import tempfile

            fd = os.dup(tempfile.TemporaryFile().fileno())
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.lseek(fd, 0, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def started(self) -> None:
        """The command's first program is about to start: the caller's on_start runs, once (the runner
        journals the effect's intent there). Inside bubblewrap that is the release point (_release): every
        stage's sandbox is set up and bounded and none has started its program; if on_start raises, the held
        stages are killed and no program starts."""
        if self.on_start is not None:
            hook, self.on_start = self.on_start, None
            hook()

    def walled_argv(self, argv: list[str]) -> list[str] | None:
        """A stage's command line that starts bubblewrap inside the command's cgroup(s) from its birth without
        a preexec_fn: a shell joins them (the "0" Cgroup.joiner writes) and execs bubblewrap. With no
        preexec_fn, subprocess starts it with vfork: forking the whole DAL process made every page of its heap
        copy-on-write, a cost to the parent of 5 to 20 ms of CPU per stage in faults (docs/performance.md).
        DAL's death before bubblewrap arms --die-with-parent leaves its init waiting on the block pipe, never
        running the program, for the next start's sweep (by the cgroup, or by the owner's tag: reaper.py).
        None: no shell to do it with (the caller forks with walled_setup, as before)."""
        if self.cgroup is None:
            return argv
        if _SH is None:
            return None
        files = self.cgroup.join_files()
        return [_SH, "-c", _JOIN, "dal-wall", str(len(files)), *files, *argv]

    def walled_setup(self) -> Callable[[], None]:
        """preexec_fn of each stage's bubblewrap: it dies with DAL and is in the command's cgroup from before
        its exec (limits.Cgroup.joiner), so that no instant of a kill -9 leaves a process of the wall outside
        what the next start sweeps (limits.sweep_orphans)."""
        if self._walled_setup is None:
            self._walled_setup = self.cgroup.joiner() if self.cgroup is not None else die_with_parent()
        return self._walled_setup

    def bare_env(self) -> dict[str, str]:
        """The environment of a program run without the wall, with the command's own HOME: a fresh folder,
        mode 0700, in the system's temporary folder, removed when the command ends (close_home)."""
        if self.home is None:
            import tempfile

            self.home = tempfile.mkdtemp(prefix="dal-home-")
        return scrubbed_env(self.home)

    def close_home(self) -> None:
        if self.home is not None:
            import shutil

            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None

    def outcome(self, status: str, code: int | None) -> ExecOutcome:
        if self.cgroup is not None:
            self.hit += self.cgroup.hits()
        limit = "; ".join(dict.fromkeys(self.hit)) or None
        return ExecOutcome(status, code, self.out.text(), self.err.text(), bool(self.out.dropped),
                           bool(self.err.dropped), limit)


def execute_plan(
    decision: Decision,
    policy: Policy,
    *,
    timeout: float,
    max_output: int,
    sandbox: bool,
    cancel: Callable[[], bool] | None = None,
    kind: str = "bubblewrap",
    on_start: Callable[[], None] | None = None,
) -> ExecOutcome:
    """Run the plan of an allowed `decision`; the caller has already checked it. Raises EffectCancelled
    when `cancel()` turns true while a command runs (its processes are killed first). A pipeline whose
    wall cannot be set up as the policy needs does not start (status 126, the reason on stderr)."""
    plan = decision.plan
    if plan is None:
        raise ValueError("decision has no plan to execute")
    run = _CommandRun(decision, policy, timeout, max_output, sandbox, cancel, kind, on_start)
    if not (sandbox and kind == "bubblewrap"):
        run.started()  # no release point to wait for: before anything is made or started, as it always was
    run.cgroup = Cgroup.create(run.limits)
    try:
        status = 0
        for i, pipeline in enumerate(plan.items):
            if i > 0:
                op = plan.ops[i - 1]
                if (op == "&&" and status != 0) or (op == "||" and status == 0):
                    continue
            code = _run_pipeline(pipeline, run)
            if code is _CANCELLED:
                raise EffectCancelled(pipeline)
            if code is None:
                return run.outcome("timeout", None)
            status = code
        return run.outcome("completed" if status == 0 else "failed", status)
    finally:
        run.close_home()
        if run.cgroup is not None:
            run.cgroup.close()


def locks_git(pipeline: Pipeline) -> bool:
    """Whether the pipeline's wall shows every `.git` folder read-only as a whole (sandbox.Wall.lock_git): when
    one of its programs is neither git nor of the default toolset (whose writes the check sees), and so may
    write git's objects, refs or index as it likes."""
    return any(c.argv[0] not in DEFAULT_TOOLSET_NAMES and c.argv[0] != "git" for c in pipeline.commands)


def _walls_for(pipeline: Pipeline) -> tuple[bool, bool]:
    """(placeholders, lock_git) of the pipeline's wall: placeholders and the repository's references held
    only when a program may write files the check cannot see (sandbox.PLACEHOLDERS)."""
    return any(c.argv[0] not in DEFAULT_TOOLSET_NAMES for c in pipeline.commands), locks_git(pipeline)


def wall_plans(decision: Decision, policy: Policy, timeout: float) -> list[WallPlan]:
    """The plan of each pipeline's wall, as it would be made now (nothing is made or run)."""
    if decision.plan is None:
        return []
    exes = dict(decision.executables)
    limits = CommandLimits.of(policy, timeout)
    out = []
    for pipeline in decision.plan.items:
        placeholders, lock_git = _walls_for(pipeline)
        out.append(plan_of(policy, exes.values(), limits, placeholders, lock_git))  # as _run_pipeline's
    return out


def _run_pipeline(pipeline: Pipeline, run: _CommandRun) -> Any:
    """Run one pipeline; its last command's exit status, None on timeout, _CANCELLED when cancelled.

    The wall is made for each pipeline, just before it starts, so that it sees the tree the pipelines
    before it left (a protected file one of them created is protected from the next)."""
    others, lock_git = _walls_for(pipeline)  # and the repository's references held (gitguard) with others
    guard: GitGuard | None = None
    wall: Wall | None = None
    record: Held | None = None
    step = "git's state cannot be held"
    refusals: tuple[type[BaseException], ...] = (WallRefused, OSError)
    try:
        if others:  # only then git's guard and its record (their imports kept off a toolset run's start)
            from dal.effects.guard.gitguard import GitGuard, GuardRefused
            from dal.effects.guard.held import Held

            refusals = (WallRefused, GuardRefused, OSError)
            guard = GitGuard.start(run.policy, walled=run.sandbox)
        step = "the wall cannot be set up"
        if run.sandbox and run.kind == "landlock":
            from dal.effects.wall.landlock_wall import LandlockWall

            wall = LandlockWall(run.policy, run.exes.values(), run.limits.tmp_size, others, lock_git, limits=run.limits,
                                writes=run.decision.writes)
        elif run.sandbox:
            wall = Wall(run.policy, run.exes.values(), run.limits.tmp_size, others, lock_git, limits=run.limits)
        # Durably, before any stage starts: what the guard and the wall hold, for the next start to check
        # should DAL be killed while the pipeline runs (held.py).
        step = "what the wall and git's guard hold cannot be recorded in .dal/held"
        record = Held.write(run.policy, guard, wall) if others else None
    except BaseException as e:
        # The guard is finished and the wall closed whatever failed (Wall() closes itself when it raises).
        if wall is not None:
            wall.close()
        refused = guard.finish() if guard is not None else []
        if not isinstance(e, refusals):
            raise
        # Like a path denied at start: this pipeline does not start, the list goes on as after a failure.
        run.err.add(f"dal: {pipeline.commands[0].argv[0]}: denied at start: {step}: {e}\n".encode(*_UTF8))
        if refused:
            run.err.prepend("".join(f"dal: {m}\n" for m in refused).encode(*_UTF8))
        return 126
    refused = []
    try:
        code = _run_stages(pipeline, run, wall)
    finally:
        if wall is not None:
            wall.close()
        if guard is not None:
            refused = guard.finish()
        if record is not None:
            record.remove()
    if refused:
        # gitguard: a commit, the stash or the index now records a path a person's git must never write; the
        # refs and the index are back as before. First on stderr, so that the result's summary says it.
        run.err.prepend("".join(f"dal: {m}\n" for m in refused).encode(*_UTF8))
        code = 126 if isinstance(code, int) else code
    if wall is not None and wall.undone:
        # sandbox.Wall._undo_nested: a policy file, a store or (a program other than git) a repository made or
        # changed anywhere in the write roots, which a later `dal run` or a person's git there would take up.
        run.err.add(f"dal: undid what a program did to protected names inside the wall: {', '.join(wall.undone)}; "
                    "a policy file, a store or a git repository is never made or changed by a script\n".encode(*_UTF8))
        if not wall.swept and not wall.unchecked:
            return 126 if isinstance(code, int) else code
    if wall is not None and wall.swept:
        # sandbox.GIT_SWEPT and _neutralise: what a program made inside the wall that a person's git would act
        # on later (a todo list, a commondir, a `.git` file, a folder passing for a git directory).
        run.err.add(f"dal: removed {', '.join(wall.swept)}, made inside the wall: a person's git would act on it "
                    "later (a rebase, am or cherry-pick must finish within one command). If a commit or the index "
                    "holds it, `git reset --hard`, `git checkout` or `git stash` puts it back: check `git status` "
                    "and the branch's commits before you do\n".encode(*_UTF8))
        if not wall.unchecked:
            return 126 if isinstance(code, int) else code
    if wall is not None and wall.unchecked:
        # Fail closed (sandbox._UNDO_SCAN_LIMIT): the pipeline grew the tree past what the walk checks.
        run.err.add(f"dal: could not check what the program left for git in {', '.join(wall.unchecked)}: more than "
                    f"{_UNDO_SCAN_LIMIT} entries there now, or a folder DAL cannot look into; look for a `.git` file, "
                    "a folder holding HEAD, objects/ and refs/, or a dal.toml before running git or dal there\n"
                    .encode(*_UTF8))
        return 126 if isinstance(code, int) else code
    return code


def _run_stages(pipeline: Pipeline, run: _CommandRun, wall: Wall | None) -> Any:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    procs: list[subprocess.Popen | int] = []  # an int is the status of a command that never started
    pgid = 0
    stopped: Any = None  # why starting stopped early: None, "late" or _CANCELLED
    stdin = devnull
    try:
        fed = run.take_stdin()
        stdin = devnull if fed is None else fed
    except BaseException:
        for fd in (out_r, out_w, err_r, err_w, devnull):
            os.close(fd)
        raise
    try:
        n = len(pipeline.commands)
        for idx, cmd in enumerate(pipeline.commands):
            # Starting processes counts against the timeout: a long pipeline stops starting at the deadline.
            if time.monotonic() >= run.deadline:
                stopped = "late"
                break
            if run.cancel is not None and run.cancel():
                stopped = _CANCELLED
                break
            next_r, stdout = os.pipe() if idx < n - 1 else (devnull, out_w)
            try:
                proc = _spawn(cmd, run, wall, stdin, stdout, err_w, pgid)
            finally:
                # The child has its copies: a long pipeline does not hold every pipe open in DAL.
                if stdin != devnull:
                    os.close(stdin)
                stdin = next_r
                if stdout != out_w:
                    os.close(stdout)
            if isinstance(proc, subprocess.Popen) and pgid == 0:
                pgid = proc.pid
            procs.append(proc)
        # Every stage's bubblewrap has been setting up meanwhile; now each is given its limits and let go.
        if stopped is None and not _release(run):
            stopped = "late"
    except BaseException:
        _kill(pgid, [p for p in procs if isinstance(p, subprocess.Popen)])
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        for fd in {stdin, out_w, err_w, devnull}:
            os.close(fd)
        if stopped is not None:
            _kill(pgid, [p for p in procs if isinstance(p, subprocess.Popen)])
        # Only now, with every stage released or killed (and reaped): a held stage whose block fd closed
        # unwritten would go on without its limits.
        for held in run.held:
            os.close(held.info_r)
            os.close(held.block_w)
        run.held = []
    live = [p for p in procs if isinstance(p, subprocess.Popen)]
    captures = {out_r: run.out, err_r: run.err}
    if stopped is not None:
        _drain(captures, time.monotonic())  # only closes them: the command is over
        return stopped if stopped is _CANCELLED else None
    drained = _drain(captures, run.deadline, run.cancel)
    timed_out = drained is not True
    if not timed_out:
        for p in live:
            if _wait_exit(p, run.deadline, run.cancel) is _CANCELLED:
                drained = _CANCELLED
            if p.returncode is None:
                timed_out = True
                break
    if timed_out:
        _kill(pgid, live)
        return _CANCELLED if drained is _CANCELLED else None
    for p in procs:
        why = describe_signal_limit(p if isinstance(p, int) else _signal_code(p.returncode), run.limits)
        if why:
            run.hit.append(why)
    last = procs[-1]
    return last if isinstance(last, int) else _signal_code(last.returncode)


def _kill(pgid: int, live: list[subprocess.Popen]) -> None:
    # A stage in the Landlock wall is its init (landlock_wall.stage_init): told to stop, it kills every
    # process the stage left, wherever they went (`setsid`), before the process group is killed.
    inits = [p for p in live if getattr(p, "stage_init", False)]
    for p in inits:
        p.terminate()
    for p in inits:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for p in live:
        p.kill()
        p.wait()


def _spawn(
    cmd: SimpleCommand, run: _CommandRun, wall: Wall | None, stdin: int, stdout: int, stderr: int, pgid: int
) -> subprocess.Popen | int:
    """Start one simple command: a Popen (held on its block fd, inside the wall) or the exit status of a
    command that could not start."""
    try:
        why = recheck(cmd, run.policy)
    except OSError as e:  # a path vanished while it was resolved: something is changing the tree right now
        why = f"a path changed while it was being checked ({e.strerror}: {e.filename})"
    if why is not None:
        os.write(stderr, f"dal: {cmd.argv[0]}: denied at start: {why}\n".encode(*_UTF8))
        return 126
    fds = {0: stdin, 1: stdout, 2: stderr}
    opened: list[int] = []
    try:
        for r in cmd.redirects:
            if r.op == ">&":
                fds[r.fd] = fds[r.dup_fd]  # type: ignore[index]
                continue
            try:
                fd = open_redirect(r.target, r.op, run.policy)  # type: ignore[arg-type]
            except DeniedAtOpen as e:
                os.write(stderr, f"dal: {cmd.argv[0]}: denied at start: {e}\n".encode(*_UTF8))
                return 126
            except OSError as e:
                os.write(stderr, f"dal: {r.target}: {e.strerror}\n".encode(*_UTF8))
                return 1
            opened.append(fd)
            for k in (1, 2) if r.fd == -1 else (r.fd,):
                fds[k] = fd
        if wall is not None and run.kind == "landlock":
            return _spawn_bare(cmd, run, fds, pgid, wall)  # type: ignore[arg-type]  # a LandlockWall
        if wall is not None:
            return _spawn_walled(cmd, run, wall, fds, pgid)
        return _spawn_bare(cmd, run, fds, pgid)
    finally:
        for fd in opened:
            os.close(fd)


def _spawn_bare(cmd: SimpleCommand, run: _CommandRun, fds: dict[int, int], pgid: int,
                landlocked: LandlockWall | None = None) -> subprocess.Popen | int:
    """Without the wall, or inside the Landlock wall: the limits (and the Landlock ruleset) are set in the
    child between fork and exec."""
    env, setup = (run.bare_env(), _preexec(run)) if landlocked is None else \
        (landlocked.env(scrubbed_env(landlocked.home)), _preexec_landlocked(run, landlocked))
    try:
        proc = subprocess.Popen(
            list(cmd.argv),
            executable=run.exes[cmd.argv[0]],
            stdin=fds[0],
            stdout=fds[1],
            stderr=fds[2],
            cwd=run.policy.workspace,
            env=env,
            close_fds=True,
            process_group=pgid,
            preexec_fn=setup,
        )
    except OSError as e:
        os.write(fds[2], f"dal: {cmd.argv[0]}: {e.strerror}\n".encode(*_UTF8))
        return 127
    proc.stage_init = landlocked is not None  # type: ignore[attr-defined]  # see _kill
    return proc


def _preexec(run: _CommandRun) -> Callable[[], None]:
    """The child's set-up without the wall: its limits, then the filter against set-user-ID files."""
    limits = run.limits.preexec(run.cgroup)
    if not seccomp.available():
        return limits
    filt = seccomp.install(run.policy.allow_net)

    def setup() -> None:
        limits()
        filt()

    return setup


def _preexec_landlocked(run: _CommandRun, wall: LandlockWall) -> Callable[[], None]:
    """The child's set-up inside the Landlock wall: its limits (the cgroup joined while /sys is still
    reachable), then the ruleset and the filters (landlock_wall.LandlockWall.preexec)."""
    limits = run.limits.preexec(run.cgroup)
    restrict = wall.preexec()

    def setup() -> None:
        limits()
        restrict()

    return setup


_CHILD_PID = re.compile(rb'"child-pid":\s*(\d+)')


class _Held:
    """A stage inside the wall whose bubblewrap waits on its block fd for DAL to set its limits."""

    __slots__ = ("proc", "info_r", "block_w", "name")

    def __init__(self, proc: subprocess.Popen, info_r: int, block_w: int, name: str) -> None:
        self.proc = proc
        self.info_r = info_r
        self.block_w = block_w
        self.name = name


def _spawn_walled(
    cmd: SimpleCommand, run: _CommandRun, wall: Wall, fds: dict[int, int], pgid: int
) -> subprocess.Popen | int:
    """Inside the wall. bubblewrap reports its sandbox's init process on --info-fd and then waits on
    --block-fd before it starts the program: DAL sets the rlimits on that process and moves it into the
    command's cgroup meanwhile (_release), so the program and everything it starts are bound from their
    first instruction. The stages of a pipeline are all started before any is released, so that their
    set-ups overlap."""
    reaper.register()  # before the first wall: what a kill -9 leaves, the next start finds (reaper.sweep)
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    passwd, group = _identity()
    data = []
    contents = (passwd, group, seccomp.program(None, wall.plan.network)) if seccomp.available() else (passwd, group)
    for content in contents:
        r, w = os.pipe()
        os.write(w, content)  # a few hundred bytes: never more than the pipe holds
        os.close(w)
        data.append(r)
    child = [info_w, block_r, *data]
    # bubblewrap holds the block pipe's write end too (its sandbox's init inherits it): a DAL killed before it
    # let the stage go leaves that init waiting for ever (for the next start's sweep), never starting the
    # program without its limits, as it did when the read saw end of file.
    keep = (*child, block_w)
    argv = wall.argv(list(cmd.argv), (data[0], data[1]), info_w, block_r, data[2] if len(data) > 2 else None)
    if len(argv) > _BWRAP_MAX_ARGS:
        for fd in (*child, info_r, block_w):
            os.close(fd)
        os.write(fds[2], f"dal: {cmd.argv[0]}: denied at start: the wall takes at most {_BWRAP_MAX_ARGS} arguments, "
                         f"and this command with the wall's own needs {len(argv)}\n".encode(*_UTF8))
        return 126
    started = run.walled_argv(argv)
    try:
        proc = subprocess.Popen(
            argv if started is None else started,
            stdin=fds[0],
            stdout=fds[1],
            stderr=fds[2],
            cwd=run.policy.workspace,
            env={**dict(wall.plan.env), reaper.WALL_OWNER: reaper.owner_tag(os.getpid())},
            close_fds=True,
            pass_fds=(*keep, *wall.fds),
            process_group=pgid,
            preexec_fn=run.walled_setup() if started is None else None,
        )
    except OSError as e:
        os.close(info_r)
        os.close(block_w)
        os.write(fds[2], f"dal: {cmd.argv[0]}: {e.strerror}\n".encode(*_UTF8))
        return 127
    finally:
        for fd in child:
            os.close(fd)
    run.held.append(_Held(proc, info_r, block_w, cmd.argv[0]))
    return proc


# walled_argv's shell: joins each cgroup file it is given ("0": itself), then execs bubblewrap's command line.
_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 >"$1" || exit 126; n=$((n - 1)); shift; done; exec "$@"'
_SH = next((p for p in ("/bin/sh", "/usr/bin/sh") if os.access(p, os.X_OK)), None)

# bubblewrap refuses a command line of more than 9000 arguments (its own options included) and exits at once.
_BWRAP_MAX_ARGS = 9000


def _release(run: _CommandRun) -> bool:
    """Give each held stage its limits and cgroup, then let it start; False if the deadline passed first.
    A stage whose bubblewrap exited before starting its program (it says why on the stage's stderr) is
    left to be reaped as a failed stage."""
    cg = run.cgroup
    ready = []
    for held in run.held:
        pid = _read_child_pid(held.info_r, run.deadline)
        if pid is _LATE:
            return False
        if pid is None:
            run.err.add(f"dal: {held.name}: the wall (bubblewrap) exited before the program started\n".encode(*_UTF8))
            continue
        run.limits.apply(pid, with_nproc=cg is None or not cg.bounds_processes)
        if cg is not None and not cg.holds(pid):  # born there (walled_argv): moving it again waits for RCU
            cg.add(pid)
        ready.append(held)
    if ready:
        run.started()  # the release point: what raises here kills the held stages, none having started
    for held in ready:
        try:
            os.write(held.block_w, b"\0")  # let the program start
        except OSError:  # bubblewrap died meanwhile (EPIPE): the stage fails, it does not crash DAL
            run.err.add(f"dal: {held.name}: the wall (bubblewrap) exited before the program started\n".encode(*_UTF8))
    return True


_LATE: Any = object()


def _read_child_pid(fd: int, deadline: float) -> Any:
    """The pid bubblewrap writes on its info fd (None if it exited first), _LATE past the deadline."""
    buf = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return _LATE
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
    m = _CHILD_PID.search(buf)
    return int(m.group(1)) if m else None


_CANCELLED: Any = object()


def _wait_exit(p: subprocess.Popen, deadline: float, cancel: Callable[[], bool] | None) -> Any:
    """Reap `p` by the deadline, looking at `cancel()` at least every 0.1 s; _CANCELLED if it turned true.

    `Popen.wait(timeout)` polls with sleeps that start at 0.5 ms and double, which cost a fast command
    about a millisecond; a pidfd becomes readable the moment the process exits."""
    if p.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(p.pid)
    except (AttributeError, OSError):  # no pidfd (not Linux 5.3+): wait in short slices instead
        fd = -1
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            step = min(left, 0.1) if cancel is not None else left
            if fd >= 0:
                if select.select([fd], [], [], step)[0]:
                    p.wait()  # it has exited: this only reaps it
                    return True
            else:
                try:
                    p.wait(timeout=step)
                    return True
                except subprocess.TimeoutExpired:
                    pass
            if cancel is not None and cancel():
                return _CANCELLED
    finally:
        if fd >= 0:
            os.close(fd)


def _drain(captures: dict[int, _Capture], deadline: float, cancel: Callable[[], bool] | None = None) -> Any:
    """Read every pipe to EOF: True; False if the deadline passed first; _CANCELLED if `cancel()` turned
    true first."""
    sel = selectors.DefaultSelector()
    try:
        for fd in captures:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        open_fds = set(captures)
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if cancel is not None and cancel():
                return _CANCELLED
            for key, _ in sel.select(timeout=min(left, 0.1) if cancel is not None else left):
                fd = key.fd
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if data:
                    captures[fd].add(data)
                else:
                    sel.unregister(fd)
                    open_fds.discard(fd)
        return True
    finally:
        sel.close()
        for fd in captures:
            os.close(fd)
