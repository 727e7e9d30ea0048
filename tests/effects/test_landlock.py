"""The Landlock primitive (dal/effects/wall/landlock.py) on this machine's kernel: a child restricted to what
its ruleset names reads and writes only that, next to canaries it must not read or change."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from dal.effects.wall import landlock

pytestmark = pytest.mark.skipif(landlock.abi() == 0, reason="the kernel has no Landlock")

SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/etc")
# An interpreter under the system folders (this one may live elsewhere, as pyenv's does)
PYTHON = next((p for p in ("/usr/bin/python3", os.path.realpath(sys.executable)) if p.startswith("/usr/")
               and os.path.exists(p)), None)
needs_python = pytest.mark.skipif(PYTHON is None, reason="no python3 under /usr")


def test_the_probe_finds_landlock_where_the_kernel_lists_it() -> None:
    try:
        with open("/sys/kernel/security/lsm") as f:
            lsms = f.read().split(",")
    except OSError:
        pytest.skip("no securityfs here to say which modules are in force")
    assert ("landlock" in lsms) == (landlock.abi() >= 1)


def test_rights_handled_by_abi() -> None:
    assert landlock.handled_fs(1) == (1 << 13) - 1
    assert landlock.handled_fs(2) & landlock.REFER and not landlock.handled_fs(2) & landlock.TRUNCATE
    assert landlock.handled_fs(3) & landlock.TRUNCATE and not landlock.handled_fs(4) & landlock.IOCTL_DEV
    assert landlock.handled_fs(5) & landlock.IOCTL_DEV
    assert landlock.handled_net(3) == 0 and landlock.handled_net(4) == landlock.NET_CONNECT_TCP | landlock.NET_BIND_TCP
    assert landlock.scoped(5) == 0
    assert landlock.scoped(6) == landlock.SCOPE_SIGNAL | landlock.SCOPE_ABSTRACT_UNIX_SOCKET


def run_in(ruleset: landlock.Ruleset, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, preexec_fn=ruleset.restrictor(), capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def tree(tmp_path):
    """ro/ (a read root), rw/ (a write root), and canaries beside them."""
    (tmp_path / "ro").mkdir()
    (tmp_path / "rw").mkdir()
    (tmp_path / "ro" / "given.txt").write_text("given\n")
    (tmp_path / "canary.txt").write_text("secret\n")
    (tmp_path / "ro" / "kept.txt").write_text("kept\n")
    return tmp_path


def walled(tree, network: bool = False) -> landlock.Ruleset:
    rs = landlock.Ruleset(network=network)
    for d in SYSTEM:
        rs.allow(d, landlock.READ | landlock.EXECUTE)
    rs.allow(str(tree / "ro"), landlock.READ | landlock.EXECUTE)
    rs.allow(str(tree / "rw"), landlock.WRITE_ALL)
    rs.allow("/dev/null", landlock.READ_FILE | landlock.WRITE_FILE)
    return rs


def test_a_restricted_child_reads_and_writes_only_what_it_is_given(tree) -> None:
    with walled(tree) as rs:
        assert run_in(rs, ["cat", str(tree / "ro" / "given.txt")]).stdout == "given\n"
        out = run_in(rs, ["cat", str(tree / "canary.txt")])
        assert out.returncode != 0 and "Permission denied" in out.stderr and "secret" not in out.stdout
        sh = run_in(rs, ["sh", "-c", f"echo new > {tree}/rw/made.txt && mkdir {tree}/rw/d && mv {tree}/rw/made.txt "
                                     f"{tree}/rw/d/ && cat {tree}/rw/d/made.txt"])
        assert sh.returncode == 0 and sh.stdout == "new\n", sh.stderr
        for attack in (f"echo x > {tree}/ro/kept.txt", f"echo x >> {tree}/ro/kept.txt", f"rm -f {tree}/ro/kept.txt",
                       f"mv {tree}/ro/kept.txt {tree}/rw/", f"ln {tree}/ro/kept.txt {tree}/rw/link",
                       f"echo x > {tree}/beside.txt", f"truncate -s 0 {tree}/ro/kept.txt", f"ln {tree}/canary.txt "
                       f"{tree}/rw/c2", f"cp {tree}/canary.txt {tree}/rw/c3"):
            assert run_in(rs, ["sh", "-c", attack]).returncode != 0, attack
    assert (tree / "ro" / "kept.txt").read_text() == "kept\n"
    assert (tree / "canary.txt").read_text() == "secret\n"
    assert sorted(os.listdir(tree)) == ["canary.txt", "ro", "rw"]
    assert sorted(os.listdir(tree / "rw")) == ["d"]


def test_a_symlink_in_a_write_root_leads_nowhere_new(tree) -> None:
    os.symlink(tree / "canary.txt", tree / "rw" / "link")
    with walled(tree) as rs:
        out = run_in(rs, ["sh", "-c", f"cat {tree}/rw/link; echo x > {tree}/rw/link"])
    assert "secret" not in out.stdout and out.returncode != 0
    assert (tree / "canary.txt").read_text() == "secret\n"


def test_a_listing_beside_the_roots_is_refused(tree) -> None:
    with walled(tree) as rs:
        out = run_in(rs, ["ls", str(tree)])
    assert out.returncode != 0 and "canary" not in out.stdout


@needs_python
@pytest.mark.skipif(landlock.abi() < 4, reason="TCP rules come with Landlock ABI 4")
def test_no_tcp_without_the_network_and_tcp_with_it(tree) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')"
    try:
        with walled(tree) as rs:
            out = run_in(rs, [PYTHON, "-I", "-S", "-c", code])
            assert out.returncode != 0 and "connected" not in out.stdout and "Permission denied" in out.stderr
            bind = run_in(rs, [PYTHON, "-I", "-S", "-c", "import socket; socket.socket().bind(('127.0.0.1', 0))"])
            assert bind.returncode != 0 and "Permission denied" in bind.stderr
        with walled(tree, network=True) as rs:
            assert run_in(rs, [PYTHON, "-I", "-S", "-c", code]).stdout == "connected\n"
    finally:
        server.close()


@needs_python
@pytest.mark.skipif(landlock.abi() < 6, reason="scoping comes with Landlock ABI 6")
def test_abstract_unix_sockets_and_signals_stay_inside(tree) -> None:
    server = socket.socket(socket.AF_UNIX)
    name = f"\0dal-landlock-test-{os.getpid()}"
    server.bind(name)
    server.listen(1)
    victim = subprocess.Popen(["sleep", "30"])
    try:
        code = f"import socket; socket.socket(socket.AF_UNIX).connect({name!r}); print('connected')"
        with walled(tree) as rs:
            out = run_in(rs, [PYTHON, "-I", "-S", "-c", code])
            assert out.returncode != 0 and "connected" not in out.stdout
            assert run_in(rs, ["kill", "-TERM", str(victim.pid)]).returncode != 0
            # its own children are inside: those it may signal
            assert run_in(rs, ["sh", "-c", "sleep 30 & kill -TERM $! && wait $!; echo $?"]).stdout == "143\n"
        assert victim.poll() is None
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        server.close()


def test_a_symlink_named_where_a_folder_is_expected_is_refused(tree) -> None:
    os.symlink(tree, tree / "rw" / "up")
    with landlock.Ruleset() as rs:
        with pytest.raises(landlock.LandlockError, match="symbolic link"):
            rs.allow(str(tree / "rw" / "up"), landlock.READ, follow=False)
        assert rs.allow(str(tree / "missing"), landlock.READ) is False


def test_a_rule_on_a_file_keeps_only_a_file_s_rights(tree) -> None:
    with landlock.Ruleset() as rs:
        for d in SYSTEM:
            rs.allow(d, landlock.READ | landlock.EXECUTE)
        rs.allow(str(tree / "ro" / "given.txt"), landlock.WRITE_ALL)  # MAKE_* dropped: the kernel would refuse them
        out = run_in(rs, ["sh", "-c", f"echo more >> {tree}/ro/given.txt; cat {tree}/ro/given.txt; "
                                      f"cat {tree}/ro/kept.txt"])
    assert out.stdout == "given\nmore\n" and "Permission denied" in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="capabilities are root's here")
def test_root_keeps_no_capability_inside(tree) -> None:
    (tree / "rw" / "mine").write_text("x")
    with walled(tree) as rs:
        out = run_in(rs, ["sh", "-c", f"chown 65534 {tree}/rw/mine || echo refused; "
                                      f"cat {tree}/canary.txt || echo unread"])
    assert out.stdout == "refused\nunread\n" and os.stat(tree / "rw" / "mine").st_uid == 0
