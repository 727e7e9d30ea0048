"""Connections notice a dead peer in seconds, on both ends, unless the URL says otherwise."""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict

from dal.receipts.pg.connect import conninfo


def test_defaults_fill_in_what_the_url_does_not_say_and_the_url_wins() -> None:
    got = conninfo_to_dict(conninfo("postgresql://ops@db/dal?connect_timeout=30&options=-c%20statement_timeout%3D5s"))
    assert got["connect_timeout"] == "30" and got["keepalives"] == "1" and got["keepalives_idle"] == "10"
    assert got["tcp_user_timeout"] == "30000"
    # the server's end of the session too (what frees a cut-off host's key locks); the URL's options last
    assert got["options"].startswith("-c tcp_keepalives_idle=10") and got["options"].endswith("statement_timeout=5s")
