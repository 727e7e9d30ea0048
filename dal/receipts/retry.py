"""The retry class of a run the script did not classify itself, derived from how the run ended.

The table (also in docs/receipts.md) is checked top to bottom; the first matching row wins.

| status      | condition                                         | retry      |
|-------------|---------------------------------------------------|------------|
| skipped     | -                                                 | none       |
| any         | external_effect is uncertain or pending_approval  | escalate   |
| completed   | -                                                 | none       |
| rejected    | -                                                 | repair     |
| waiting     | -                                                 | resume     |
| interrupted | -                                                 | resume     |
| exhausted   | -                                                 | inspect    |
| failed      | error kind `divergence` (script vs journal)       | inspect    |
| failed      | error kind `internal` (a bug in DAL itself)       | inspect    |
| failed      | any other error (a DAL error in the script)       | repair     |
| failed      | fail(value) without a retry of its own            | inspect    |

`replay` is never derived: only the script knows its operation is idempotent, so only
`fail({"retry": "replay"})` chooses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RETRY_CLASSES: tuple[str, ...] = ("none", "inspect", "resume", "repair", "replay", "escalate")

# Error kinds (dal.core.errors) after which a person must look before anything reruns: the journal and the
# script disagree, or DAL itself failed. Editing the script is not the fix for either.
INSPECT_KINDS = frozenset({"divergence", "internal"})


def derive_retry(
    status: str,
    *,
    external_effect: str = "none",
    error_kind: str | None = None,
) -> str:
    """Return the retry class for a run that ended with `status`, per the table in the module doc.

    `error_kind` is the kind of the DAL error that ended the run, or None when the script ended itself
    with fail(value) (or did not fail at all).
    """
    if status == "skipped":
        return "none"
    if external_effect in ("uncertain", "pending_approval"):
        # Only a person can say whether a send happened or may happen; no worker retries this.
        return "escalate"
    if status == "completed":
        return "none"
    if status == "rejected":
        return "repair"
    if status in ("waiting", "interrupted"):
        return "resume"
    if status == "exhausted":
        return "inspect"
    if status == "failed":
        if error_kind is None:
            return "inspect"
        if error_kind in INSPECT_KINDS:
            return "inspect"
        return "repair"
    raise ValueError(f"unknown run status {status!r}")


def derive_retry_for(receipt: Mapping[str, Any]) -> str:
    """derive_retry() reading status, external_effect and error.kind from a receipt dict."""
    error = receipt.get("error")
    return derive_retry(
        receipt["status"],
        external_effect=receipt.get("external_effect") or "none",
        error_kind=error.get("kind") if isinstance(error, Mapping) else None,
    )
