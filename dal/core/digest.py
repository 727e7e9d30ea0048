"""SHA-256 for receipts (a script's and an artifact's digest) and lock file names.

`hashlib` loads OpenSSL when it is imported (~5 ms, paid by every `dal run`); CPython's own SHA-256
module computes the same digest and loads in a fraction of a millisecond. Other Pythons use hashlib.
"""

from __future__ import annotations

try:
    from _sha2 import sha256  # CPython 3.12 and later
except ImportError:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:  # pragma: no cover - not CPython
        from hashlib import sha256

__all__ = ["sha256", "text_sha256"]


def text_sha256(text: str) -> str:
    """The hex SHA-256 of `text` as UTF-8 (a script's digest)."""
    return sha256(text.encode("utf-8")).hexdigest()
