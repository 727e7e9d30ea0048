"""How a run ended, for its caller: its report and exit code, and the error for a problem outside the
script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dal.core.errors import DalError
from dal.core.records import ValueRecord

EXIT_BY_STATUS = {
    "completed": 0,
    "skipped": 0,
    "failed": 1,
    "rejected": 2,
    "waiting": 3,
    "exhausted": 4,
    "interrupted": 130,
}


class RunnerError(Exception):
    """A problem outside the script: the store, the key lock, the resumed run. Exit 2 (3 for a busy key)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.where: DalError | None = None  # the script's place it stopped at (operation("K")), for the caret


class RunReport(ValueRecord):
    """How a run ended: its receipt, exit code, error, receipt files and the signal that stopped it."""

    __slots__ = ("receipt", "exit_code", "error", "json_path", "md_path", "signal_name", "store_problem", "next_step",
                 "files_error")

    def __init__(
        self,
        receipt: dict[str, Any],
        exit_code: int,
        error: DalError | None = None,
        json_path: Path | None = None,
        md_path: Path | None = None,
        signal_name: str | None = None,
        store_problem: str | None = None,  # the store could not record the run's end: what and why
        next_step: str | None = None,  # ... and what to do then
        files_error: str | None = None,  # the run ended and is stored, but its receipt files failed: why
    ) -> None:
        self.receipt = receipt
        self.exit_code = exit_code
        self.error = error
        self.json_path = json_path
        self.md_path = md_path
        self.signal_name = signal_name
        self.store_problem = store_problem
        self.next_step = next_step
        self.files_error = files_error

