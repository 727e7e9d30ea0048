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
