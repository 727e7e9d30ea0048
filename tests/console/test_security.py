"""The console's walls, attacked with a plain HTTP client against a live `dal console`: every refusal has
its status and records nothing (the store's decisions are counted after each attack); the one form that
passes every wall records its decision through the CLI's code path, naming the console session."""

from __future__ import annotations

import re

import pytest
from console_helpers import SEND, Server, Workspace, form_of, login, request, start_console


@pytest.fixture
def waiting_send(workspace: Workspace) -> str:
    workspace.write("send.dal", SEND)
    r = workspace.dal("run", "--key", "send", "--require-approval=tee", "send.dal")
    assert r.code == 3, r.err  # waiting for approval
    return workspace.waiting_run("send")


def test_every_wall_refuses_with_its_status_and_records_nothing(workspace: Workspace, waiting_send: str,
                                                                 console: Server) -> None:
    rid, w = waiting_send, workspace

    # No session: every page and the form action say 401.
    for path in ("/waiting", "/runs", f"/runs/{rid}", "/queue", "/blocked"):
        r, text = request(console, "GET", path)
        assert r.status == 401 and "Log in" in text, path
    r, _ = request(console, "POST", "/decide", body={"run": rid, "effect": "2", "decision": "approved"})
    assert r.status == 401
    # A wrong token opens nothing (and does not spend the right one).
    r, _ = request(console, "GET", "/login?token=" + "A" * 43, origin=None)
    assert r.status == 403 and r.getheader("Set-Cookie") is None

    cookie = login(console)
    r, page = request(console, "GET", "/waiting", cookie=cookie)
    assert r.status == 200 and "echo report | tee -a outbox.txt" in page
    csp = r.getheader("Content-Security-Policy") or ""
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp and "script-src" not in csp
    assert r.getheader("X-Frame-Options") == "DENY"
    fields = form_of(page, rid, 2)
    good = {**fields, "decision": "approved", "note": "checked the recipients"}

    # The token works once: a second login with it (someone who read it over a shoulder) is refused.
    r, _ = request(console, "GET", f"/login?token={console.token}", origin=None)
    assert r.status == 403 and r.getheader("Set-Cookie") is None

    # DNS rebinding: a page at evil.example (resolved to 127.0.0.1) reaches us with its own Host.
    for host in ("evil.example", f"evil.example:{console.port}", f"127.0.0.1:{console.port + 1}"):
        r, _ = request(console, "GET", "/waiting", cookie=cookie, host=host)
        assert r.status == 400, host
        r, _ = request(console, "POST", "/decide", cookie=cookie, host=host, body=good)
        assert r.status == 400, host

    # A cross-origin form post (the browser would attach no Strict cookie, but a client can): 403.
    r, _ = request(console, "POST", "/decide", cookie=cookie, origin="http://evil.example", body=good)
    assert r.status == 403
    r, _ = request(console, "POST", "/decide", cookie=cookie, origin=None, body=good)  # neither Origin nor Referer
    assert r.status == 403
    r, _ = request(console, "POST", "/decide", cookie=cookie, origin=None, body=good,
                   headers={"Referer": "http://evil.example/x"})
    assert r.status == 403

    # The CSRF token: missing, or another one.
    r, _ = request(console, "POST", "/decide", cookie=cookie, body={k: v for k, v in good.items() if k != "csrf"})
    assert r.status == 403
    r, _ = request(console, "POST", "/decide", cookie=cookie, body={**good, "csrf": "x" * 43})
    assert r.status == 403
    # A made-up session cookie is no session.
    r, _ = request(console, "POST", "/decide", cookie="y" * 43, body=good)
    assert r.status == 401
    assert w.approvals(rid) == []  # nothing above recorded anything

    # A form for another effect number than the page showed, or with a forged hash: 409.
    r, _ = request(console, "POST", "/decide", cookie=cookie, body={**good, "effect": "1"})
    assert r.status == 409
    r, _ = request(console, "POST", "/decide", cookie=cookie, body={**good, "shown": "0" * 32})
    assert r.status == 409
    assert w.approvals(rid) == []

    # Stale: someone decided at the terminal after the page was shown. The form no longer matches the
    # journal: 409, and the terminal's decision stands alone.
    r2 = w.dal("deny", rid, "--note", "not this week")
    assert r2.code == 0, r2.err
    r, text = request(console, "POST", "/decide", cookie=cookie, body=good)
    assert r.status == 409 and "nothing was recorded" in text
    assert [a["decision"] for a in w.approvals(rid)] == ["denied"]

    # A fresh page shows the terminal's decision and carries a new hash: that one is recorded, through
    # the CLI's path (it replaces the earlier decision), naming the console session and the address.
    r, page = request(console, "GET", "/waiting", cookie=cookie)
    assert "denied by" in page and "not this week" in page
    fresh = {**form_of(page, rid, 2), "decision": "approved", "note": "checked the recipients"}
    assert fresh["shown"] != good["shown"]
    r, text = request(console, "POST", "/decide", cookie=cookie, body=fresh)
    assert r.status == 200, text
    assert "replaces the earlier decision" in text and "dal resume" in text
    got = w.approvals(rid)
    assert [a["decision"] for a in got] == ["denied", "approved"]
    assert re.fullmatch(r"ana \(console session [0-9a-f]{6} from 127\.0\.0\.1\)", got[-1]["who"]), got[-1]["who"]
    assert got[-1]["note"] == "checked the recipients"
    shown = w.dal("receipt", "show", rid)
    assert "approved by ana (console session" in shown.out and "from 127.0.0.1" in shown.out, shown.out

    # The same form sent again (a browser's resubmit) no longer matches: 409, nothing added.
    r, _ = request(console, "POST", "/decide", cookie=cookie, body=fresh)
    assert r.status == 409
    assert len(w.approvals(rid)) == 2
    assert w.lines("outbox.txt") == []  # the console decides; it never runs the effect


