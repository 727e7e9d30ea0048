"""The PostgreSQL tests' fixtures: the session's server (tests/pg/server.py) and a new database per test."""

from tests.pg.server import pg_server, pg_url  # noqa: F401 - fixtures for every test here
from tests.pg.world import world  # noqa: F401 - a workspace on the test's database, for the tests that drive dal
