"""Connections to the PostgreSQL store: psycopg imported here only, a clear StoreError when it is missing or
the server cannot be reached, and libpq settings that notice a dead peer in seconds, not hours.

Defaults (each overridable in the URL, `?connect_timeout=30`): connect_timeout 10 s; TCP keepalives after
10 s idle, every 5 s, 3 probes; tcp_user_timeout 30 s (unacknowledged data: a partition is noticed while a
statement waits on the wire). Those are the client's side (DAL notices a dead server). The server's side is
set for each session too (`options=-c tcp_keepalives_idle=10 ...`): the server notices a dead or cut-off
host in about 25 s and ends its session, which releases its key locks. Unix sockets ignore the TCP settings.
"""

from __future__ import annotations

import os
from typing import Any

from dal.receipts.errors import StoreError
from dal.receipts.location import redact

DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
    "application_name": "dal",
}
# The server's end of each session (settable by any user): what frees a cut-off host's advisory locks.
SERVER_SIDE = ("-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3"
               " -c tcp_user_timeout=30000")


def driver() -> Any:
    """The psycopg module; StoreError saying how to install it when it is not."""
    try:
        import psycopg
    except ImportError:
        from dal.core.extras import install_hint

        raise StoreError(f"a postgresql:// store needs the PostgreSQL driver: {install_hint('postgres')} "
                         "(psycopg 3)") from None
    return psycopg


def conninfo(url: str, settings: str = "", **more: str) -> str:
    """`url` with DAL's defaults where it does not say otherwise; `settings`: more `-c name=value` for the
    session, set as it starts (no round trip)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = conninfo_to_dict(url)
    extra = {k: v for k, v in {**DEFAULTS, **more}.items() if k not in given}
    opts = str(given.get("options") or "")
    extra["options"] = " ".join(x for x in (SERVER_SIDE, settings, opts) if x)  # the URL's own come last: they win
    return make_conninfo(url, **extra)


# A DAL session lives as long as its process and is idle for as long as an effect runs: the server's (or the
# role's, or the database's) idle timeouts must not end it, least of all the key lock's. Set
# with a query, not `-c`: a server older than 14 has no idle_session_timeout and would refuse the session.
_NO_IDLE_END = ("SELECT set_config(name, '0', false) FROM pg_settings"
                " WHERE name IN ('idle_session_timeout', 'idle_in_transaction_session_timeout')")


def connect(url: str, doing: str = "connecting to it", settings: str = "", **more: str) -> Any:
    """A new autocommit connection (DAL opens its transactions itself) that the server's idle timeouts do not
    end; StoreError naming the database."""
    psycopg = driver()
    try:
        conn = psycopg.connect(conninfo(url, settings, **more), autocommit=True)
    except psycopg.Error as e:
        raise describe(e, url, doing) from None
    try:
        conn.execute(_NO_IDLE_END).fetchall()
    except psycopg.Error as e:
        conn.close()
        raise describe(e, url, doing) from None
    return conn


def describe(exc: BaseException, url: str, doing: str) -> StoreError:
    """A StoreError for a failure of the database at `url` while `doing`, without its password."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    hint = ""
    psycopg = driver()
    if isinstance(exc, psycopg.OperationalError):
        hint = (" Is the server running and reachable? (connections time out after connect_timeout, "
                f"{os.environ.get('PGCONNECT_TIMEOUT', DEFAULTS['connect_timeout'])} s by default)")
    return StoreError(f"the PostgreSQL store {redact(url)}: {first} (while {doing}).{hint}", redact(url))
