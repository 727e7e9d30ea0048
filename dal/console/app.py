"""The console's pages and its one form action, as a Starlette app (security.py guards it).

Pages read the store read-only, one connection per request; the decision form opens it for writing and
goes through `dal.runner.decisions.decide`, the code path `dal approve`, `dal deny` and `dal resolve`
use, after checking that the journal still shows what the page showed (views.shown_hash; 409 if not).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from dal.console import views
from dal.console.security import COOKIE, Guard, Session, Sessions, allowed_hosts, csrf_ok
from dal.console.urls import run_path
from dal.core.visible import visible
from dal.receipts.location import StoreLocation, open_store
from dal.receipts.store import NoStore, RunNotFound, StoreError

HERE = Path(__file__).parent
MAX_FORM = 64 * 1024  # a decision form is a few hundred bytes; a note is capped below
MAX_NOTE = 2000


def _shown_text(value: Any) -> Any:
    """Every value a template prints: what a script or a program wrote is shown with its control
    characters as escapes (a bidi override cannot reorder the command a person approves), then escaped
    as HTML by autoescape. Markup (a macro's output, already built from finalized values) is left alone."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value, lines=True)
    return value


class Console:
    """What the app needs: the store's location, the sessions, who decides (the name receipts record)."""

    def __init__(self, location: StoreLocation, sessions: Sessions, *, name: str, host: str, port: int) -> None:
        self.location = location
        self.sessions = sessions
        self.name = name
        self.host = host
        self.port = port
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                               trim_blocks=True, lstrip_blocks=True, finalize=_shown_text)
        self.env.globals["run_path"] = run_path
        self.env.filters["oneline"] = visible  # a command: newlines shown as \n too
        self.env.filters["said"] = views.said
        self.env.globals["said_parts"] = lambda d: views.SAID.get(d, (d, ""))
        self.css = (HERE / "static" / "console.css").read_bytes()

    @contextmanager
    def store(self, *, write: bool = False) -> Iterator[Any]:
        # A decision needs a run to decide: a workspace without a store gets none made by a POST.
        if write and self.location.kind != "postgresql" and not self.location.file.exists():
            raise NoStore(f"no run store at {self.location.shown} yet", self.location.file)
        s = open_store(self.location, readonly=not write)
        try:
            yield s
        finally:
            s.close()

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        session = request.scope.get("dal.session")
        body = self.env.get_template(name).render(csrf=session.csrf if session else "", store=self.location.shown,
                                                  nav=name.removesuffix(".html"), **context)
        return HTMLResponse(body, status)

    def who(self, session: Session, request: Request) -> str:
        client = request.client.host if request.client else "?"
        return f"{self.name} (console session {session.label} from {client})"


def _authed(console: Console, fn: Callable[[Console, Request], Any]) -> Callable[[Request], Any]:
    """An endpoint that needs a session (401 without one)."""

    def endpoint(request: Request) -> Any:
        session = console.sessions.get(request.cookies.get(COOKIE))
        if session is None:
            return console.page(request, "login.html", 401, used=console.sessions.token is None)
        request.scope["dal.session"] = session
        try:
            return fn(console, request)
        except NoStore:
            return console.page(request, "empty.html", 200)
        except StoreError as e:
            return console.page(request, "message.html", 503, title="The store cannot be read", message=str(e))

    return endpoint


def login(console: Console, request: Request) -> Response:
    client = request.client.host if request.client else "?"
    session = console.sessions.login(request.query_params.get("token") or "", client)
    if session is None:
        return console.page(request, "login.html", 403, used=console.sessions.token is None, wrong=True)
    # 303 to a page without the token: it leaves the address bar and the history.
    r = RedirectResponse("/waiting", 303)
    r.set_cookie(COOKIE, session.sid, httponly=True, samesite="strict", path="/")
    return r


def logout(console: Console, request: Request) -> Response:
    session = request.scope["dal.session"]
    form = _form_or_none(request)
    if form is None or not csrf_ok(session, form.get("csrf")):
        return console.page(request, "message.html", 403, title="Refused", message="the form's CSRF token is missing "
                            "or wrong; reload the page")
    console.sessions.logout(session.sid)
    r = console.page(request, "message.html", 200, title="Logged out", message="This session is closed.")
    r.delete_cookie(COOKIE, path="/")
    return r


def waiting(console: Console, request: Request) -> Response:
    with console.store() as store:
        listing = views.waiting(store)
    return console.page(request, "waiting.html", items=listing["items"], total=listing["total"],
                        handed=listing["handed"])


def blocked(console: Console, request: Request) -> Response:
    with console.store() as store:
        items = views.blocked(store)
    return console.page(request, "blocked.html", items=items)


def queue(console: Console, request: Request) -> Response:
    with console.store() as store:
        q = views.queue(store)
    return console.page(request, "queue.html", q=q)


