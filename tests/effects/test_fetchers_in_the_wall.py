"""curl and wget led at what the wall must hold (globbed schemes, SOCKS sockets, names decoded or written
through a symlink, shorthand FTP globs): each attack runs through run_effect with the real
curl or wget next to canaries, inside the wall (which holds it: curl and wget have no option model, issue 27)
and where no wall can start (denied: no wall, no program); each is also run once without DAL, so that the
test proves the program really does what the wall must hold."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from effects_workspace import CANARY, serve_folder

from dal.effects import EffectContext, Policy, run_effect, sandbox_status

HAVE_BWRAP = sandbox_status()[0]
curl_only = pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
wget_only = pytest.mark.skipif(shutil.which("wget") is None, reason="wget not installed")
WALLS = [pytest.param(True, id="wall", marks=pytest.mark.skipif(not HAVE_BWRAP, reason="no bubblewrap")),
         pytest.param(False, id="nowall")]
POLICY_TOML = '[run]\nallow = ["sh"]\n'


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "sub").mkdir()
    (ws / "payload.txt").write_text("payload-from-script\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "canary.txt").write_text(CANARY)
    return ws


def _ctx(ws: Path, wall: bool, monkeypatch: pytest.MonkeyPatch) -> EffectContext:
    """Inside the wall, or (wall False) where none can start: DAL_WALL=none, as on a host without one."""
    if wall:
        monkeypatch.delenv("DAL_WALL", raising=False)
    else:
        monkeypatch.setenv("DAL_WALL", "none")
    return EffectContext(policy=Policy.load(ws, allow_run=["curl", "wget"], allow_net=True),
                         unsandboxed_as_root=True)


def _bare(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    """The command without DAL: what the real program does."""
    return subprocess.run(shlex.split(cmd), cwd=cwd, capture_output=True, timeout=20, stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LC_ALL": "C.UTF-8"})


def _held(cmd: str, ctx: EffectContext, wall: bool) -> None:
    """Without a wall the command is denied; inside one it runs, and the test's canaries say what held."""
    r = run_effect(cmd, ctx)
    assert (r.status == "denied") != wall and CANARY not in r.stdout, (cmd, r)


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[str]:
    """A local HTTP server whose names decode, one way or another, to dal.toml (and a canary text)."""
    site = tmp_path / "site"
    (site / "d").mkdir(parents=True)
    for name in ("+AGQ-al.toml", "%64al.toml", "dal.toml", "canary.txt", "d/a.txt"):
        (site / name).write_text(POLICY_TOML if "al.toml" in name else "served\n")
    with serve_folder(site) as url:
        yield url.rsplit(":", 1)[1]


# --- 01: curl URL globs in the scheme ---------------------------------------------------------------------


