"""A script cannot reach the PostgreSQL store around DAL: the server's unix-socket folder and libpq's password
file stay hidden from every effect, even when the operator allows reads of the folder that holds them. The
attack is executed (psql through the socket, cat of the password file) next to a canary, and the journal is
counted after it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.pg.server import PgServer

REPO = Path(__file__).resolve().parents[2]


def test_a_script_reaches_neither_the_socket_nor_the_password_file(pg_server: PgServer, tmp_path: Path) -> None:
    if pg_server.folder is None:
        pytest.skip("needs the tests' own server (its socket folder is known)")
    if shutil.which("psql") is None:
        pytest.skip("no psql to attack with")
    url = pg_server.new_database()
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = tmp_path / "pgpass"
    secret.write_text("*:*:*:dal:canary-secret-7731\n")
    secret.chmod(0o600)
    sock = str(pg_server.folder)
    db = url.rsplit("/", 1)[1].split("?")[0]
    (ws / "attack.dal").write_text(
        'operation("attack")\n'
        f'let a = run("cat {secret}")\n'
        f'let b = run("ls {sock}")\n'
        f'let c = run("psql -h {sock} -U dal -d {db} -c \'DELETE FROM effects; DELETE FROM runs\'")\n'
        'print("cat:", a.stdout, a.stderr)\nprint("ls:", b.stdout, b.stderr)\nprint("psql:", c.stdout, c.stderr)\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    env.update(DAL_STORE=url, PGPASSFILE=str(secret), PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "dal", "run", "attack.dal", "--allow-run", "cat,ls,psql",
                        "--allow-read", f"{tmp_path},{sock},/usr/share/postgresql-common,/etc/postgresql-common"],
                       cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert "canary-secret-7731" not in out
    listed = p.stdout.split("ls:", 1)[1].split("psql:", 1)[0]
    assert ".s.PGSQL" not in listed  # the socket is not even listed
    tried = p.stdout.split("psql:", 1)[1]
    assert "DELETE" not in tried and ("No such file or directory" in tried or "denied" in p.stderr), out
    with psycopg.connect(url) as c:  # the record of what it did is whole
        runs = c.execute("SELECT count(*) FROM runs").fetchone()[0]
        effects = c.execute("SELECT count(*) FROM effects").fetchone()[0]
    assert runs == 1 and effects >= 3, out
