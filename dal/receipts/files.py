"""Receipt files: `<run_id>.json` and `<run_id>.md` under `.dal/receipts/`, each written atomically.

A reader (a person, a CI job, a kill -9 at the wrong moment) sees either the whole file or no file:
the bytes go to a temporary file in the same folder, are fsynced, renamed over the final name, and
the folder is fsynced so the rename itself survives a crash.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dal.fsutil import atomic_write_text

DEFAULT_RECEIPTS_DIR = Path(".dal") / "receipts"


def receipts_dir(
    directory: str | os.PathLike[str] | None = None, workspace: str | os.PathLike[str] | None = None
) -> Path:
    """Where receipt files go: `--receipts DIR` when given, else `<workspace>/.dal/receipts`."""
    if directory:
        return Path(directory).expanduser()
    return Path(workspace or ".") / DEFAULT_RECEIPTS_DIR


def atomic_write(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` so that the file is always either the old one, absent, or whole, and the
    rename survives a crash (dal.fsutil fsyncs the file and its folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return path


def receipt_json(receipt: dict[str, Any]) -> str:
    """The text of `<run_id>.json`: the receipt itself, indented for people, UTF-8, newline-terminated."""
    return json.dumps(receipt, indent=2, ensure_ascii=False) + "\n"


def write_receipt_files(
    receipt: dict[str, Any],
    directory: str | os.PathLike[str] | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
) -> tuple[Path, Path]:
    """Write `<run_id>.json` and `<run_id>.md` atomically and return their paths (json, md).

    The folder is `directory` when given (`--receipts DIR`), else `<workspace>/.dal/receipts`.
    """
    from dal.receipts.markdown import render_markdown

    folder = receipts_dir(directory, workspace)
    run_id = receipt["run_id"]
    json_path = atomic_write(folder / f"{run_id}.json", receipt_json(receipt))
    md_path = atomic_write(folder / f"{run_id}.md", render_markdown(receipt))
    return json_path, md_path


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
    from dal.receipts.schema import validate as check
    from dal.receipts.store import VALIDATE_SAMPLE, Store, StoreError, store_path

    if validate:
        check(receipt, sample=VALIDATE_SAMPLE)
    where = store_path(store, workspace)
    problem: Exception | None = None
    try:
        with Store(where) as db:
            db.save_receipt(receipt, validate=False)
    except StoreError as e:
        problem = e
    json_path, md_path = write_receipt_files(receipt, receipts, workspace=workspace)
    return Persisted(json_path, md_path, where, problem)
