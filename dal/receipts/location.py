"""Where the run store is: one parser for `--store`, the API's `store=`, `$DAL_STORE` and the default, so
that every command and every host names the same file (docs/cli.md, "The run store").

A location is parsed once, when a run or a command starts, into an absolute path: `~` and `~user` are
expanded, a relative path is taken from the current directory (as a path typed on a command line is),
and with nothing given the store is `WORKSPACE/.dal/dal.db`. A URL names a store kind (`sqlite:///abs`
is a path; `postgresql://` or `postgres://` a PostgreSQL database, dal/receipts/pg/, docs/scale.md); any
other kind is refused with a message saying which kinds exist, rather than becoming a file named `x:`.
A PostgreSQL location keeps its URL; its password is never shown nor stored with a run (`to_json`):
give it in ~/.pgpass or $PGPASSWORD.

The path is canonical (symlinks resolved, `os.path.realpath`): the same store reached by two paths (a
symlink to the file or to a folder above it, `$DAL_STORE` in cron and `--store` by hand) is one path, so
its key locks (`locks_folder`, beside the resolved file) are one folder and one key has one runner.
Two bind mounts of one folder are still two paths; keep one store at one place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dal.core.records import FrozenRecord

if TYPE_CHECKING:
    from dal.receipts.store import Store

STORE_ENV = "DAL_STORE"
DEFAULT_STORE = Path(".dal") / "dal.db"
KINDS = ("sqlite", "postgresql")
PG_SCHEMES = ("postgresql", "postgres")


class StoreLocationError(ValueError):
    """A store location DAL cannot use; the message names where it came from."""


class StoreLocation(FrozenRecord):
    """A parsed store location: the kind of store, its absolute path, and where the location came from
    (`given`: the flag or keyword, `env`: $DAL_STORE, `default`: WORKSPACE/.dal/dal.db)."""

    __slots__ = ("kind", "path", "origin")

    def __init__(self, kind: str, path: str, origin: str = "given") -> None:
        init = object.__setattr__
        init(self, "kind", kind)
        init(self, "path", path)
        init(self, "origin", origin)

    @classmethod
    def parse(
        cls,
        given: str | os.PathLike[str] | StoreLocation | None,
        workspace: str | os.PathLike[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> StoreLocation:
        """The store a command uses: `given` (a flag or keyword), else $DAL_STORE, else the workspace's.
        Raises StoreLocationError for a location of a kind DAL has no store for."""
        if isinstance(given, StoreLocation):
            return given
        env = os.environ if env is None else env
        origin = "given"
        text: str | None = os.fspath(given) if given is not None else None
        if not text:
            text, origin = env.get(STORE_ENV) or None, "env"
        if not text:
            return cls("sqlite", os.path.realpath(os.path.join(os.fspath(workspace), DEFAULT_STORE)), "default")
        where = {"given": "the store location", "env": STORE_ENV}[origin]
        kind, sep, rest = text.partition("://")
        if sep and kind.lower() in PG_SCHEMES:
            return cls("postgresql", "postgresql://" + rest, origin)
        if sep and kind and kind.isalnum():
            if kind != "sqlite":
                raise StoreLocationError(f"{where} {text!r}: DAL has no {kind} store (store kinds: a path, or "
                                         f"{', '.join(k + '://' for k in KINDS)})")
            if not rest.startswith("/"):
                raise StoreLocationError(f"{where} {text!r}: a sqlite:// location names an absolute path "
                                         "(sqlite:///srv/runs.db)")
            text = rest
        path = os.path.expanduser(text)
        if not os.path.isabs(path):
            path = os.path.join(os.fspath(cwd) if cwd is not None else os.getcwd(), path)
        return cls("sqlite", os.path.realpath(path), origin)

    @property
    def is_file(self) -> bool:
        """Whether the store is a SQLite file (else a database server: no file, no lock folder)."""
        return self.kind == "sqlite"

    @property
    def file(self) -> Path:
        """The SQLite file; StoreLocationError for a PostgreSQL location, which has none."""
        if self.kind != "sqlite":
            raise StoreLocationError(f"the store {self} is a PostgreSQL database, not a file")
        return Path(self.path)

    @property
    def shown(self) -> str:
        """The location as messages show it: a PostgreSQL URL without its password."""
        return redact(self.path) if self.kind == "postgresql" else self.path

    def private_paths(self) -> list[str]:
        """What a script must never see of a PostgreSQL store: the server's unix-socket folder (with `peer`
        authentication, a process of the same user could connect through it) and libpq's password and
        service files. Hidden from every effect (dal/runner/inforce.py, protect_run)."""
        if self.kind != "postgresql":
            return []
        from urllib.parse import parse_qs, unquote, urlsplit

        parts = urlsplit(self.path)
        hosts = [unquote(parts.netloc.rpartition("@")[2].split(":")[0])]
        hosts += [h for v in parse_qs(parts.query).get("host", []) for h in v.split(",")]
        hosts.append(os.environ.get("PGHOST", ""))
        out = [h for h in hosts if h.startswith("/")]
        out.append(os.environ.get("PGPASSFILE") or os.path.expanduser("~/.pgpass"))
        out.append(os.environ.get("PGSERVICEFILE") or os.path.expanduser("~/.pg_service.conf"))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.shown, "origin": self.origin}

    @classmethod
    def from_json(cls, data: Any) -> StoreLocation:
        if not (isinstance(data, dict) and isinstance(data.get("path"), str) and data.get("kind") in KINDS):
            raise StoreLocationError(f"a stored store location is not one: {data!r}")
        return cls(data["kind"], data["path"], str(data.get("origin") or "given"))

    def __str__(self) -> str:
        return self.shown


def redact(url: str) -> str:
    """A PostgreSQL URL with its password (in the authority or a `password=` parameter) cut out."""
    import re

    url = re.sub(r"^(postgres(?:ql)?://[^:/@?#]*):[^@/?#]*@", r"\1@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url)


def locks_folder(store: str | os.PathLike[str]) -> Path:
    """The folder of a store's key locks: `locks/` beside the store file with every symlink resolved, so
    that every path to one store agrees on it (dal/receipts/oplock.py)."""
    return Path(os.path.realpath(os.fspath(store))).parent / "locks"


def open_store(location: StoreLocation, *, readonly: bool = False, timeout: float | None = None) -> Store:
    """The store at `location`, opened for reading and writing (created when missing) or read-only (never
    created: NoStore when there is none). Raises StoreError naming the file or the database. A PostgreSQL
    store (dal/receipts/pg/) is a RunStore too; psycopg is imported only here, only for one."""
    if location.kind == "postgresql":
        from dal.receipts.pg.store import PgStore

        return PgStore(location.path, readonly=readonly, timeout=timeout)  # type: ignore[return-value]
    from dal.receipts.store import Store

    return Store(location.file, readonly=readonly, timeout=timeout)
