"""Run deeply recursive work (parsing, resolving, formatting, evaluating) in a thread with a big stack.

Deep recursion in a script and deeply nested source then end in a clean DAL error (a RecursionError the
caller turns into one) rather than a crash of the host.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_STACK_BYTES = 512 * 1024 * 1024
_RECURSION_LIMIT = 200_000


def in_big_stack(fn: Callable[[], T]) -> T:
    """Run `fn` in a thread with a large stack; re-raise what it raised. Ctrl-C reaches `fn`'s runtime
    through `Runtime.interrupt`, which the caller wires to its signal handlers."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the calling thread
            box["error"] = e

    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
    old_size = threading.stack_size()
    try:
        threading.stack_size(_STACK_BYTES)
        t = threading.Thread(target=target, name="dal-script", daemon=True)
        t.start()
    finally:
        threading.stack_size(old_size)
    while t.is_alive():
        t.join(0.05)
    if "error" in box:
        raise box["error"]
    return box["value"]
