"""Helpers and fixtures for the console's tests (conftest.py imports the fixtures; a module of its own
name, because every test folder's conftest is the module `conftest`): a workspace whose policy classes
`tee` as external (a stand-in for a send), the `dal` command as real processes (`dal console`, `dal
worker`, `dal run`), a live console server started the way a person starts it with the one login URL it
prints, and a plain HTTP client for it."""

from __future__ import annotations

import html
import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.harness import REPO, SEND_POLICY, Files, Result, dal_env, make_workspace  # noqa: F401 - REPO: the console tests import it from here

CHROMIUM = "/usr/bin/chromium"

POLICY = SEND_POLICY

SEND = 'run("cat input.txt")\nrun("echo report | tee -a outbox.txt")\n'
APPEND = 'run("echo once >> app.txt")\n'


class Workspace(Files):
    """One workspace and its store, driven by real `dal` processes."""

    def __init__(self, ws: Path) -> None:
        self.ws = ws

    @property
    def db(self) -> Path:
        return self.ws / ".dal" / "dal.db"

    def env(self, **extra: str) -> dict[str, str]:
        return dal_env(extra, validate=True)

    def dal(self, *args: str, timeout: float = 60, **env: str) -> Result:
        p = subprocess.run([sys.executable, "-m", "dal", *args], cwd=self.ws, env=self.env(**env), text=True,
                           capture_output=True, timeout=timeout)
        return Result(p.returncode, p.stdout, p.stderr)

    def worker(self, *args: str, **env: str) -> Result:
        """`dal worker --until-idle ARGS`: runs what is ready, then stops."""
        r = self.dal("worker", "--until-idle", "--poll", "0.05", *args, timeout=120, **env)
        assert r.code == 0, r.out + r.err
        return r

    def jobs(self) -> dict[str, dict[str, Any]]:
        """The jobs by key."""
        from dal.receipts.jobs import JobQueue

        with JobQueue.open(self.db) as q:
            return {j["key"]: j for j in q.list(limit=None)}

    def approvals(self, run_id: str) -> list[dict[str, Any]]:
        from dal.receipts.store import Store

        with Store(self.db, readonly=True) as s:
            return s.approvals(run_id)

    def waiting_run(self, key: str) -> str:
        from dal.receipts.store import Store

        with Store(self.db, readonly=True) as s:
            return s.find_run(key)["run_id"]


class Server:
    """A `dal console` process and the URL it printed."""

    def __init__(self, proc: subprocess.Popen[str], base: str, token: str, err_path: Path) -> None:
        self.proc = proc
        self.base = base
        self.token = token
        self.err_path = err_path
        self.port = int(base.rsplit(":", 1)[1])

    @property
    def login_url(self) -> str:
        return f"{self.base}/login?token={self.token}"

    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8")

    def conn(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def new_link(self, how: str = "enter") -> str:
        """Ask the running console for a new login link, as the operator does (Enter in its terminal, or
        SIGUSR1), and return the token it prints."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if how == "enter":
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        else:
            self.proc.send_signal(signal.SIGUSR1)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            line = self.proc.stdout.readline()
            m = re.search(r"open http://\S+/login\?token=(\S+)", line)
            if m:
                return m.group(1)
            if not line:
                break
        raise AssertionError(f"dal console printed no new link:\n{self.stderr()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_console(w: Workspace, *args: str) -> Server:
    err_path = w.ws.parent / f"console-{time.monotonic_ns()}.err"
    err = open(err_path, "w", encoding="utf-8")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "dal", "console", "--as", "ana", *args], cwd=w.ws, env=w.env(),
                            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    end = time.monotonic() + 60
    seen = ""
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        m = re.search(r"open (http://\S+)/login\?token=(\S+)", line)
        if m:
            return Server(proc, m.group(1), m.group(2), err_path)
    proc.kill()
    raise AssertionError(f"dal console printed no login URL:\n{seen}\n{err_path.read_text()}")


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.delenv("DAL_STORE", raising=False)
    return Workspace(make_workspace(tmp_path / "ws", POLICY))


def console_deps_or_skip() -> None:
    """The console's server (the `console` extra, also in `test`); skipped without it, failed under CI=1."""
    import importlib.util

    missing = [m for m in ("starlette", "uvicorn", "jinja2") if importlib.util.find_spec(m) is None]
    if missing:
        why = f"the console tests need {', '.join(missing)} (pip install '.[test]')"
        if os.environ.get("CI") == "1":
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture
def console(workspace: Workspace) -> Iterator[Server]:
    console_deps_or_skip()
    server = start_console(workspace)
    yield server
    server.stop()


def chromium_or_skip() -> str:
    """The system's Chromium; the tests skip without one (and fail under CI=1, which must have it)."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "1":
            pytest.fail("the console's browser tests need the playwright package (pip install '.[test]')")
        pytest.skip("the console's browser tests need the playwright package (pip install '.[test]')")
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if not path:
        if os.environ.get("CI") == "1":
            pytest.fail(f"no Chromium at {CHROMIUM}: .ci/run installs Debian's chromium package")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium); nothing is downloaded at test time")
    return path


@pytest.fixture
def browser() -> Iterator[Any]:
    path = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    # Chromium refuses to start as root with its own sandbox; the tests run as root on CI machines.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=args)
        try:
            yield b
        finally:
            b.close()


def request(server: Server, method: str, path: str, *, cookie: str | None = None, host: str | None = None,
            origin: str | None = "same", body: dict[str, str] | None = None,
            headers: dict[str, str] | None = None) -> tuple[http.client.HTTPResponse, str]:
    """One request with a plain HTTP client: our Origin unless told otherwise, the session cookie if given."""
    c = server.conn()
    h = {"Host": host or f"127.0.0.1:{server.port}", **(headers or {})}
    if cookie:
        h["Cookie"] = f"dal_console={cookie}"
    if origin == "same":
        h["Origin"] = server.base
    elif origin is not None:
        h["Origin"] = origin
    data = None
    if body is not None:
        data = urlencode(body)
        h["Content-Type"] = "application/x-www-form-urlencoded"
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8")
    c.close()
    return r, text


def login(server: Server) -> str:
    r, _ = request(server, "GET", f"/login?token={server.token}", origin=None)
    assert r.status == 303 and r.getheader("Location") == "/waiting"
    cookie = r.getheader("Set-Cookie") or ""
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie, cookie
    return re.match(r"dal_console=([^;]+)", cookie).group(1)  # type: ignore[union-attr]


def form_of(page: str, run_id: str, seq: int) -> dict[str, str]:
    """The hidden fields of the decision form of effect `seq` of `run_id`, as the page holds them."""
    section = page.split(f'id="held-{run_id}-{seq}"', 1)[1].split("</section>", 1)[0]
    return {n: html.unescape(v) for n, v in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', section)}
