"""The tables of the job queue (docs/workers.md): migration 3 of the SQLite run store, rendered from the
description both stores share (dal/receipts/tables.py).

Kept apart from dal/receipts/jobs.py (the queue's operations) so that the store's migration list costs a
plain `dal run` nothing but these strings.
"""

from __future__ import annotations

from dal.receipts.tables import queue_migration

MIGRATION: list[str] = queue_migration("sqlite")
