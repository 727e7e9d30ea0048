"""Receipts: the schema of `dal.receipt/v1`, the durable store, receipt files and their renderings.

The runner builds a receipt as a plain JSON-able dict; everything downstream of that dict lives here:
validate it (schema), store it (store), write its files (files), show it (render, markdown).

The names below are importable from the package (docs/receipts.md), each loaded from its module on first
use, so that importing one module of the package loads no other. (The Python API's listing function is
`dal.list_receipts`; this package is not callable.)
"""

from __future__ import annotations

_WHERE = {
    "atomic_write": "files", "write_receipt_files": "files", "new_run_id": "ids", "utc_timestamp": "ids",
    "render_markdown": "markdown", "run_next": "nextstep", "job_next": "nextstep", "derive_retry": "retry",
    "derive_retry_for": "retry",
    "ReceiptSchemaError": "schema", "validate": "schema", "NoStore": "store", "RunNotFound": "store",
    "Store": "store", "StoreError": "store", "store_path": "store", "Persisted": "saving", "persist": "saving",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
