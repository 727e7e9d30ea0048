"""The console's walls, before any page: the Host allowlist (DNS rebinding), the Origin check on every
request that changes something (cross-site forms), the one-time login token and the sessions it opens, the
CSRF token every form carries, and the headers every answer carries (a strict Content-Security-Policy
with `frame-ancestors 'none'`: the console cannot be framed, so Approve cannot be clickjacked).

Refusals and their statuses (docs/console.md): a Host not in the allowlist 400; a POST without our Origin
(or, failing that, Referer) 403; no session 401; a form without the session's CSRF token 403.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

COOKIE = "dal_console"
SAFE_METHODS = ("GET", "HEAD")
SESSION_IDLE = 12 * 3600.0  # a session nobody used for this long is closed

# No script at all, styles from our own stylesheet only, forms only to ourselves, never framed.
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode("ascii")),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make a form post say `Origin: null`
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


WILDCARDS = ("0.0.0.0", "::")


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The Host headers the console answers: the address it listens on with its port (and `localhost`
    for the loopback address; for a wildcard address, this machine's names and the loopback names). A
    name an attacker's DNS points at this machine is not among them."""
    import socket

    names = {host}
    if host in ("127.0.0.1", "::1") or host in WILDCARDS:
        names |= {"127.0.0.1", "localhost", "::1"}
    if host in WILDCARDS:
        names |= {socket.gethostname(), socket.getfqdn()}
    out = set()
    for n in names:
        n = f"[{n}]" if ":" in n and not n.startswith("[") else n
        out.add(f"{n}:{port}".lower())
    return frozenset(out)


class Session:
    """One browser's session: its CSRF token and a short label that names it in receipts."""

    __slots__ = ("sid", "csrf", "label", "client", "opened", "used")

    def __init__(self, client: str) -> None:
        self.sid = secrets.token_urlsafe(32)
        self.csrf = secrets.token_urlsafe(32)
        self.label = secrets.token_hex(3)  # not secret: it is written into receipts
        self.client = client
        self.opened = self.used = time.monotonic()


class Sessions:
    """The login token (usable once) and the sessions it opened, kept in the server's memory: a restart
    of `dal console` closes every session and prints a new token. The operator mints a new token with
    `mint()` (Enter in the console's terminal, or SIGUSR1): at most one is unused at any time, so minting
    one spends the one before it."""

    def __init__(self, token: str | None = None) -> None:
        self._token: str | None = token or secrets.token_urlsafe(32)
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @property
    def token(self) -> str | None:
        """The login token, until it is used."""
        return self._token

    def mint(self) -> str:
        """A new login token, usable once; the unused one before it (if any) no longer works."""
        with self._lock:
            self._token = secrets.token_urlsafe(32)
            return self._token

    def login(self, given: str, client: str) -> Session | None:
        """A new session for the one right token, which is then spent; None for any other."""
        with self._lock:
            if self._token is None or not hmac.compare_digest(given.encode(), self._token.encode()):
                return None
            self._token = None
            s = Session(client)
            self._sessions[s.sid] = s
            return s

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            s = self._sessions.get(sid)
            if s is None:
                return None
            now = time.monotonic()
            if now - s.used > SESSION_IDLE:
                del self._sessions[sid]
                return None
            s.used = now
            return s

    def logout(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)


def csrf_ok(session: Session, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), session.csrf.encode())


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers") or ():
        if k == name:
            return v.decode("latin-1")
    return None


class Guard:
    """ASGI middleware: Host allowlist and Origin check before the app; security headers on every answer."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = frozenset(f"http://{h}" for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        host = (_header(scope, b"host") or "").lower()
        if host not in self.hosts:
            await _plain(send_with_headers, 400, "wrong Host header: the console answers only at the address "
                         "`dal console` printed")
            return
        if scope["method"] not in SAFE_METHODS and not self._same_origin(scope):
            await _plain(send_with_headers, 403, "refused: this request did not come from the console's own page "
                         "(Origin check)")
            return
        await self.app(scope, receive, send_with_headers)

    def _same_origin(self, scope: Scope) -> bool:
        origin = _header(scope, b"origin")
        if origin is not None:
            return origin.lower() in self.origins
        referer = _header(scope, b"referer")  # a browser that sends no Origin still names the page
        return referer is not None and any(referer.lower().startswith(o + "/") for o in self.origins)


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
