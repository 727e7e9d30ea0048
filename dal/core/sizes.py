"""Sizes as people write them, read one way everywhere: `--max-memory`, `--max-stored-output`,
`$DAL_RUN_STORE_LIMIT`, a job's spec and `[limits]` in dal.toml.

A size is a number of bytes, or a number (`1.5` too) with a unit K, M, G or T, powers of 1024, written
also as `KB`, `KiB`, `MB`, ... in either case; `_` may group digits.
"""

from __future__ import annotations

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, minimum: int = 1) -> int:
    """The size `text` says, in bytes, at least `minimum`. Raises ValueError saying what was expected."""
    t = text.strip().lower().replace("_", "")
    for suffix in ("ib", "b"):
        if t.endswith(suffix) and len(t) > len(suffix) and t[-len(suffix) - 1] in "kmgt":
            t = t[: -len(suffix)]
            break
    unit = t[-1:] if t[-1:] in _UNITS and not t[-1:].isdigit() else ""
    number = t[: len(t) - len(unit)]
    try:
        value = int(float(number) * _UNITS[unit])
    except (ValueError, OverflowError):
        raise ValueError(f"expected a size such as 512M or 2G, got {text!r}") from None
    if value < minimum:
        raise ValueError(f"must be at least {minimum:,} bytes, got {text}")
    return value
