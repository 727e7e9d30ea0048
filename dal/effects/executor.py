"""Run a checked plan: argv lists spawned directly (no shell); `&&`, `||`, `;`, `|`, redirections done here.

Each pipeline runs in its own process group so a timeout kills all of it. Programs get a scrubbed
environment, /dev/null as stdin, the workspace as working directory, resource limits, and, when
bubblewrap works, the wall around them.
"""

from __future__ import annotations

import errno
import math
import os
import resource
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

import attrs

from dal.effects.check import Decision, check_redirect_target, recheck
from dal.effects.policy import TRUSTED_PATH, Policy
from dal.effects.sandbox import wrap
from dal.effects.shell import Pipeline, SimpleCommand

__all__ = ["ExecOutcome", "execute_plan", "scrubbed_env"]

_FILE_SIZE_LIMIT = 1 << 30
_PROCESS_LIMIT = 512


def scrubbed_env(workspace: str) -> dict[str, str]:
    """The whole environment a program sees: nothing inherited, so no LD_*/DYLD_*, tokens or PATH tricks."""
    return {
        "PATH": TRUSTED_PATH,
        "HOME": workspace,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
    }


@attrs.frozen
class ExecOutcome:
    status: str  # completed | failed | timeout
    code: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool


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

    def text(self) -> str:
        s = self.buf.decode("utf-8", errors="replace")
        if self.dropped:
            s += f"\n[dal: output truncated, {self.dropped} more bytes]\n"
        return s


def _set_limits(pid: int, timeout: float) -> None:
    # Set right after spawn rather than in preexec_fn: preexec_fn forbids vfork and more than doubles
    # the cost of starting a program. The program has had microseconds to run by then.
    cpu = max(1, math.ceil(timeout)) + 1
    try:
        resource.prlimit(pid, resource.RLIMIT_CPU, (cpu, cpu))
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (_FILE_SIZE_LIMIT, _FILE_SIZE_LIMIT))
        resource.prlimit(pid, resource.RLIMIT_NPROC, (_PROCESS_LIMIT, _PROCESS_LIMIT))
    except (ProcessLookupError, PermissionError, ValueError, OSError):
        pass  # already gone, or a limit the OS refuses; the timeout still holds


def _open_redirect(target: str, op: str, policy: Policy) -> int:
    resolved = check_redirect_target(target, op != "<", policy)
    if resolved is None:
        raise OSError(errno.EACCES, "outside the allowed roots at open time", target)
    if op == "<":
        flags = os.O_RDONLY
    elif op == ">>":
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    # O_NONBLOCK so that a FIFO cannot hang DAL itself in open(); the program gets a blocking fd back
    # and is then bounded by the timeout like any other wait.
    fd = os.open(resolved, flags | os.O_CLOEXEC | os.O_NONBLOCK, 0o666)
    os.set_blocking(fd, True)
    return fd


def _signal_code(code: int) -> int:
    return 128 - code if code < 0 else code


class EffectCancelled(Exception):
    """The command was stopped (its process group killed) because the run was interrupted."""


def execute_plan(
    decision: Decision,
    policy: Policy,
    *,
    timeout: float,
    max_output: int,
    sandbox: bool,
    cancel: Callable[[], bool] | None = None,
) -> ExecOutcome:
    """Run the plan of an allowed `decision`; the caller has already checked it. Raises EffectCancelled
    when `cancel()` turns true while a command runs (its process group is killed first)."""
    plan = decision.plan
    if plan is None:
        raise ValueError("decision has no plan to execute")
    exes = dict(decision.executables)
    out, err = _Capture(max_output), _Capture(max_output)
    deadline = time.monotonic() + timeout
    env = scrubbed_env(policy.workspace)
    status = 0
    for i, pipeline in enumerate(plan.items):
        if i > 0:
            op = plan.ops[i - 1]
            if (op == "&&" and status != 0) or (op == "||" and status == 0):
                continue
        code = _run_pipeline(pipeline, exes, policy, env, out, err, deadline, timeout, sandbox, cancel)
        if code is _CANCELLED:
            raise EffectCancelled(pipeline)
        if code is None:
            return ExecOutcome("timeout", None, out.text(), err.text(), bool(out.dropped), bool(err.dropped))
        status = code
    return ExecOutcome(
        "completed" if status == 0 else "failed",
        status,
        out.text(),
        err.text(),
        bool(out.dropped),
        bool(err.dropped),
    )


