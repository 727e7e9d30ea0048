"""The tables both stores share are described once (dal/receipts/tables.py): a new SQLite store has them as
described, column for column, and the rendered text is what the released migrations wrote (the digests)."""

from __future__ import annotations

from pathlib import Path

from dal.receipts import tables
from dal.receipts.store import Store


def test_a_new_sqlite_store_has_the_described_tables(tmp_path: Path) -> None:
    with Store(tmp_path / "dal.db") as store:
        conn = store._conn  # noqa: SLF001 - reading the schema the store made
        assert conn is not None
        for table, columns in tables.TABLES.items():
            have = [(name, kind) for _, name, kind, *_ in conn.execute(f"PRAGMA table_info({table})")]
            want = [(name.strip('"'), tables.TYPES[kind]["sqlite"].split()[0]) for name, kind, _ in columns]
            assert have == want, table


def test_the_dialects_differ_only_in_types() -> None:
    for table in tables.TABLES:
        lite, pg = tables.render(table, "sqlite"), tables.render(table, "postgresql")
        assert lite.count("\n") == pg.count("\n")
        assert "JSONB" in pg or "json" not in {k for _, k, _ in tables.TABLES[table]}
        assert "JSONB" not in lite and "BIGSERIAL" not in lite
