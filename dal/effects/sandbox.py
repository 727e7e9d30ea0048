"""The second wall: bubblewrap around every program, where the OS lets us use it.

Read-only root, the write roots (the workspace by default) the only writable binds, a private /tmp,
no network unless the policy allows it, its own PID namespace, killed with its parent.
"""

from __future__ import annotations

import functools
import shutil
import subprocess

__all__ = ["sandbox_status", "wrap", "BWRAP"]

BWRAP = "/usr/bin/bwrap"


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


@functools.lru_cache(maxsize=1)
def sandbox_status() -> tuple[bool, str]:
    """(available, reason), probed once per process by running `true` inside the wall."""
    exe = shutil.which("bwrap", path="/usr/bin:/usr/local/bin:/bin")
    if exe is None:
        return False, "bubblewrap (bwrap) is not installed"
    global BWRAP
    BWRAP = exe
    true = shutil.which("true", path="/usr/bin:/bin") or "/bin/true"
    try:
        proc = subprocess.run(
            [*_base(("/tmp",), "/", False), "--", true],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"bubblewrap does not start here: {e}"
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", errors="replace").strip().splitlines()
        return False, f"bubblewrap does not work here: {err[0] if err else f'exit {proc.returncode}'}"
    return True, f"bubblewrap at {exe}"


def wrap(argv: list[str], write_roots: tuple[str, ...], cwd: str, allow_net: bool) -> list[str]:
    """The argv that runs `argv` inside the wall.

    bwrap looks the bare name up on the fixed PATH of the scrubbed environment, the same trusted PATH
    and the same (read-only) filesystem the checker resolved it on; passing the name rather than the
    absolute path keeps argv[0], and so every error message, identical with and without the wall.
    """
    return [*_base(write_roots, cwd, allow_net), "--", *argv]
