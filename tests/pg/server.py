"""A throwaway PostgreSQL server for the tests: a cluster initdb'd in a temporary folder, listening only on a
unix socket there, with fsync off (the tests inject crashes of DAL's processes, not of the machine).

`$DAL_TEST_PG` names a server to use instead (a URL whose user may CREATE DATABASE). Without either,
the PostgreSQL tests skip, saying why; under CI (`CI=1`) or `DAL_REQUIRE_PG=1` they fail instead, so that
CI never passes by skipping them. Run as root, the cluster runs as `nobody` (PostgreSQL refuses root).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ENV = "DAL_TEST_PG"
REQUIRE = ("CI", "DAL_REQUIRE_PG")


def _bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    return Path(versions[-1]).parent if versions else None


def required() -> bool:
    return any(os.environ.get(name, "") not in ("", "0") for name in REQUIRE)


def unavailable(why: str) -> None:
    """Skip (or, where PostgreSQL is required, fail) the test that needs a server."""
    message = f"PostgreSQL tests need a server: {why} (set {ENV}=postgresql://... or install PostgreSQL)"
    if required():
        pytest.fail(message + "; they are required here (CI or DAL_REQUIRE_PG)", pytrace=False)
    pytest.skip(message)


class PgServer:
    """One server: `admin` is a URL of its `postgres` database; `new_database()` makes an empty one."""

    def __init__(self, admin: str, folder: Path | None = None, bindir: Path | None = None,
                 durable: bool = False) -> None:
        self.admin = admin
        self.folder = folder
        self.bindir = bindir
        self.durable = durable

    @classmethod
    def start(cls, durable: bool = False) -> PgServer:
        """A new cluster; `durable`: with fsync on, as a real server commits (for bench/bench_pg.py)."""
        bindir = _bindir()
        if bindir is None:
            unavailable("no pg_ctl on PATH or in /usr/lib/postgresql/*/bin")
        assert bindir is not None
        folder = Path(tempfile.mkdtemp(prefix="dal-pg-"))
        server = cls(f"postgresql://dal@/postgres?host={folder}", folder, bindir, durable)
        if os.geteuid() == 0:
            os.chown(folder, 65534, 65534)  # nobody: the server refuses to run as root
        server._as_owner([str(bindir / "initdb"), "-D", str(folder / "data"), "-U", "dal", "--auth=trust",
                          "-E", "UTF8", "--locale=C", "--no-sync"])
        server.start_again()
        return server

    def _as_owner(self, argv: list[str]) -> None:
        kw = {"user": 65534, "group": 65534} if os.geteuid() == 0 else {}
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)  # type: ignore[call-overload]
        if p.returncode != 0:
            unavailable(f"{' '.join(argv[:2])} failed: {p.stderr.strip()[-400:]}")

    def start_again(self) -> None:
        """Start the server (again, after `stop`), and wait until it accepts connections."""
        assert self.folder is not None and self.bindir is not None, "only a server the tests started restarts"
        opts = f"-k {self.folder} -c listen_addresses='' -c max_connections=200 -c shared_buffers=16MB"
        if not self.durable:
            opts += " -c fsync=off -c full_page_writes=off"
        self._as_owner([str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"), "-l",
                        str(self.folder / "log"), "-o", opts, "-w", "-t", "60", "start"])

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`immediate`: as a crash would, without a checkpoint)."""
        assert self.folder is not None and self.bindir is not None
        self._as_owner([str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"), "-m", mode, "-w", "stop"])

    def new_database(self) -> str:
        """A URL of a new, empty database on this server."""
        import psycopg

        name = "dal_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.admin, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        base, _, query = self.admin.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")

    def close(self) -> None:
        if self.folder is not None:
            try:
                self.stop("immediate")
            except BaseException:  # noqa: BLE001 - the folder goes either way
                pass
            shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The tests' PostgreSQL server ($DAL_TEST_PG, or a throwaway cluster); skips or fails without one."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'dal-lang[postgres]')")
    given = os.environ.get(ENV)
    server = PgServer(given) if given else PgServer.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A URL of a new, empty database."""
    return pg_server.new_database()
