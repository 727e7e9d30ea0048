"""A read root is for reading (issue 27): connecting to a socket in it, receiving a push into it, hard-linking
out of it and writing through /dev/fd or /proc/self are refused by the wall alone, in every wall kind here.
Each attack runs with the check bypassed (the wall is what is tested), next to canaries that must not change;
a control shows the same attack reaching its target where the policy allows it (the network on)."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from dal.effects import Decision, EffectContext, Policy, execute_checked, sandbox_status
from dal.effects.classify.check import find_program
from dal.effects.exec import executor
from dal.effects.plan.shell import parse_command
from dal.effects.result import EffectResult
from dal.effects.wall import landlock_wall

SECRET = "read root: read, never written\n"
KINDS = [
    pytest.param("bubblewrap", marks=pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")),
    pytest.param("landlock", marks=pytest.mark.skipif(landlock_wall.missing() is not None,
                                                     reason=str(landlock_wall.missing()))),
]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DAL_WALL", request.param)
    return str(request.param)


@pytest.fixture()
def root() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="dal-readroot-", dir="/var/tmp"))  # not /tmp: the wall's is private
    (base / "ws").mkdir()
    (base / "shared").mkdir()
    (base / "shared" / "secret.txt").write_text(SECRET)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def walled(root: Path, command: str, network: bool = False, as_root_unwalled: bool = False) -> EffectResult:
    """`command` in the workspace with `shared/` a read root, through the wall alone (both checks bypassed)."""
    policy = Policy.load(root / "ws", allow_read=[str(root / "shared")], allow_run=["sh", "python3", "git"],
                         allow_net=network, _skip_file=True)
    plan = parse_command(command)
    names = {c.argv[0] for c in plan.simple_commands()}
    decision = Decision(True, "bypassed in a test", "local", plan=plan,
                        executables=tuple((n, find_program(n) or n) for n in names))
    with mock.patch.object(executor, "recheck", lambda c, p: None):
        return execute_checked(command, decision, EffectContext(policy=policy, timeout=20,
                                                                unsandboxed_as_root=as_root_unwalled))


def canary(root: Path) -> None:
    assert (root / "shared" / "secret.txt").read_text() == SECRET
    assert os.stat(root / "shared" / "secret.txt").st_nlink == 1


class Daemon:
    """A unix socket server in the read root, as a daemon's would be; `heard` is what any client sent."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.heard = b""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.heard += conn.recv(100)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


CONNECT = ("python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
           "s.sendall(b'pwned')\" ")


@pytest.mark.skipif(find_program("python3") is None, reason="python3 not installed")
def test_no_program_talks_to_a_socket_in_a_read_root(root: Path, kind: str) -> None:
    daemon = Daemon(root / "shared" / "daemon.sock")
    try:
        r = walled(root, CONNECT + str(root / "shared" / "daemon.sock"))
        assert r.status == "failed" and "PermissionError" in r.stderr, r.stderr
        pair = walled(root, "python3 -c \"import socket; a, b = socket.socketpair(); a.send(b'x'); "
                            "print(b.recv(1))\"")
        assert pair.ok and pair.stdout == "b'x'\n", pair.stderr  # a connected pair of its own stays
        assert daemon.heard == b""
        if kind == "bubblewrap":  # control: with the network on, the same connect reaches the daemon
            assert walled(root, CONNECT + str(root / "shared" / "daemon.sock"), network=True).ok
            daemon.stop.wait(0.5)
            assert daemon.heard == b"pwned"
    finally:
        daemon.close()
    canary(root)


def _git(cwd: Path, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(find_program("git") is None, reason="git not installed")
def test_a_read_root_takes_no_push_and_lends_no_hard_link(root: Path, kind: str) -> None:
    ws, shared = root / "ws", root / "shared"
    _git(shared, "init", "-q", "--bare", "up.git")
    _git(ws, "init", "-q", "-b", "main")
    (ws / "a.txt").write_text("a\n")
    _git(ws, "add", "a.txt")
    _git(ws, "-c", "user.name=op", "-c", "user.email=op@e", "commit", "-qm", "a")
    _git(ws, "push", "-q", str(shared / "up.git"), "main")
    refs = _git(shared / "up.git", "for-each-ref")
    pushed = walled(root, f"git push {shared}/up.git main:evil")
    assert pushed.status == "failed", pushed.stdout + pushed.stderr
    deleted = walled(root, f"git push --delete {shared}/up.git main")
    assert deleted.status == "failed", deleted.stdout + deleted.stderr
    assert _git(shared / "up.git", "for-each-ref") == refs
    # A local clone hard-links objects where it can: from a read root it must copy them. (Into a subfolder: under
    # Landlock the workspace's top, which holds protected entries, takes no new ones.)
    (ws / "sub").mkdir()
    if kind == "bubblewrap":  # (the Landlock wall removes every `.git` a pipeline makes, for now: no clone there)
        cloned = walled(root, f"git clone -q {shared}/up.git sub/copy")
        assert cloned.ok, cloned.stderr
        theirs = {os.stat(p).st_ino for p in (shared / "up.git" / "objects").rglob("*") if p.is_file()}
        ours = {os.stat(p).st_ino for p in (ws / "sub" / "copy" / ".git" / "objects").rglob("*") if p.is_file()}
        assert theirs and ours and not theirs & ours
    linked = walled(root, f"sh -c 'ln {shared}/secret.txt sub/leak'")
    assert linked.status == "failed" and not (ws / "sub" / "leak").exists(), linked.stderr
    canary(root)


def test_no_write_reaches_a_read_root_through_dev_fd_or_proc_self(root: Path, kind: str) -> None:
    secret = root / "shared" / "secret.txt"
    for how in (f"exec 3<{secret}; echo pwned >/dev/fd/3", f"exec 3<{secret}; echo pwned >/proc/self/fd/3",
                f"exec 3<{secret}; echo pwned >>/dev/fd/3", f"echo pwned >/proc/self/root{secret}",
                f"exec 3<{secret}; exec 1>/dev/fd/3; echo pwned", f"exec </dev/null 0<>{secret}; echo pwned >&0"):
        r = walled(root, "sh -c " + shlex.quote(how))
        assert r.status == "failed", f"{how}: {r.stdout}{r.stderr}"
        canary(root)


@pytest.mark.parametrize("root_user", [False, True], ids=["user", "root"])
def test_without_a_wall_none_of_these_programs_runs(root: Path, root_user: bool,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from dal.effects.wall import kind

    monkeypatch.setitem(kind.PROBES, "bubblewrap", lambda: (False, "bubblewrap (bwrap) is not installed"))
    monkeypatch.setitem(kind.PROBES, "landlock", lambda: (False, ""))
    monkeypatch.setattr(kind.os, "geteuid", lambda: 0 if root_user else 1000)
    daemon = Daemon(root / "shared" / "daemon.sock")
    try:
        for command in (CONNECT + str(root / "shared" / "daemon.sock"), f"git push {root}/shared/up.git main:x",
                        f"sh -c 'exec 3<{root}/shared/secret.txt; echo pwned >/dev/fd/3'"):
            r = walled(root, command, as_root_unwalled=root_user)  # as root, even with --unsandboxed-as-root
            assert r.status == "denied" and "runs only inside a wall" in r.decision.reason, (command, r.stderr)
        assert daemon.heard == b""
    finally:
        daemon.close()
    canary(root)
