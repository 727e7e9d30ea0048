"""What `dal run` says on stderr the moment a run() is denied: where, why, and what to do instead.

A denied run() is not an error of the script (it gets a `denied` result and goes on), so without this the
only trace would be in the receipt. The hint is chosen from the policy's reason; a reason that names its own
remedy (`add it with --allow-run=...`) needs none.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

# (words in the reason, the hint): first match wins.
_HINTS: tuple[tuple[str, str], ...] = (
    ("glob", "DAL runs no shell, so nothing expands patterns: quote the pattern to pass it literally "
     "(`ls 'notes/*.md'`), or list the files with `find notes -name '*.md'`"),
    ("command substitution", "run the inner command with its own run() and pass its output "
     "(`let d = run(\"date\").stdout`)"),
    ("variable expansion", "DAL runs no shell: build the command in DAL (`run(\"echo \" + name)`) or read "
     "the variable with env()"),
    ("parameter expansion", "DAL runs no shell: build the command in DAL (`run(\"echo \" + name)`)"),
    ("brace expansion", "spell each word out, or loop over them in DAL"),
    ("reads outside the allowed roots", "reads are allowed in the workspace; add a read root with "
     "--allow-read=PATH or [paths] read in dal.toml"),
    ("is a shell builtin", "DAL runs programs, not a shell: do it in DAL (a loop, a variable), or run "
     "the program that does it"),
    ("runs other programs or code", "run the program it would start directly, or allow it by name in "
     "dal.toml's [run] allow if you trust every script that may use it"),
    ("approval denied by", "a person denied it; `dal receipt show latest` shows the decision and its note"),
    ("syntax not allowed", "DAL runs each command without a shell; write pipelines and loops in DAL, or "
     "see `dal policy check \"CMD\"` for what is allowed"),
)


def _shown_root(root: str, workspace: str) -> str:
    if root == workspace:
        return "."
    return os.path.relpath(root, workspace) if root.startswith(workspace.rstrip("/") + "/") else root


def write_hint(write_roots: Sequence[str] = (), workspace: str | None = None) -> str:
    """How to allow one more write root without losing the ones in force. Naming write roots at a run's
    start replaces the workspace as the write root (that is how a run is narrowed to `out/`), so the
    flag that works names them all: the roots in force and the new one."""
    ws = workspace or ""
    shown = [_shown_root(r, ws) for r in write_roots] if ws else []
    if not shown or shown == ["."]:
        return ("writes are allowed only in the workspace; to allow PATH too, keep the workspace in the list: "
                "--allow-write=.,PATH (the write roots a run names replace the workspace), or "
                "[paths] write = [\".\", \"PATH\"] in dal.toml")
    import shlex  # only for this hint: a one-line `dal run` does not load it (tests/runner/test_lazy_imports.py)

    flag = shlex.quote(",".join([*shown, "PATH"]))
    return (f"writes are allowed only in {', '.join(shown)}; to allow PATH too, name them all: "
            f"--allow-write={flag}, or list them all in [paths] write in dal.toml")


def hint(reason: str, policy: Any = None) -> str | None:
    """The hint for a denial with this reason (by the policy in force, when known), or None when the
    reason already says what to do."""
    if "--allow-" in reason or "[run] allow" in reason:
        return None
    if "writes outside the allowed roots" in reason:
        return write_hint(getattr(policy, "write_roots", ()), getattr(policy, "workspace", None))
    for words, text in _HINTS:
        if words in reason:
            return text
    return None


class DenialReporter:
    """RunHooks.on_denied for the command line: renders each denial as a located warning on stderr, counts
    them for the closing line."""

    def __init__(self, stream: Any, color: bool) -> None:
        self.stream = stream
        self.color = color
        self.count = 0

    def __call__(self, denied: Any) -> None:
        from dal.core.diagnostics import render

        self.count += 1
        if denied.help is None:
            denied.help = hint(denied.reason, getattr(denied, "policy", None))
        self.stream.write(render(denied, self.color, severity="warning") + "\n")
        self.stream.flush()
