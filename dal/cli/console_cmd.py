"""`dal console`: serve the operator console (docs/console.md). The web server is the `console` extra
(Starlette, uvicorn, Jinja2), imported only when this command runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_USAGE = 2


def register(sub: Any) -> None:
    p = sub.add_parser(
        "console",
        help="serve the operator console: why each run waits, and decide in a browser",
        description="Serve the operator console on 127.0.0.1: the runs waiting for a person (approve, deny, "
        "say what happened to an uncertain effect), the blocked jobs, the queue and its workers, and every "
        "run with its receipt, journal and decisions. Prints a login link (it works once, and opens a "
        "session in that browser); Enter in its terminal, or SIGUSR1, prints a new one. Needs the `console` "
        "extra: pip install 'dal-lang[console]'.",
    )
    p.add_argument("--store", default=None, metavar="PATH",
                   help="the run store (default: $DAL_STORE, else WORKSPACE/.dal/dal.db)")
    p.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                   help="the workspace whose store to use (default: the nearest folder, from the current "
                   "directory up, with a dal.toml or a .dal/ folder; else the current directory)")
    p.add_argument("--port", type=int, default=0, metavar="N", help="the port (default: any free port)")
    p.add_argument("--host", default="127.0.0.1", metavar="ADDR",
                   help="the address to listen on (default 127.0.0.1; another address prints a warning: "
                   "whoever reaches it with the link can decide)")
    p.add_argument("--as", dest="name", default=None, metavar="NAME",
                   help="the name decisions record (default: your user name), with the console session and "
                   "the browser's address")
    p.set_defaults(func=cmd_console)


def _die(message: str, code: int = EXIT_USAGE) -> int:
    from dal.cli import hostmode

    return hostmode.error(message, code)


def cmd_console(args: argparse.Namespace) -> int:
    from dal.receipts.location import StoreLocation, StoreLocationError
    from dal.runner.workspace import find_workspace

    if not 0 <= args.port <= 65535:
        return _die(f"--port {args.port}: a port is 0 (any free port) to 65535")
    try:
        location = StoreLocation.parse(args.store, find_workspace(args.workspace).path)
    except StoreLocationError as e:
        return _die(str(e))
    try:
        import jinja2  # noqa: F401  the console extra: imported here so that a missing one is named
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401

        from dal.console.serve import serve
    except ImportError as e:
        from dal.core.extras import install_hint

        return _die(f"dal console needs the console extra ({e.name} is not installed): {install_hint('console')}")
    name = args.name
    if not name:
        import getpass

        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = "operator"
    try:
        return serve(location, host=args.host, port=args.port, name=name)
    except OSError as e:
        return _die(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}")
    except KeyboardInterrupt:
        sys.stderr.write("dal console: stopped\n")
        return 130
