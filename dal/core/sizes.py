"""Sizes as people write them, read one way everywhere: `--max-memory`, `--max-stored-output`,
`$DAL_RUN_STORE_LIMIT`, a job's spec and `[limits]` in dal.toml; and shown one way (`format_size` for a
limit, exact; `approx_size` for what a run wrote).

A size is a number of bytes, or a number (`1.5` too) with a unit K, M, G or T, powers of 1024, written
also as `KB`, `KiB`, `MB`, ... in either case; `_` may group digits; `bytes` may follow a number of bytes.
"""

from __future__ import annotations

__all__ = ["approx_size", "format_size", "parse_size"]

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, minimum: int = 1) -> int:
    """The size `text` says, in bytes, at least `minimum`. Raises ValueError saying what was expected."""
    t = text.strip().lower().replace("_", "")
    if t.endswith("bytes"):  # as format_size writes a size that is no whole number of KiB
        t = t[:-5]
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


def format_size(n: int) -> str:
    """`2 GiB`, `512 MiB`, `300 bytes`: exact, in the largest unit it is a whole number of (a limit, as the
    operator would write it again)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def approx_size(n: int) -> str:
    """`300 B`, `1.5 KiB`, `12.0 MiB`: to a tenth of the largest unit below it (what a run wrote)."""
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
    raise AssertionError  # pragma: no cover
