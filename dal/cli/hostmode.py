"""Host mode (`--json`): every command prints exactly one JSON object on stdout, in every outcome.

The object's `kind` tells a host what it holds (docs/cli.md#host-mode): `receipt`, `runs`, `decision`,
`diagnostics`, `policy_decision`, `job`, `jobs`, `workers`, `schedule`, `schedules`, or `error` — the
one a command prints when it could not do what was asked (no run could start, an unknown run, a usage
error): `{"kind": "error", "error": {"message": ..., "exit_code": ...}}`. Human messages still go to
stderr, prefixed `dal: error: `.
"""

from __future__ import annotations

import sys
from typing import Any

_state = {"active": False, "printed": False}


def activate(argv: list[str]) -> None:
    """Called by main() before parsing: `--json` anywhere in the arguments asks for host mode, so that even
    a usage error (a mistyped flag next to --json) is answered in JSON. Arguments after `--` and a script's
    own arguments (after the script path of `dal run`) are the script's, not dal's."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    _state["active"] = "--json" in words
    _state["printed"] = False


def active() -> bool:
    return _state["active"]


def emit(kind: str, body: dict[str, Any], out: Any = None) -> None:
    """Print the one JSON object of this command on `out` (stdout): `kind` first, then `body`."""
    from dal.core.jsontext import dumps

    out = out or sys.stdout
    out.write(dumps({"kind": kind, **body}, indent=2) + "\n")
    out.flush()
    _state["printed"] = True


def error(message: str, exit_code: int, *, out: Any = None, err: Any = None, json: bool = False) -> int:
    """Say that the command failed: `dal: error: MESSAGE` on stderr (`err`) and, in host mode (or `json`),
    the error object on stdout (`out`), once. Returns `exit_code`."""
    from dal.core.visible import visible  # a message may quote a script's text: shown, not played

    (err or sys.stderr).write(f"dal: error: {visible(message, lines=True)}\n")
    if (_state["active"] or json) and not _state["printed"]:
        emit("error", {"error": {"message": message, "exit_code": exit_code}}, out)
    return exit_code


def finish(exit_code: int) -> int:
    """At the end of a command in host mode: a command that printed nothing on stdout (it exited through
    a path that only spoke to stderr) still gives the host its one object."""
    if _state["active"] and not _state["printed"] and exit_code != 0:
        emit("error", {"error": {"message": f"dal exited {exit_code} (see stderr)", "exit_code": exit_code}})
    return exit_code