def runs(console: Console, request: Request) -> Response:
    qp = request.query_params
    filters = {k: (qp.get(k) or "").strip() or None for k in ("status", "retry", "operation", "key")}
    bad = [f"{k} {v!r}" for k, v, allowed in (("status", filters["status"], views.STATUSES),
                                               ("retry", filters["retry"], views.RETRY_CLASSES))
           if v is not None and v not in allowed]
    if bad:
        return console.page(request, "message.html", 400, title="Unknown filter", message="unknown " + ", ".join(bad))
    with console.store() as store:
        listing = views.runs(store, **filters)
    return console.page(request, "runs.html", listing=listing, filters=filters, statuses=views.STATUSES,
                        retries=views.RETRY_CLASSES)


def run(console: Console, request: Request) -> Response:
    ref = request.path_params["run_id"]
    with console.store() as store:
        try:
            page = views.run_page(store, ref)
        except RunNotFound as e:
            return console.page(request, "message.html", 404, title="No such run", message=str(e))
    return console.page(request, "run.html", p=page)


def _form_or_none(request: Request) -> dict[str, str] | None:
    body = request.scope.get("dal.body")
    if body is None or len(body) > MAX_FORM:
        return None
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return None
    return {k: v[0] for k, v in parsed.items() if v}


def decide(console: Console, request: Request) -> Response:
    from dal.runner.decisions import DecisionRefused
    from dal.runner.decisions import decide as record

    session: Session = request.scope["dal.session"]
    form = _form_or_none(request)
    if form is None:
        return console.page(request, "message.html", 400, title="Bad form", message="the form could not be read")
    if not csrf_ok(session, form.get("csrf")):
        return console.page(request, "message.html", 403, title="Refused",
                            message="the form's CSRF token is missing or wrong: nothing was recorded; reload the "
                            "page and decide again")
    rid, decision, shown = form.get("run", ""), form.get("decision", ""), form.get("shown", "")
    note = (form.get("note") or "").strip()[:MAX_NOTE] or None
    try:
        seq = int(form.get("effect", ""))
    except ValueError:
        seq = -1
    kind = views.KIND_OF.get(decision)
    if not rid or seq < 1 or kind is None or not shown:
        return console.page(request, "message.html", 400, title="Bad form",
                            message="the form must name a run, an effect number, a decision and what it showed")
    with console.store(write=True) as store:
        now = views.held_for(store, rid, seq, kind)
        if now is None or now["hash"] != shown:
            return console.page(
                request, "message.html", 409, title="The journal changed",
                message=f"effect {seq} of run {rid} is not what this page showed any more (a resume ran, someone "
                "else decided, or the operation moved on): nothing was recorded. Reload the run's page and "
                "decide again.", link=run_path(rid))
        try:
            done = record(store, rid, decision, effect=seq, note=note, who=console.who(session, request))
        except DecisionRefused as e:
            return console.page(request, "message.html", 409, title="Refused", message=str(e), link=run_path(rid))
    return console.page(request, "decided.html", done=done, decision=decision, kind=kind)


def css(console: Console, request: Request) -> Response:
    return Response(console.css, media_type="text/css")


def root(console: Console, request: Request) -> Response:
    return RedirectResponse("/waiting", 303)


class _ReadBody:
    """Reads a POST body (bounded) before the sync endpoint runs, so that endpoint needs no event loop."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            chunks, size = [], 0
            while True:
                message = await receive()
                chunk = message.get("body", b"")
                size += len(chunk)
                if size <= MAX_FORM:
                    chunks.append(chunk)
                if not message.get("more_body"):
                    break
            scope["dal.body"] = b"".join(chunks) if size <= MAX_FORM else None
        await self.app(scope, receive, send)


def build_app(location: StoreLocation, sessions: Sessions, *, host: str, port: int, name: str) -> Any:
    """The console as an ASGI app, guarded (security.Guard) for the Host `host:port`."""
    console = Console(location, sessions, name=name, host=host, port=port)

    def plain(fn: Callable[[Console, Request], Any]) -> Callable[[Request], Any]:
        return lambda request: fn(console, request)

    routes = [
        Route("/", _authed(console, root)),
        Route("/login", plain(login)),
        Route("/logout", _authed(console, logout), methods=["POST"]),
        Route("/waiting", _authed(console, waiting)),
        Route("/blocked", _authed(console, blocked)),
        Route("/queue", _authed(console, queue)),
        Route("/runs", _authed(console, runs)),
        Route("/runs/{run_id:str}", _authed(console, run)),
        Route("/decide", _authed(console, decide), methods=["POST"]),
        Route("/static/console.css", plain(css)),
        Route("/favicon.ico", lambda request: Response(status_code=204)),  # no icon, and no 404 for it
    ]
    app = Starlette(routes=routes)
    return Guard(_ReadBody(app), allowed_hosts(host, port))
