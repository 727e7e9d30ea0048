"""Start the console: bind the socket (so the printed URL has the real port), print the one login URL,
serve with uvicorn until Ctrl-C."""

from __future__ import annotations

import ipaddress
import socket
import sys
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
    out.write(f"dal console: store {location.shown}\n")  # a PostgreSQL URL without its password
    out.write(f"dal console: open {base}/login?token={sessions.token}\n")
    out.write("dal console: the link works once (it opens a session in that browser); Ctrl-C stops the console\n")
    out.flush()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False,
                            date_header=False, proxy_headers=False)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    return 0