@curl_only
@pytest.mark.parametrize("wall", WALLS)
def test_curl_glob_before_the_scheme_cannot_read_or_write_a_file_url(ws: Path, wall: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    canary = ws.parent / "outside" / "canary.txt"
    reads = [f"curl -s '{{file,x}}://{canary}'", f"curl -s '[e-f]ile://{canary}'", f"curl -s '{{file:,x}}/{canary}'",
             f"curl -s 'fi{{le,x}}://{canary}'"]
    assert CANARY.encode() in _bare(reads[0], ws).stdout  # curl does expand the glob into a file: URL
    ctx = _ctx(ws, wall, monkeypatch)
    for cmd in reads:
        _held(cmd, ctx, wall)
    _held(f"curl -s -T payload.txt '{{file,x}}://{canary}'", ctx, wall)
    assert canary.read_text() == CANARY
    r = run_effect(f"curl -s -g 'file://{ws}/payload.txt' -o sub/copy", ctx)  # a plain file: URL still runs
    assert r.ok == wall, r.stderr
    assert (ws / "sub" / "copy").exists() == wall


# --- 10: curl SOCKS proxies through a unix socket ----------------------------------------------------------


@curl_only
@pytest.mark.parametrize("wall", WALLS)
def test_curl_socks_proxy_cannot_reach_a_unix_socket_outside_the_roots(ws: Path, wall: bool,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    sock_path = ws.parent / "outside" / "svc.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_path))
    listener.listen(16)
    listener.settimeout(0.3)

    def connections() -> int:
        n = 0
        while True:
            try:
                listener.accept()[0].close()
            except TimeoutError:
                return n
            n += 1

    try:
        _bare(f"curl -s -m 2 --socks5 localhost{sock_path} http://x/", ws)
        assert connections() == 1  # curl does take localhost/PATH as a socket
        ctx = _ctx(ws, wall, monkeypatch)
        for cmd in (f"curl -s -m 2 -x socks5h://localhost:1080{sock_path} http://x/",
                    f"curl -s -m 2 -x SOCKS5H://u:p@LocalHost{sock_path} http://x/",
                    f"curl -s -m 2 -x socks5h://%6cocalhost{sock_path} http://x/",
                    f"curl -s -m 2 --socks5-hostname localhost:9{sock_path} http://x/",
                    f"curl -s -m 2 --socks4a localhost{sock_path} http://x/",
                    f"curl -s -m 2 --proxy1.0 socks5h://localhost{sock_path} http://x/",
                    f"curl -s -m 2 --preproxy socks5://localhost{sock_path} -x http://p:1/ http://x/"):
            _held(cmd, ctx, wall)
        assert connections() == 0
    finally:
        listener.close()


# --- 02 and the file-name decoding siblings: wget names that become dal.toml ----------------------------------


@wget_only
@pytest.mark.parametrize("wall", WALLS)
def test_wget_cannot_decode_a_name_into_a_policy_file(ws: Path, server: str, wall: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{server}"
    attacks = [
        f"wget -q -P sub -e remoteencoding=UTF-7 {url}/+AGQ-al.toml",  # UTF-7 +AGQ- is d
        f"wget -q -P sub -e remote_encoding=UTF-7 {url}/+AGQ-al.toml",
        f"wget -q -P sub -e LocalEncoding=UTF-7 {url}/+AGQ-al.toml",
        f"wget -q -P sub {url}/%2564al.toml",  # wget unescapes a file name twice
        f"wget -q -P sub --default-page=%64al.toml {url}/d/",  # and the default page once
    ]
    scratch = ws.parent / "scratch"
    scratch.mkdir()
    for cmd in (attacks[0], attacks[3], attacks[4]):
        _bare(cmd.replace("-P sub", "-P scratch"), ws.parent)
        assert (scratch / "dal.toml").exists(), cmd  # wget does save dal.toml
        (scratch / "dal.toml").unlink()
    ctx = _ctx(ws, wall, monkeypatch)
    for cmd in attacks:
        _held(cmd, ctx, wall)
    assert sorted(os.listdir(ws / "sub")) == []
    r = run_effect(f"wget -q -P sub -e robots=off -e tries=2 {url}/d/a.txt", ctx)
    assert r.ok == wall, r.stderr
    assert (ws / "sub" / "a.txt").exists() == wall


@wget_only
@pytest.mark.parametrize("wall", WALLS)
def test_wget_names_it_writes_through_a_symlink_are_the_ones_checked(ws: Path, server: str, wall: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """03 (-x lowercases the host, drops the user) and siblings: -x after -nd, the empty query kept in the
    name (`a.txt?`; -x makes wget write over an existing name). Each writes through a symlink to the canary
    that the model, before, did not name."""
    canary = ws.parent / "outside" / "canary.txt"
    (ws / f"localhost:{server}").symlink_to("../outside")
    (ws / "a.txt?").symlink_to("../outside/canary.txt")
    attacks = [f"wget -q -x http://LOCALHOST:{server}/canary.txt",
               f"wget -q -x http://someone@Localhost:{server}/canary.txt",
               f"wget -q -nd -x http://localhost:{server}/canary.txt",
               f"wget -q -x -nH --cut-dirs=1 'http://127.0.0.1:{server}/d/a.txt?'",
               f"wget -q -x http://%6Cocalhost:{server}/canary.txt"]
    bare = ws.parent / "bare"
    shutil.copytree(ws, bare, symlinks=True)
    for cmd in attacks[:5]:
        _bare(cmd, bare)
        assert canary.read_text() == "served\n", cmd  # wget does write through the link
        canary.write_text(CANARY)
    ctx = _ctx(ws, wall, monkeypatch)
    for cmd in attacks:
        _held(cmd, ctx, wall)
    assert canary.read_text() == CANARY
    r = run_effect(f"wget -q -x -P sub http://LOCALHOST:{server}/d/a.txt", ctx)
    assert r.ok == wall, r.stderr
    assert (ws / "sub" / f"localhost:{server}" / "d" / "a.txt").exists() == wall


# --- 06: wget's shorthand HOST:PATH is an FTP URL ----------------------------------------------------------


def _ftp_session(conn: socket.socket, folder: Path) -> None:
    """Just enough FTP for wget: login, passive mode, LIST and RETR of the files in `folder`."""
    lines = conn.makefile("rb")
    conn.sendall(b"220 ready\r\n")
    data = None
    for raw in lines:
        cmd, _, arg = raw.decode().strip().partition(" ")
        cmd = cmd.upper()
        if cmd in ("LIST", "NLST", "RETR") and data is not None:
            conn.sendall(b"150 data\r\n")
            d = data.accept()[0]
            if cmd == "RETR":
                d.sendall((folder / os.path.basename(arg)).read_bytes())
            else:
                for p in sorted(folder.iterdir()):
                    d.sendall(f"-rw-r--r--   1 ftp ftp {p.stat().st_size:>8} Jan 01 00:00 {p.name}\r\n".encode())
            d.close()
            data.close()
            reply = "226 done"
        elif cmd == "PASV":
            data = socket.create_server(("127.0.0.1", 0))
            port = data.getsockname()[1]
            reply = f"227 Entering Passive Mode (127,0,0,1,{port >> 8},{port & 255})"
        else:
            reply = {"USER": "331 ok", "PASS": "230 ok", "SYST": "215 UNIX Type: L8", "PWD": '257 "/"',
                     "CWD": "250 ok", "TYPE": "200 ok", "QUIT": "221 bye"}.get(cmd, "502 no")
        conn.sendall(reply.encode() + b"\r\n")
        if cmd == "QUIT":
            break
    conn.close()


@pytest.fixture()
def ftp21(tmp_path: Path) -> Iterator[None]:
    """An FTP server on 127.0.0.1:21 (wget's shorthand has no port), serving a dal.toml; skipped when the port
    is taken or not ours to bind."""
    folder = tmp_path / "ftp"
    folder.mkdir()
    (folder / "dal.toml").write_text(POLICY_TOML)
    try:
        srv = socket.create_server(("127.0.0.1", 21))
    except OSError as e:
        pytest.skip(f"cannot serve FTP on port 21: {e}")

    def loop() -> None:
        while True:
            try:
                conn = srv.accept()[0]
            except OSError:
                return
            threading.Thread(target=_ftp_session, args=(conn, folder), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    try:
        yield
    finally:
        srv.shutdown(socket.SHUT_RDWR)  # wakes the accept() above, so the port is free at once
        srv.close()


@wget_only
def test_wget_shorthand_host_colon_path_is_an_ftp_glob(ws: Path, ftp21: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """One test for both modes (one server on port 21, which two test workers cannot share)."""
    scratch = ws.parent / "scratch"
    scratch.mkdir()
    _bare("wget -q -P scratch 'localhost:x/*'", ws.parent)
    assert (scratch / "dal.toml").read_text() == POLICY_TOML  # wget fetched the listing's dal.toml over FTP
    for wall in (True, False) if HAVE_BWRAP else (False,):
        ctx = _ctx(ws, wall, monkeypatch)
        for cmd in ("wget -q -P sub 'localhost:x/*'", "wget -q -P sub 'localhost:x/'", "wget -q -P sub localhost:",
                    "wget -q -P sub 'LOCALHOST:x/da?.toml'", "wget -q -O sub/out 'localhost:x/*'"):
            _held(cmd, ctx, wall)
        # The listing and pages may land (the wall's write root); the policy file the server names does not.
        assert not [p for p in (ws / "sub").rglob("*") if p.name == "dal.toml"]
        assert not wall or (ws / "sub" / "out").exists()
