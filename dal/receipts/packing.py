"""What every store writes alike: a journaled result as stored, and who made a decision."""

from __future__ import annotations

import os
from typing import Any


def _stdout_summary(stdout: str) -> str:
    return stdout[:-1] if stdout.endswith("\n") else stdout


def pack_result(result: Any) -> Any:
    """A journaled result as stored: a summary that is the output itself (a command that completed with
    output) is not kept twice; `summary_is_stdout` says so and `unpack_result` gives it back."""
    if (isinstance(result, dict) and isinstance(result.get("stdout"), str) and result["stdout"]
            and result.get("summary") == _stdout_summary(result["stdout"])):
        out = {k: v for k, v in result.items() if k != "summary"}
        out["summary_is_stdout"] = True
        return out
    return result


def unpack_result(result: Any) -> Any:
    """A stored result as it was journaled (see pack_result)."""
    if isinstance(result, dict) and result.pop("summary_is_stdout", False) is True:
        result["summary"] = _stdout_summary(result.get("stdout") or "")
    return result


def decider() -> str:
    """Who records a decision: the login name, else the uid."""
    import getpass  # only decisions record who made them: a run does not pay for the import

    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers; the uid still says who
        return f"uid:{os.getuid()}" if hasattr(os, "getuid") else "unknown"
