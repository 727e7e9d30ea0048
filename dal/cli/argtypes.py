"""Argument types shared by the commands: clear messages for a bad number or duration."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number above zero; `1_000_000` and `1,000,000` are accepted."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds above zero, with or without a trailing `s`."""
    try:
        value = float(text.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MIN_MEMORY = 16 << 20


def memory_size(text: str) -> int:
    """A memory size: bytes, or with a unit K, M, G or T (powers of 1024; `KB`, `KiB`, `MB`... too)."""
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
        raise argparse.ArgumentTypeError(f"expected a size such as 512M or 2G, got {text!r}") from None
    if value < MIN_MEMORY:
        raise argparse.ArgumentTypeError(f"must be at least 16M, got {text}")
    return value
