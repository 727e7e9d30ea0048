"""What `dal run` says on stderr the moment a run() is denied: where, why, and what to do instead.

A denied run() is not an error of the script (it gets a `denied` result and goes on), so without this the
only trace would be in the receipt. The hint is chosen from the policy's reason; a reason that names its own
remedy (`add it with --allow-run=...`) needs none.
"""

from __future__ import annotations

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
    ("writes outside the allowed roots", "writes are allowed in the workspace; add a write root with "
     "--allow-write=PATH or [paths] write in dal.toml"),
    ("is a shell builtin", "DAL runs programs, not a shell: do it in DAL (a loop, a variable), or run "
     "the program that does it"),
    ("runs other programs or code", "run the program it would start directly, or allow it by name in "
     "dal.toml's [run] allow if you trust every script that may use it"),
    ("approval denied by", "a person denied it; `dal receipt show latest` shows the decision and its note"),
    ("syntax not allowed", "DAL runs each command without a shell; write pipelines and loops in DAL, or "
     "see `dal policy check \"CMD\"` for what is allowed"),
)


def hint(reason: str) -> str | None:
    """The hint for a denial with this reason, or None when the reason already says what to do."""
    if "--allow-" in reason or "[run] allow" in reason:
        return None
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
            denied.help = hint(denied.reason)
        self.stream.write(render(denied, self.color, severity="warning") + "\n")
        self.stream.flush()
