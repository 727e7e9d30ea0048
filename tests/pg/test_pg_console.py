"""The operator console over a PostgreSQL store (issue 19: it works on either store): the waiting page shows
the held send with its exact command, the run page shows its receipt, and the runs page filters by retry class
— through the whole app in this process (walls, session, routing), against a real server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.pg.world import World

pytest.importorskip("starlette", reason="the console's tests need the console extra (pip install '.[test]')")


async def _get(app: Any, path: str, cookie: str) -> tuple[int, str]:
    raw, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": raw, "raw_path": raw.encode(), "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", b"127.0.0.1:8470"), (b"cookie", f"dal_console={cookie}".encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8470)}
    status, body = 0, b""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, body
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body += message.get("body", b"")

    await app(scope, receive, send)
    return status, body.decode("utf-8")


def test_the_console_shows_a_held_send_from_a_postgresql_store(tmp_path: Path, pg_url: str) -> None:
    from dal.console.app import build_app
    from dal.console.security import Sessions
    from dal.receipts.location import StoreLocation

    w = World(tmp_path / "ws", pg_url)
    w.write("send.dal", 'run("printf \'report sent\\n\' | tee -a outbox.txt")\n')
    held = w.dal("run", "--key", "send-q3", "--require-approval=tee", "send.dal")
    assert held.returncode == 3, held.stderr
    failed = w.dal("run", "--key", "broken", w.write("broken.dal", 'fail("no input")\n').name)
    assert failed.returncode == 1, failed.stderr
    sessions = Sessions()
    app = build_app(StoreLocation.parse(pg_url, workspace=w.ws), sessions, host="127.0.0.1", port=8470,
                    name="test")
    session = sessions.login(sessions.token or "", "127.0.0.1")
    assert session is not None
    loop = asyncio.new_event_loop()
    try:
        status, page = loop.run_until_complete(_get(app, "/waiting", session.sid))
        assert status == 200 and "send-q3" in page
        assert "| tee -a outbox.txt" in page  # the exact command held
        status, page = loop.run_until_complete(_get(app, "/runs?retry=inspect", session.sid))
        assert status == 200 and "broken" in page and "send-q3" not in page
        with w.store() as store:
            rid = store.find_run("send-q3")["run_id"]
        status, page = loop.run_until_complete(_get(app, f"/runs/{rid}", session.sid))
        assert status == 200 and "waiting" in page and "outbox.txt" in page
    finally:
        loop.close()
    assert w.lines("outbox.txt") == []  # showing it sent nothing
