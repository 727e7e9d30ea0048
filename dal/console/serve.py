"""Start the console: bind the socket (so the printed URL has the real port), print the one login URL,
serve with uvicorn until Ctrl-C."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from dal.console.security import Sessions
from dal.receipts.location import StoreLocation

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port` (port 0: any free one). Raises OSError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def base_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def serve(location: StoreLocation, *, host: str = LOOPBACK, port: int = 0, name: str,
          out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Serve the console for the store at `location` until interrupted. Returns the exit code."""
    import uvicorn

    from dal.console.app import build_app

    out, err = out or sys.stdout, err or sys.stderr
    sock = bind(host, port)
    port = sock.getsockname()[1]
    sessions = Sessions()
    app = build_app(location, sessions, host=host, port=port, name=name)
    from dal.console.security import WILDCARDS

    base = base_url(socket.gethostname() if host in WILDCARDS else host, port)
    if not is_loopback(host):
        err.write(f"dal console: warning: listening on {host}, not only this machine: anyone who can reach "
                  f"{base} and has the login link can approve effects. The link is sent in clear (plain HTTP)\n")

    def intro() -> None:
        out.write(f"dal console: store {location.shown}\n")  # a PostgreSQL URL without its password
        out.write(f"dal console: open {base}/login?token={sessions.token}\n")
        out.write("dal console: the link works once (it opens a session in that browser); for a new link, press "
                  f"Enter here or run `kill -USR1 {os.getpid()}`; Ctrl-C stops the console\n")
        out.flush()

    _offer_new_links(sessions, base, out, intro)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False,
                            date_header=False, proxy_headers=False)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    return 0


def _offer_new_links(sessions: Sessions, base: str, out: TextIO, intro: Callable[[], None] = lambda: None) -> None:
    """Print a new one-time login link on each line the operator types into the console's terminal (its
    standard input) and on each SIGUSR1: a second browser, a closed tab or a scripted check needs no
    restart. Only the operator reaches either (scripts never see the console's input, nor signal it from
    inside the wall); each new link spends the unused one before it. `intro` prints the first link and the
    PID to signal: only once SIGUSR1 is handled (its default ends the process), and before any new link."""
    # The handler only writes a byte to a pipe, and a thread mints: a handler that took the sessions' lock
    # would hang the server interrupted inside login() (the same thread holds it), and a burst of signals
    # nests handlers until a RecursionError stops the console.
    printing = threading.Lock()

    def new_link() -> None:
        with printing:
            out.write(f"dal console: open {base}/login?token={sessions.mint()}\n")
            out.write("dal console: (a new link: it works once, and the one printed before it no longer does)\n")
            out.flush()

    if hasattr(signal, "SIGUSR1"):
        wake_r, wake_w = os.pipe2(os.O_CLOEXEC) if hasattr(os, "pipe2") else os.pipe()
        os.set_blocking(wake_w, False)

        def on_signal(*_: object) -> None:
            try:
                os.write(wake_w, b"!")
            except BlockingIOError:
                pass  # the pipe is full: a new link is already coming

        def minting() -> None:
            while os.read(wake_r, 4096):  # a burst read at once is one new link
                new_link()

        signal.signal(signal.SIGUSR1, on_signal)
        with printing:
            intro()
        threading.Thread(target=minting, name="dal console: new links on SIGUSR1", daemon=True).start()
    else:
        intro()
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return
    if os.isatty(fd):
        # A console started in the background (`dal console &`) must not be stopped for reading its
        # terminal: it does not read one it does not own, and a read after it is sent there fails instead.
        if hasattr(signal, "SIGTTIN"):
            signal.signal(signal.SIGTTIN, signal.SIG_IGN)
        try:
            if os.tcgetpgrp(fd) != os.getpgrp():
                return
        except OSError:
            return

    def read() -> None:
        try:
            for _line in sys.stdin:
                new_link()
        except (OSError, ValueError):
            pass  # the input is gone: SIGUSR1 still works

    threading.Thread(target=read, name="dal console: new links", daemon=True).start()
