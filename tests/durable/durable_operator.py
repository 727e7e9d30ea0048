"""The operator at 3 a.m., as a test helper: read what DAL prints and do it until the operation completes."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

NEXT = re.compile(r"^dal: next: (.*)$", re.M)


def next_command(text: str) -> list[str] | None:
    """The first `dal ...` command a `next:` line names, as argv without `dal`; None when there is none."""
    m = NEXT.search(text)
    if not m:
        return None
    cmd = re.search(r"`(dal [^`]+)`", m.group(1))
    return shlex.split(cmd.group(1))[1:] if cmd else None


def settle(d: Any, key: str, happened: Callable[[str], bool], first: Any, argv: list[str], *,
           limit: int = 12, cli: Callable[..., Any] | None = None) -> list[Any]:
    """Act as the operator at 3 a.m.: read what DAL says and do it, until the operation completes.

    A run waiting for approval is approved; an effect of unknown outcome is looked up in the world
    (`happened(command)`) and resolved as done or retry; after any other stop (a store fault, an
    interruption) the command the `next:` line of `first` (or of the last step) names is run, or, when
    DAL says nothing ran, the same command (`argv`) again. Every step runs `dal` in the workspace (in this
    process unless `cli` says otherwise). Returns every result, the completing one last."""
    cli = cli or d.cli
    got: list[Any] = []
    r = first
    for _ in range(limit):
        got.append(r)
        if r.code == 0:
            return got
        stored = d.receipts()
        latest = stored[-1] if stored else {"status": None, "effects": {"items": []}}
        items = latest["effects"]["items"]
        held = [i for i in items if i["status"] in ("pending_approval", "uncertain")]
        if r.code == 3 and latest["status"] == "waiting" and held:
            h = held[-1]
            if h["status"] == "pending_approval":
                decided = cli("approve", key, "--effect", str(h["seq"]))
            else:
                outcome = "done" if happened(h["command"]) else "retry"
                decided = cli("resolve", key, "--effect", str(h["seq"]), "--as", outcome, "--note", "looked")
            assert decided.code == 0, decided
            argv = ["resume", key]
            r = cli(*argv)
            continue
        follow = next_command(r.err)
        if follow is None:
            assert "nothing ran" in r.err.lower(), r  # then the same command again is the move
        else:
            assert follow[0] in ("resume", "run"), (r, latest["status"])
            argv = follow
        r = cli(*argv)
    raise AssertionError(f"the operation {key!r} did not complete in {limit} steps: {got[-3:]}")
