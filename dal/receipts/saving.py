"""Saving a finished run's receipt everywhere it belongs (`persist`), for callers outside the runner.

Kept apart from dal.receipts.files so that `dal run` does not import dataclasses for `Persisted`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dal.receipts.files import write_receipt_files


@dataclass(frozen=True)
class Persisted:
    """Where a receipt went: its files, its store, and the store problem if saving there failed."""

    json_path: Path
    md_path: Path
    store_path: Path
    store_error: Exception | None = None


def persist(
    receipt: dict[str, Any],
    *,
    workspace: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    receipts: str | os.PathLike[str] | None = None,
    validate: bool = True,
) -> Persisted:
    """Save a finished run's receipt everywhere it belongs: the store first (the source of truth), then
    `<run_id>.json` and `<run_id>.md`.

    A StoreError (locked, read-only, corrupt store) does not stop the files from being written: it is
    returned in `store_error` so the caller can say so in one line, and the receipt is not lost. A
    receipt that does not match the schema raises ReceiptSchemaError before anything is written.
    """
    from dal.receipts.errors import StoreError
    from dal.receipts.location import StoreLocation, open_store
    from dal.receipts.schema import VALIDATE_SAMPLE
    from dal.receipts.schema import validate as check

    if validate:
        check(receipt, sample=VALIDATE_SAMPLE)
    location = StoreLocation.parse(store, workspace or ".")
    where = location.file if location.is_file else Path(location.shown)
    problem: Exception | None = None
    try:
        with open_store(location) as db:
            db.save_receipt(receipt, validate=False)
    except StoreError as e:
        problem = e
    json_path, md_path = write_receipt_files(receipt, receipts, workspace=workspace)
    return Persisted(json_path, md_path, where, problem)