def test_a_script_cannot_put_markup_or_bidi_tricks_on_the_page(workspace: Workspace, console: Server) -> None:
    """The command a person approves is the script's text: shown escaped, never played as HTML, and its
    control characters (a right-to-left override that reorders what is read) shown as escapes."""
    w = workspace
    w.write("evil.dal", 'run("echo \'<script>alert(1)</script>\u202e\' | tee -a outbox.txt")\n')
    assert w.dal("run", "--key", "evil", "--require-approval=tee", "evil.dal").code == 3
    cookie = login(console)
    r, page = request(console, "GET", "/waiting", cookie=cookie)
    assert r.status == 200
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\u202e" not in page and "\\u202e" in page
    rid = w.waiting_run("evil")
    r, page = request(console, "GET", f"/runs/{rid}", cookie=cookie)
    assert r.status == 200 and "<script>" not in page and "\u202e" not in page


def test_loopback_only_unless_asked_and_then_a_warning(workspace: Workspace) -> None:
    from console_helpers import console_deps_or_skip

    console_deps_or_skip()
    server = start_console(workspace)
    try:
        assert server.base.startswith("http://127.0.0.1:")
    finally:
        server.stop()
    import socket

    server = start_console(workspace, "--host", "0.0.0.0")
    try:
        name = socket.gethostname()
        assert server.base == f"http://{name}:{server.port}"
        assert "warning: listening on 0.0.0.0, not only this machine" in server.stderr()
        # This machine's names are the Hosts it answers; a name someone else's DNS points here is not.
        r, _ = request(server, "GET", "/waiting", host=f"evil.example:{server.port}")
        assert r.status == 400
        r, _ = request(server, "GET", "/waiting", host=f"{name}:{server.port}")
        assert r.status == 401
    finally:
        server.stop()


def test_no_console_extra_is_a_clear_error_not_a_traceback(workspace: Workspace, tmp_path) -> None:
    """Without Starlette (the extra not installed), `dal console` names the extra to install."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "starlette.py").write_text("raise ImportError('blocked for the test', name='starlette')\n")
    import os

    r = workspace.dal("console", PYTHONPATH=f"{blocker}{os.pathsep}{workspace.env()['PYTHONPATH']}", timeout=30)
    from dal.core.extras import install_hint

    assert r.code == 2 and install_hint("console") in r.err and "Traceback" not in r.err, r.err


def test_the_operator_mints_a_new_one_time_link_without_a_restart(workspace: Workspace, console: Server) -> None:
    first = login(console)
    fresh = console.new_link("enter")  # Enter in the console's terminal
    assert fresh != console.token
    r, _ = request(console, "GET", f"/login?token={console.token}", origin=None)
    assert r.status == 403  # the first link stays spent
    r, _ = request(console, "GET", f"/login?token={fresh}", origin=None)
    assert r.status == 303 and r.getheader("Set-Cookie")
    r, _ = request(console, "GET", f"/login?token={fresh}", origin=None)
    assert r.status == 403  # and the new one works once too
    unused = console.new_link("signal")  # kill -USR1 PID, for a console with no terminal
    newest = console.new_link("signal")
    r, _ = request(console, "GET", f"/login?token={unused}", origin=None)
    assert r.status == 403  # a new link spends the unused one before it: one live link at most
    r, _ = request(console, "GET", f"/login?token={newest}", origin=None)
    assert r.status == 303
    r, page = request(console, "GET", "/waiting", cookie=first)
    assert r.status == 200  # the sessions opened before are untouched
