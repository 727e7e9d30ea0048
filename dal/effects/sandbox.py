"""The second wall: bubblewrap around every program, where the OS lets us use it.

Read-only root, the write roots (the workspace by default) the only writable binds, a private /tmp,
no network unless the policy allows it, its own PID namespace, killed with its parent.
"""

from __future__ import annotations

import functools
import os
import select
import signal
import time

__all__ = ["sandbox_status", "start_probe", "wrap", "BWRAP"]

BWRAP = "/usr/bin/bwrap"
_PROBE_TIMEOUT = 10  # seconds


def _base(write_roots: tuple[str, ...], cwd: str, allow_net: bool) -> list[str]:
    argv = [BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # After the tmpfs, so a workspace under /tmp is bound on top of it rather than hidden by it.
    for root in write_roots:
        argv += ["--bind", root, root]
    if not allow_net:
        argv.append("--unshare-net")
    argv += [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--chdir",
        cwd,
    ]
    return argv


def _which(name: str, path: str) -> str | None:
    """`shutil.which(name, path=path)` on POSIX, without importing shutil (and its compression modules)."""
    for directory in dict.fromkeys(path.split(os.pathsep)):
        candidate = os.path.join(directory, name)
        if os.path.exists(candidate) and os.access(candidate, os.F_OK | os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


class _Probe:
    """`true` run inside the wall, with stdin from /dev/null and its stderr read back: what
    `subprocess.run(argv, stdin=DEVNULL, capture_output=True, timeout=10)` did, through os.posix_spawn,
    so that it can be started early and read later (start_probe), and so that a run does not import
    subprocess for it."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        read_end, write_end = os.pipe()
        actions: list[tuple] = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, write_end, 2),
        ]
        actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited_fds()]  # subprocess's close_fds
        try:
            self.pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self.fd = read_end
        self.deadline = time.monotonic() + _PROBE_TIMEOUT

    def status(self) -> tuple[bool, str]:
        """Wait for the probe (at most 10 s from its start) and say what it found."""
        err = b""
        try:
            while True:
                left = self.deadline - time.monotonic()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    self._kill()
                    return False, (f"bubblewrap does not start here: Command '{self.argv}' timed out after "
                                   f"{_PROBE_TIMEOUT} seconds")
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    break
                err += chunk
            _, wait_status = os.waitpid(self.pid, 0)
        except BaseException:
            self._kill()
            raise
        finally:
            os.close(self.fd)
        code = os.waitstatus_to_exitcode(wait_status)
        if code != 0:
            lines = err.decode("utf-8", errors="replace").strip().splitlines()
            return False, f"bubblewrap does not work here: {lines[0] if lines else f'exit {code}'}"
        return True, f"bubblewrap at {BWRAP}"

    def _kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def _inherited_fds() -> list[int]:
    """Descriptors above 2 that a child would inherit (none that DAL opens itself: Python's are not)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            if fd > 2 and os.get_inheritable(fd):
                out.append(fd)
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return out


def _spawn_probe() -> _Probe | tuple[bool, str]:
    """Start the probe, or say why there is nothing to start."""
    exe = _which("bwrap", "/usr/bin:/usr/local/bin:/bin")
    if exe is None:
        return False, "bubblewrap (bwrap) is not installed"
    global BWRAP
    BWRAP = exe
    true = _which("true", "/usr/bin:/bin") or "/bin/true"
    try:
        return _Probe([*_base(("/tmp",), "/", False), "--", true])
    except OSError as e:
        return False, f"bubblewrap does not start here: {e}"


_pending: _Probe | tuple[bool, str] | None = None  # what start_probe() began, for sandbox_status()


def start_probe() -> None:
    """Start probing in the background: bubblewrap takes 5-10 ms to set up its namespaces, time that can
    overlap the caller's own start-up (`dal run` imports the runner meanwhile). The first
    sandbox_status() collects the result; the probe still runs once per process."""
    global _pending
    if _pending is None and sandbox_status.cache_info().currsize == 0:
        _pending = _spawn_probe()


@functools.lru_cache(maxsize=1)
def sandbox_status() -> tuple[bool, str]:
    """(available, reason), probed once per process by running `true` inside the wall."""
    global _pending
    found, _pending = _pending or _spawn_probe(), None
    return found.status() if isinstance(found, _Probe) else found


def wrap(argv: list[str], write_roots: tuple[str, ...], cwd: str, allow_net: bool) -> list[str]:
    """The argv that runs `argv` inside the wall.

    bwrap looks the bare name up on the fixed PATH of the scrubbed environment, the same trusted PATH
    and the same (read-only) filesystem the checker resolved it on; passing the name rather than the
    absolute path keeps argv[0], and so every error message, identical with and without the wall.
    """
    return [*_base(write_roots, cwd, allow_net), "--", *argv]
