"""`--store`, `$DAL_STORE` and the API's `store=` accept a PostgreSQL URL: one parser, the password never shown
nor stored with a run, and nothing of the driver loaded by a run on a SQLite store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dal.receipts.location import StoreLocation, StoreLocationError


@pytest.mark.parametrize("given", ["postgresql://ops@db.internal:5432/dal", "postgres://ops@db.internal:5432/dal"])
def test_both_schemes_name_a_postgresql_store(given: str, tmp_path: Path) -> None:
    loc = StoreLocation.parse(given, tmp_path)
    assert (loc.kind, loc.path, loc.origin) == ("postgresql", "postgresql://ops@db.internal:5432/dal", "given")
    assert not loc.is_file
    with pytest.raises(StoreLocationError, match="is a PostgreSQL database, not a file"):
        _ = loc.file


def test_the_environment_names_one_too(tmp_path: Path) -> None:
    loc = StoreLocation.parse(None, tmp_path, env={"DAL_STORE": "postgresql:///dal?host=/run/pg"})
    assert (loc.kind, loc.origin) == ("postgresql", "env")


def test_a_password_is_never_shown_nor_stored_with_a_run(tmp_path: Path) -> None:
    loc = StoreLocation.parse("postgresql://ops:s3cret@db:5432/dal?sslmode=require&password=other", tmp_path)
    assert "s3cret" in loc.path  # what connects
    for shown in (str(loc), loc.shown, repr(loc.to_json())):
        assert "s3cret" not in shown and "other" not in shown
    assert str(loc).startswith("postgresql://ops@db:5432/dal")
    back = StoreLocation.from_json(loc.to_json())
    assert back.kind == "postgresql" and "s3cret" not in back.path


def test_other_kinds_are_still_refused_naming_the_kinds(tmp_path: Path) -> None:
    with pytest.raises(StoreLocationError, match=r"postgresql://"):
        StoreLocation.parse("mysql://db/dal", tmp_path)


def test_a_run_on_a_sqlite_store_loads_no_postgresql_code(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("x")\n')
    probe = ("import sys\nfrom dal.cli.main import main\nmain(sys.argv[1:])\n"
             "print('LOADED:' + ','.join(m for m in ('psycopg', 'dal.receipts.pg') if m in sys.modules))\n")
    p = subprocess.run([sys.executable, "-c", probe, "run", "s.dal", "-q"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60, env={**os.environ, "DAL_STORE": ""})
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "LOADED:"
