"""The console's addresses, for anything that wants to point a person at a run (`dal mcp`, a worker's
log): plain string work, no web server imported."""

from __future__ import annotations

from urllib.parse import quote


def run_path(run_id: str) -> str:
    """The path of a run's page: `/runs/RUN_ID`."""
    return "/runs/" + quote(run_id, safe="")


def run_url(base: str, run_id: str) -> str:
    """The URL of a run's page under the console at `base` (e.g. `http://127.0.0.1:8470`, as `dal console`
    prints it, without the login token). The page needs a logged-in session: it shows the receipt, the
    journal, the decisions and, when the run waits for a person, the forms that decide it."""
    return base.rstrip("/") + run_path(run_id)


def waiting_url(base: str) -> str:
    """The URL of the page of runs waiting for a person."""
    return base.rstrip("/") + "/waiting"
