"""What a run fsyncs at its end, watched with strace on a real `dal run`: the receipt is committed to the
store with an fsync before its files are written, and the files (copies the store already holds) are not
fsynced; when the store cannot take the receipt, the files are its only record and are fsynced
(docs/durability.md, "What is fsynced")."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")


def traced(durable: Any, tmp_path: Path, **env: str) -> list[str]:
    """The fsync, fdatasync and rename calls of `dal run -q job.dal` (with their paths), in order."""
    durable.write("job.dal", 'run("true")\n')
    log = tmp_path / "strace.log"
    argv = ["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2", "-o", str(log),
            *durable.argv("run", "-q", "--key", "k", "job.dal")]
    subprocess.run(argv, cwd=durable.ws, env=durable.env(**env), capture_output=True, timeout=120)
    return [line for line in log.read_text().splitlines() if "(" in line]


def test_the_receipt_is_fsynced_in_the_store_and_its_files_are_not(durable: Any, tmp_path: Path) -> None:
    calls = traced(durable, tmp_path)
    json_rename = next(i for i, c in enumerate(calls) if re.search(r"rename.*receipts/run_\w+\.json\"", c))
    wal_syncs = [i for i, c in enumerate(calls) if "sync(" in c and "dal.db-wal>" in c]
    assert any(i < json_rename for i in wal_syncs), calls  # the receipt's commit, before its files
    assert not [c for c in calls if "sync(" in c and "/receipts" in c], calls
    assert durable.latest()["status"] == "completed"


def test_files_are_fsynced_when_they_are_the_only_record(durable: Any, tmp_path: Path) -> None:
    # Writes of this run: the run (1), the intent (2), the result (3), the receipt (4), which fails.
    calls = traced(durable, tmp_path, DAL_TEST_STORE_FAULT="locked:4")
    synced = [c for c in calls if "sync(" in c and "/receipts" in c]
    assert any(".json." in c for c in synced) and any(".md." in c for c in synced), calls
    assert any(re.search(r"fsync\(\d+</[^>]*receipts>", c) for c in synced), calls  # the folder: the renames
    assert list((durable.ws / ".dal" / "receipts").glob("run_*.json"))
