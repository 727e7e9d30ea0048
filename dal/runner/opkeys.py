"""Which operation keys a script may choose for itself with operation("K").

DAL picks some keys itself: `job:<id>` for a job submitted without a key (dal/receipts/jobs.py) and
`schedule:NAME:<slot>` for every slot of a schedule (dal/worker/schedules.py), and names a run without a
key `script:<file stem>`. All are predictable, so a
script that named one first would take the operator's later job or slot (its run would be `skipped`, or
the slot would "fire" as the squatter's job). Those prefixes are DAL's: a script's operation() may not
use them. The operator may still give such a key on a command line (`dal run --key job:3` to work a job
by hand), but `dal submit --key` refuses them like a script's: job 7's `job:7` would find another job
holding it.
"""

from __future__ import annotations

from dal.core.jsontext import surrogate_at

# `script:NAME` is the operation name of a run without a key (what `dal receipts` lists for `dal run
# send.dal`): a script whose operation("script:send") took it would list as, and be decided as, the
# operator's keyless run.
RESERVED_PREFIXES: tuple[str, ...] = ("job:", "schedule:", "script:")


def script_key_problem(key: str) -> str | None:
    """Why a script may not name `key` in operation(), or None when it may."""
    if not key.strip():
        return "an operation key must not be empty"
    if (at := surrogate_at(key)) is not None:
        return (f"the operation key holds a lone surrogate (\\u{ord(key[at]):04x} at character {at}), which is "
                "not valid Unicode text")
    return reserved_key_problem(key)


def reserved_key_problem(key: str) -> str | None:
    """Why `key` is one of the keys DAL gives jobs and schedule slots itself, or None."""
    for prefix in RESERVED_PREFIXES:
        if key.startswith(prefix):
            return (f"the operation key {key!r} starts with {prefix!r}, which DAL keeps for the keys it gives "
                    "jobs and schedule slots (and the name of a run without a key) itself: choose another key")
    return None
