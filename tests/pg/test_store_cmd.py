"""`dal store check` and `dal store migrate` against both kinds of store, as an operator runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from dal.receipts.pg.schema import SCHEMA_VERSION
from tests.pg.server import PgServer

REPO = Path(__file__).resolve().parents[2]


def dal(ws: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "DAL_STORE"}
    full.update(env, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=ws, capture_output=True, text=True, env=full,
                          timeout=120)


def test_migrate_makes_the_tables_once_and_check_reports_what_the_database_holds(pg_server: PgServer,
                                                                                 tmp_path: Path) -> None:
    url = pg_server.new_database()
    first = dal(tmp_path, "store", "migrate", "--store", url, "--json")
    assert first.returncode == 0, first.stderr
    assert (json.loads(first.stdout)["from_version"], json.loads(first.stdout)["version"]) == (0, SCHEMA_VERSION)
    again = dal(tmp_path, "store", "migrate", "--store", url)
    assert again.returncode == 0 and "already current" in again.stdout
    (tmp_path / "s.dal").write_text('operation("k")\nprint(run("echo hi").stdout)\n')
    ran = dal(tmp_path, "run", "s.dal", "-q", DAL_STORE=url)
    assert ran.returncode == 0, ran.stderr
    (tmp_path / "t.dal").write_text('print("queued")\n')
    assert dal(tmp_path, "submit", "t.dal", "--key", "other", DAL_STORE=url).returncode == 0
    check = dal(tmp_path, "store", "check", "--json", DAL_STORE=url)
    assert check.returncode == 0, check.stderr
    got = json.loads(check.stdout)
    assert got["store"]["kind"] == "postgresql" and got["version"] == SCHEMA_VERSION and got["problems"] == []
    assert got["runs"]["by_status"] == {"completed": 1} and got["jobs"]["by_state"] == {"ready": 1}
    assert got["server"]["server_version"].startswith(("15", "16", "17", "14", "13"))
    shown = dal(tmp_path, "store", "check", DAL_STORE=url)
    assert "(postgresql): sound" in shown.stdout and "1 completed" in shown.stdout


def test_check_names_a_damaged_database_and_an_unreachable_one(pg_server: PgServer, tmp_path: Path) -> None:
    url = pg_server.new_database()
    assert dal(tmp_path, "store", "migrate", "--store", url).returncode == 0
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("DROP TABLE key_locks")
    bad = dal(tmp_path, "store", "check", "--store", url)
    assert bad.returncode == 1 and "table key_locks is missing" in bad.stdout
    gone = dal(tmp_path, "store", "check", "--store", "postgresql://ops:pw@127.0.0.1:1/dal?connect_timeout=3")
    assert gone.returncode == 2 and "Connection refused" in gone.stderr and "Traceback" not in gone.stderr
    assert "ops:pw" not in gone.stderr and "ops@127.0.0.1" in gone.stderr  # the password is not shown


def test_an_empty_database_has_no_runs_yet(pg_server: PgServer, tmp_path: Path) -> None:
    url = pg_server.new_database()
    r = dal(tmp_path, "receipts", "--store", url)
    assert r.returncode == 0 and "no runs yet" in r.stdout + r.stderr
    check = dal(tmp_path, "store", "check", "--store", url)
    assert check.returncode == 2 and "has no DAL tables" in check.stderr
    assert "`dal store migrate --store " in check.stderr and "` makes them" in check.stderr


@pytest.mark.parametrize("kind", ["sqlite"])
def test_the_same_commands_serve_a_sqlite_store(kind: str, tmp_path: Path) -> None:
    assert dal(tmp_path, "store", "check").returncode == 2  # none yet
    m = dal(tmp_path, "store", "migrate")
    assert m.returncode == 0 and "migrated from 0" in m.stdout
    c = dal(tmp_path, "store", "check", "--json")
    assert c.returncode == 0 and json.loads(c.stdout)["store"]["kind"] == "sqlite", c.stderr
