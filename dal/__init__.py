"""DAL: a small language for agent tool loops.

The runtime counts every step against a budget, checks every shell effect against a policy,
and leaves a durable receipt at every loop exit and at every run's end.

The embedding API (see docs/api.md) is imported lazily so that `dal check` starts fast:

    import dal
    receipt = dal.run("script.dal", key="job-42")
"""

from __future__ import annotations

# `dal` is the first module the `dal` command imports, before it can take Ctrl-C (dal/cli/entry.py):
# nothing here may take time, not even importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_API = ("run", "resume", "approve", "deny", "resolve_effect", "list_receipts", "receipt", "check", "Receipt",
        "Diagnostic", "DalUsageError", "DalStoreError", "interrupt_runs")

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from dal import api

        return getattr(api, name)
    if name == "receipts":
        # The listing function's old name, which is also the name of the package dal.receipts: once that
        # package is imported (any run imports it), `dal.receipts` is the package, so this works only
        # before. Use dal.list_receipts.
        import warnings

        warnings.warn("dal.receipts(...) is deprecated: use dal.list_receipts(...)", DeprecationWarning, stacklevel=2)
        from dal import api

        return api.list_receipts
    raise AttributeError(f"module 'dal' has no attribute {name!r}")
