"""Receipts: the schema of `dal.receipt/v1`, the durable store, receipt files and their renderings.

The interpreter builds a receipt as a plain JSON-able dict; everything downstream of that dict lives
here: validate it (schema), store it (store), write its files (files), show it (render, markdown).

`compact` and `render` are not re-exported here: their names are also their modules' names, and a
package attribute shadowing a submodule breaks `import dal.receipts.render as r`. Import them from
`dal.receipts.compact` and `dal.receipts.render`.
"""

from dal.receipts.files import atomic_write, write_receipt_files
from dal.receipts.ids import new_run_id, utc_timestamp
from dal.receipts.markdown import render_markdown
from dal.receipts.render import next_action
from dal.receipts.retry import derive_retry, derive_retry_for
from dal.receipts.schema import ReceiptSchemaError, validate
from dal.receipts.store import NoStore, RunNotFound, Store, StoreError, store_path

__all__ = [
    "NoStore",
    "Persisted",
    "ReceiptSchemaError",
    "RunNotFound",
    "Store",
    "StoreError",
    "atomic_write",
    "derive_retry",
    "derive_retry_for",
    "new_run_id",
    "next_action",
    "persist",
    "render_markdown",
    "store_path",
    "utc_timestamp",
    "validate",
    "write_receipt_files",
]


# `dal.receipts(...)` is also the embedding API's listing function (docs/api.md). Once this package is
# imported it is the attribute `dal.receipts`, so the package itself forwards calls to the API.
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402


def __getattr__(name: str) -> object:
    # persist and Persisted are imported on first use (dal.receipts.saving: a dataclass `dal run` skips).
    if name in ("Persisted", "persist"):
        from dal.receipts import saving

        return getattr(saving, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallablePackage(_types.ModuleType):
    def __call__(self, *args: object, **kwargs: object) -> object:
        from dal.api import receipts

        return receipts(*args, **kwargs)  # type: ignore[arg-type]


_sys.modules[__name__].__class__ = _CallablePackage