def _run_pipeline(
    pipeline: Pipeline,
    exes: dict[str, str],
    policy: Policy,
    env: dict[str, str],
    out: _Capture,
    err: _Capture,
    deadline: float,
    timeout: float,
    sandbox: bool,
    cancel: Callable[[], bool] | None = None,
) -> Any:
    """Run one pipeline; its last command's exit status, None on timeout, _CANCELLED when cancelled."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    to_close = [out_w, err_w, devnull]
    procs: list[subprocess.Popen | int] = []  # an int is the status of a command that never started
    pgid = 0
    stdin = devnull
    try:
        n = len(pipeline.commands)
        for idx, cmd in enumerate(pipeline.commands):
            if idx < n - 1:
                next_r, next_w = os.pipe()
                to_close += [next_r, next_w]
                stdout = next_w
            else:
                next_r, stdout = -1, out_w
            proc = _spawn(cmd, exes, policy, env, stdin, stdout, err_w, to_close, pgid, timeout, sandbox)
            if isinstance(proc, subprocess.Popen) and pgid == 0:
                pgid = proc.pid
            procs.append(proc)
            stdin = next_r
    finally:
        for fd in to_close:
            os.close(fd)
    drained = _drain({out_r: out, err_r: err}, deadline, cancel)
    timed_out = drained is not True
    live = [p for p in procs if isinstance(p, subprocess.Popen)]
    if not timed_out:
        for p in live:
            if _wait_exit(p, deadline, cancel) is _CANCELLED:
                drained = _CANCELLED
            if p.returncode is None:
                timed_out = True
                break
    if timed_out:
        if pgid:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in live:
            p.kill()
            p.wait()
        return _CANCELLED if drained is _CANCELLED else None
    last = procs[-1]
    return last if isinstance(last, int) else _signal_code(last.returncode)


def _spawn(
    cmd: SimpleCommand,
    exes: dict[str, str],
    policy: Policy,
    env: dict[str, str],
    stdin: int,
    stdout: int,
    stderr: int,
    to_close: list[int],
    pgid: int,
    timeout: float,
    sandbox: bool,
) -> subprocess.Popen | int:
    why = recheck(cmd, policy)
    if why is not None:
        os.write(stderr, f"dal: {cmd.argv[0]}: denied at start: {why}\n".encode())
        return 126
    fds = {0: stdin, 1: stdout, 2: stderr}
    for r in cmd.redirects:
        if r.op == ">&":
            fds[r.fd] = fds[r.dup_fd]  # type: ignore[index]
            continue
        try:
            fd = _open_redirect(r.target, r.op, policy)  # type: ignore[arg-type]
        except OSError as e:
            os.write(stderr, f"dal: {r.target}: {e.strerror}\n".encode())
            return 1
        to_close.append(fd)
        for k in (1, 2) if r.fd == -1 else (r.fd,):
            fds[k] = fd
    exe = exes[cmd.argv[0]]
    ws = policy.workspace
    if sandbox:
        args, executable = wrap(list(cmd.argv), policy.write_roots, ws, policy.allow_net), None
    else:
        args, executable = list(cmd.argv), exe
    try:
        proc = subprocess.Popen(
            args,
            executable=executable,
            stdin=fds[0],
            stdout=fds[1],
            stderr=fds[2],
            cwd=ws,
            env=env,
            close_fds=True,
            process_group=pgid,
        )
    except OSError as e:
        os.write(stderr, f"dal: {cmd.argv[0]}: {e.strerror}\n".encode())
        return 127
    _set_limits(proc.pid, timeout)
    return proc


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
