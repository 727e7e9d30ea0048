"""Run ids: `run_<UTC yyyymmddThhmmssmmm>Z_<6 hex>`, so sorting ids as text sorts runs by start time."""

from __future__ import annotations

import os
import re
import threading
from datetime import UTC, datetime, timedelta

RUN_ID_RE = re.compile(r"^run_(\d{8}T\d{9})Z_[0-9a-f]{6,}$")

_lock = threading.Lock()
_last: datetime | None = None


def new_run_id(now: datetime | None = None) -> str:
    """Return a new run id, e.g. `run_20261129T191200123Z_4f9a2c`.

    Ids made by one process never go backwards, even when the clock does or two runs start in the same
    millisecond: the timestamp is bumped past the previous one (unless `now` is given,
    for tests). The random suffix keeps ids from separate processes distinct: it is what
    `secrets.token_hex(3)` returns (os.urandom), without importing secrets, hmac and hashlib at start.
    """
    global _last
    when = (now or datetime.now(UTC)).astimezone(UTC)
    stamp = when.replace(microsecond=when.microsecond // 1000 * 1000)
    if now is None:
        with _lock:
            if _last is not None and stamp <= _last:
                stamp = _last + timedelta(milliseconds=1)
            _last = stamp
    return f"run_{stamp:%Y%m%dT%H%M%S}{stamp.microsecond // 1000:03d}Z_{os.urandom(3).hex()}"


def run_id_time(run_id: str) -> datetime | None:
    """The UTC start time encoded in a run id, or None when the text is not a run id."""
    m = RUN_ID_RE.match(run_id)
    if not m:
        return None
    return datetime.strptime(m.group(1) + "000", "%Y%m%dT%H%M%S%f").replace(tzinfo=UTC)


def utc_timestamp(when: datetime | None = None) -> str:
    """ISO 8601 UTC with milliseconds and Z, the receipt's timestamp format: 2026-11-29T19:12:00.123Z."""
    when = (when or datetime.now(UTC)).astimezone(UTC)
    return f"{when:%Y-%m-%dT%H:%M:%S}.{when.microsecond // 1000:03d}Z"
